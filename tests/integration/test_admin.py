"""transcoder.kafka.admin on the real broker: what the unit tests cannot show."""

from __future__ import annotations

import time

from confluent_kafka.admin import AdminClient

from transcoder.kafka.admin import delete_topics


def test_delete_topics_waits_for_the_answers_before_its_client_goes(kafka, admin, topic_factory):
    # The bench deleted its topics without waiting, and its AdminClient was collected when it returned: the last
    # requests were never sent, and the source and client-table topics stayed (a fresh-clone CI run of ed15024).
    topics = [topic_factory(partitions=2) for _ in range(3)]
    client = AdminClient({"bootstrap.servers": kafka.bootstrap})
    failed = delete_topics(client, [*topics, "no-such-topic-7f3a"])
    del client
    assert failed == {}  # a topic already gone is not a failure
    # the broker's metadata follows the controller's commit within moments
    deadline = time.monotonic() + 10
    while left := set(admin.list_topics(timeout=10).topics) & set(topics):
        assert time.monotonic() < deadline, left
        time.sleep(0.2)
