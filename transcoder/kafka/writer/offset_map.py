"""The offset map as a sink's hook: where each delivered record came from, recorded when the config has a
`migration:` section (`RecordedMap`, over kafka.offset_map_topic's recorder), nothing otherwise (`NoOffsetMap`).

A sink calls its hook without asking whether there is a map; the one per-record call (a record's delivery report)
is asked for once, when a producer's callback is built (`per_record`: None without a map).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from transcoder.kafka.offset_map_topic import CopierFigures, OffsetMapRecorder

#: (source topic, destination topic, partition, source offset, destination offset): one delivered record
MapAdd = Callable[[str, str, int, int, int], None]


class OffsetMap(Protocol):
    """What a sink (and the lane's source watch) does with the offset map."""

    def per_record(self) -> MapAdd | None:
        """The call a delivery report makes per record; None when there is no map (the callback then makes none)."""

    def add(self, source: str, destination: str, partition: int, offset: int, dest_offset: int) -> None: ...

    def add_section(self, source: str, destination: str, partition: int, offsets: Sequence[int], base: int) -> None:
        """A delivered batch: its records' source `offsets`, at destination offsets base, base + 1, ..."""

    def source_id(self, topic: str, topic_id: str) -> None: ...
    def write_through(self, producer: Any) -> None: ...
    def discard(self) -> None: ...
    def health(self, destination: str, errors_total: int, last_error_ms: int | None,
               copier: Callable[[], CopierFigures] | None = None) -> None: ...

    def flush(self, timeout: float) -> bool:
        """True when what was added is durable (or there is nothing to store)."""

    def close(self, timeout: float) -> None: ...


class RecordedMap:
    """The offset map of a lane with a `migration:` section: every call goes to its recorder."""

    def __init__(self, recorder: OffsetMapRecorder) -> None:
        self.recorder = recorder
        self.add: MapAdd = recorder.add

    def per_record(self) -> MapAdd | None:
        return self.recorder.add

    def add_section(self, source: str, destination: str, partition: int, offsets: Sequence[int], base: int) -> None:
        add = self.recorder.add
        for i, offset in enumerate(offsets):
            add(source, destination, partition, offset, base + i)

    def source_id(self, topic: str, topic_id: str) -> None:
        self.recorder.source_id(topic, topic_id)

    def write_through(self, producer: Any) -> None:
        self.recorder.write_through(producer)

    def discard(self) -> None:
        self.recorder.discard()

    def health(self, destination: str, errors_total: int, last_error_ms: int | None,
               copier: Callable[[], CopierFigures] | None = None) -> None:
        self.recorder.health(destination, errors_total, last_error_ms, copier)

    def flush(self, timeout: float) -> bool:
        return self.recorder.flush(timeout)

    def close(self, timeout: float) -> None:
        self.recorder.close(timeout)


class NoOffsetMap:
    """No `migration:` section: nothing is recorded, and what there is to store is always durable."""

    def per_record(self) -> MapAdd | None:
        return None

    def add(self, source: str, destination: str, partition: int, offset: int, dest_offset: int) -> None:
        pass

    def add_section(self, source: str, destination: str, partition: int, offsets: Sequence[int], base: int) -> None:
        pass

    def source_id(self, topic: str, topic_id: str) -> None:
        pass

    def write_through(self, producer: Any) -> None:
        pass

    def discard(self) -> None:
        pass

    def health(self, destination: str, errors_total: int, last_error_ms: int | None,
               copier: Callable[[], CopierFigures] | None = None) -> None:
        pass

    def flush(self, timeout: float) -> bool:
        return True

    def close(self, timeout: float) -> None:
        pass
