"""`transcoder local-kafka up --secured` on data a plain `up` formatted: the directory is upgraded, nothing lost.

The kept data has no SCRAM user, so `up` adds it over PLAINTEXT; it used to ask for both SCRAM mechanisms of the one
user in one AlterUserScramCredentials request, which Kafka's controller refuses (DUPLICATE_RESOURCE), and stopped
the broker it had just started (issue 42).
"""

from __future__ import annotations

from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.cli import run_cli
from transcoder.dev.local_kafka import LocalKafka


def _read(conf: dict[str, str], topic: str) -> list[bytes | None]:
    c = Consumer({**conf, "group.id": f"read-{conf.get('sasl.mechanism', 'plain')}", "auto.offset.reset": "earliest",
                  "enable.partition.eof": True})
    try:
        c.subscribe([topic])
        out: list[bytes | None] = []
        for _ in range(120):
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error() is not None:
                if m.error().code() == KafkaError._PARTITION_EOF:
                    return out
                raise AssertionError(m.error().str())
            out.append(m.value())
        raise AssertionError(f"no end of {topic} within 60 s: {out}")
    finally:
        c.close()


def _seed(bootstrap: str) -> None:
    """Topic `kept` with records r0, r1, r2 (the clients gone before the broker is)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("kept", 1, 1)])["kept"].result(30)
    p = Producer({"bootstrap.servers": bootstrap})
    for i in range(3):
        p.produce("kept", value=f"r{i}".encode())
    assert p.flush(30) == 0


def test_up_secured_upgrades_a_plain_data_directory(tmp_path):
    state_dir = tmp_path / "lk"
    local = LocalKafka(state_dir)
    try:
        _seed(local.up(lean=True).bootstrap)  # plain: no SCRAM user formatted into the data
        local.down(keep_data=True)

        up = run_cli("local-kafka", "up", "--secured", env={"TRANSCODER_LOCAL_KAFKA_DIR": str(state_dir)})
        assert up.returncode == 0, up.stderr
        st = local.state()
        assert st is not None and st.sasl_ssl_bootstrap is not None
        want = [b"r0", b"r1", b"r2"]
        assert _read({"bootstrap.servers": st.bootstrap}, "kept") == want  # the data kept
        for mechanism in ("SCRAM-SHA-512", "SCRAM-SHA-256"):  # the user has both credentials
            assert _read(st.sasl_ssl_config(mechanism), "kept") == want, mechanism
    finally:
        local.down()
