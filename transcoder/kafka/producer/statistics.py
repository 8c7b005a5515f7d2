"""The batch producer's statistics, in librdkafka's terms: per topic, the sizes and record counts of the batches sent
since the last emission, and the record bytes and records sent in all. Pure (the producer holds its lock around it)."""

from __future__ import annotations

from transcoder.kafka.statistics import TopicProduce, Window


class SentBatches:
    def __init__(self) -> None:
        self._batch_bytes: dict[str, list[int]] = {}
        self._batch_records: dict[str, list[int]] = {}
        self._sent: dict[str, list[int]] = {}  # topic -> [record bytes, records], cumulative

    def sent(self, topic: str, batch_bytes: int, records: int, record_bytes: int) -> None:
        """One batch of `topic` acknowledged."""
        self._batch_bytes.setdefault(topic, []).append(batch_bytes)
        self._batch_records.setdefault(topic, []).append(records)
        total = self._sent.setdefault(topic, [0, 0])
        total[0] += record_bytes
        total[1] += records

    def emit(self) -> dict[str, TopicProduce]:
        """The figures per topic; the batches' windows start again empty, the totals go on."""
        batch_bytes, self._batch_bytes = self._batch_bytes, {}
        batch_records, self._batch_records = self._batch_records, {}
        return {t: TopicProduce(batch_bytes=Window.from_values(batch_bytes.get(t, [])),
                                batch_records=Window.from_values(batch_records.get(t, [])),
                                record_bytes_total=v[0], records_total=v[1])
                for t, v in self._sent.items()}
