"""groups' end offsets after a leader failover, without Kafka: librdkafka's ListOffsets keeps its cached leader
epoch, so a FENCED_LEADER_EPOCH answer is followed by a metadata request before the next try."""

from __future__ import annotations

from concurrent.futures import Future
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from transcoder.errors import MigrationError
from transcoder.migrate.groups import GroupAdmin, _ends


class FakeAdmin:
    """ListOffsets answering each try's errors per partition in turn; every metadata request noted."""

    def __init__(self, *tries: dict[int, int]) -> None:
        self.tries = list(tries)
        self.calls: list[str] = []

    def list_offsets(self, request: dict, **kw: Any) -> dict:
        self.calls.append("list_offsets")
        errors = self.tries.pop(0) if self.tries else {}
        out = {}
        for tp in request:
            f: Future = Future()
            if tp.partition in errors:
                f.set_exception(KafkaException(KafkaError(errors[tp.partition])))
            else:
                f.set_result(SimpleNamespace(offset=100 + tp.partition))
            out[tp] = f
        return out

    def list_topics(self, topic: str, timeout: float) -> None:
        self.calls.append(f"list_topics {topic}")


def test_a_fenced_leader_epoch_refreshes_the_metadata_and_is_tried_again() -> None:
    admin = FakeAdmin({2: KafkaError.FENCED_LEADER_EPOCH}, {2: KafkaError.FENCED_LEADER_EPOCH})
    ga = GroupAdmin(admin, None, timeout_s=30)  # type: ignore[arg-type]
    assert _ends(ga, "t", 3) == {0: 100, 1: 101, 2: 102}
    assert admin.calls == ["list_offsets", "list_topics t", "list_offsets", "list_topics t", "list_offsets"]


def test_a_final_error_is_not_tried_again() -> None:
    admin = FakeAdmin({0: KafkaError.TOPIC_AUTHORIZATION_FAILED})
    ga = GroupAdmin(admin, None, timeout_s=30)  # type: ignore[arg-type]
    with pytest.raises(MigrationError) as err:
        _ends(ga, "t", 3)
    assert err.value.kafka_error == "TOPIC_AUTHORIZATION_FAILED" and admin.calls == ["list_offsets"]
