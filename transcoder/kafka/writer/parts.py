"""What every sink of a lane is given, whatever its mode (`SinkParts`: the acknowledgements, the failures and their
dead-letter topic, the offset map, the client factory), and `SinkFront`, which shows a sink's parts as the `Sink`
Protocol names them. Neither knows the guarantee or the copy path: the sinks' classes are the modes."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

from transcoder.config import Config
from transcoder.errors import DeliveryError
from transcoder.kafka.offset_map_topic import CopierFigures
from transcoder.kafka.producer import BatchProducer
from transcoder.kafka.writer.deliveries import Deliveries
from transcoder.kafka.writer.failures import DeadLetterTopic, Failures
from transcoder.kafka.writer.offset_map import OffsetMap
from transcoder.kafka.writer.producers import ClientFactory
from transcoder.pipeline.ledger import Ledger
from transcoder.pipeline.routes import Target


@dataclass(frozen=True)
class SinkParts:
    """The parts of one lane's sink (`name`: the lane's) writing the records of `targets`."""

    config: Config
    name: str
    targets: tuple[Target, ...]
    deliveries: Deliveries
    failures: Failures
    dead_letters: DeadLetterTopic
    offset_map: OffsetMap
    create: ClientFactory
    #: the lane's CPU seconds so far (its threads'), published with the offset map's health; None: not measured
    cpu: Callable[[], float] | None = None

    @property
    def ledger(self) -> Ledger:
        return self.deliveries.ledger

    @property
    def sources(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(s for t in self.targets for s in t.sources))

    def client_id(self, target: Target) -> str:
        return f"transcoder-{self.name}-{target.name}" if self.name != target.name else f"transcoder-{target.name}"

    def flush_map(self, timeout: float) -> bool:
        """Store the offset map of every record acknowledged so far; True when it is durable (or there is none).

        The engine calls it before committing source offsets: a committed offset never outruns its map.
        """
        failures = self.failures
        for dest in self.deliveries.source_of:
            self.offset_map.health(dest, failures.errors_total, failures.last_error_ms, partial(self.figures, dest))
        return self.offset_map.flush(timeout)

    def figures(self, destination: str) -> CopierFigures:
        """The lane's figures for `destination` since it started, what `migrate report` reads as realized: records,
        their bytes and the batches' bytes as of the producers' last statistics emission (one moment for the
        three), and the lane's CPU now."""
        d = self.deliveries
        return CopierFigures(records=d.records_total[destination], record_bytes=d.record_bytes_total[destination],
                             wire_bytes=d.wire_bytes_total[destination],
                             cpu_s=None if self.cpu is None else round(self.cpu(), 3))

    def settle(self, left: Callable[[], float], timeout: float, handle_failures: Callable[[], None]) -> None:
        """The end of a drain, once the producers are flushed: failures handled (dead-lettered, or raised), the
        dead-letter copies delivered, the offset map durable (else DeliveryError: nothing is committed past it)."""
        self.dead_letters.flush(left())
        handle_failures()
        self.dead_letters.flush(left())
        if not self.flush_map(left()):
            raise DeliveryError(f"lane {self.name}: the offset map was not acknowledged by "
                                f"{self.config.offset_map_topic} within {timeout:.0f} s: nothing is committed past it",
                                topic=self.config.offset_map_topic)

    def final_statistics(self, own: Sequence[BatchProducer], producers: int, poll: Callable[[float], None]) -> None:
        """One more statistics emission per producer (`producers` of them): the last batches. transcoder's own
        (`own`) emit at once; librdkafka's are waited for (a statistics interval at most), as it emits on its own
        clock. `poll`: the sink's."""
        deliveries = self.deliveries
        seen = deliveries.stats_emissions
        for p in own:
            p.emit_statistics()
        deadline = time.monotonic() + self.config.metrics.stats_interval_ms / 1000 + 1
        while deliveries.stats_emissions < seen + producers and time.monotonic() < deadline:
            poll(0.1)

    def close(self, own: Sequence[BatchProducer], timeout: float) -> None:
        """Stop the producers transcoder runs itself (`own`; librdkafka's are closed by the garbage collector)."""
        for p in own:
            p.close(timeout)
        self.offset_map.close(timeout)


class SinkFront:
    """A sink's parts as the Sink Protocol names them; each sink class adds its mode's producers and calls."""

    def __init__(self, parts: SinkParts) -> None:
        self.parts = parts
        d = parts.deliveries
        self.target_of = {t.topic_for(s): t for t in parts.targets for s in t.sources}
        self.codec_of = d.codec_of
        self.source_of = d.source_of
        self.acked_total = d.acked_total
        self.acked_ts = d.acked_ts

    @property
    def config(self) -> Config:
        return self.parts.config

    @property
    def name(self) -> str:
        return self.parts.name

    @property
    def ledger(self) -> Ledger:
        return self.parts.deliveries.ledger

    @property
    def offset_map(self) -> OffsetMap:
        return self.parts.offset_map

    @property
    def start_ms(self) -> float:
        return self.parts.deliveries.start_ms

    @property
    def stats_emissions(self) -> int:
        return self.parts.deliveries.stats_emissions

    @property
    def dead_lettered(self) -> int:
        """Records copied to the dead-letter topic (acknowledged there)."""
        return self.parts.dead_letters.count

    def flush_acked(self) -> None:
        """Acknowledgements since the last call, into the metrics and `acked_total` (not per record)."""
        self.parts.deliveries.flush_acked()

    def flush_map(self, timeout: float) -> bool:
        return self.parts.flush_map(timeout)



def one_destination(target: Target) -> str | None:
    """The one destination topic of `target`, if it has one (its producer's reports then never ask the topic)."""
    dests = {target.topic_for(s) for s in target.sources}
    return next(iter(dests)) if len(dests) == 1 else None
