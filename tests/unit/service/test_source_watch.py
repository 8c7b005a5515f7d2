"""transcoder.service.source_watch.SourceWatch with a fake lane: a topic recreated while the lane held none of its
partitions is still reported when one is assigned again."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from transcoder.service.source_watch import SourceWatch

TP = ("src", 0)


class TopicIds:
    """The ids the watch asks (now) and the answers it takes later (answers)."""

    def __init__(self) -> None:
        self.ids = {"src": "id-old"}

    def now(self, topics: set[str]) -> dict[str, str]:
        return {t: self.ids[t] for t in topics}

    def answers(self) -> dict[str, str]:
        return {}

    def ask(self, topics: set[str]) -> None: ...
    def close(self) -> None: ...


class Path:
    def __init__(self) -> None:
        self.held: list[tuple[set[Any], bool]] = []

    def hold(self, tps: set[Any], on: bool) -> None:
        self.held.append((set(tps), on))

    def unknown_topics(self) -> set[str]:
        return set()


class Lane:
    def __init__(self) -> None:
        self.spec = SimpleNamespace(name="src.zstd")
        self.config = SimpleNamespace(on_source_loss="stop", migration=None, shutdown_timeout_s=1.0)
        self.metrics = SimpleNamespace(source_records_lost=lambda *a: None)
        self.checkpoint = SimpleNamespace(withheld=set())
        self.path = Path()
        self.assigned: set[Any] = set()
        self.eos = False

    def position(self, tp: Any) -> int | None:
        return 100 if tp == TP else None


def test_a_topic_recreated_while_its_partitions_were_lost_is_a_loss_when_one_comes_back():
    # Seen in a fresh-clone CI on a loaded machine: the lane lost its partitions while the topic was deleted; the
    # answer to its topic-id question came after that (the new id, nothing held): the watch took the new id, and
    # the partition assigned again was read on from the old topic's position, records 0..99 of the new one skipped.
    lane, ids = Lane(), TopicIds()
    watch = SourceWatch(lane, ids, every_s=1.0)  # type: ignore[arg-type]
    lane.assigned = {TP}
    assert watch.assigning([TP]) == set()
    watch.release([TP])  # lost: at offset 100
    lane.assigned = set()
    ids.ids["src"] = "id-new"  # deleted and recreated
    assert watch.check({"src": "id-new"}) == set()  # the late answer: nothing held, nothing to report yet
    assert watch.assigning([TP]) == {TP}  # handed back: the loss, from where the lane was
    assert lane.checkpoint.withheld == {TP}  # on_source_loss: stop: nothing committed for the new topic
    assert watch.error is not None and "id-old is now id-new" in str(watch.error)
    assert "was at offset 100" in str(watch.error)
