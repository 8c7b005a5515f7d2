"""The sealing of the batch producer's batches: records framed and compressed, and sections (batches re-batched
elsewhere) sealed, with the destination's codec and level, under the producer's id, epoch and each partition's next
sequence numbers (ProducerSequences); and batches stamped again under a new producer id."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from transcoder.codecs import Codec, encode_batches, restamp, seal_sections
from transcoder.kafka.producer.batches import Batch, Partition, Record
from transcoder.kafka.producer.sequences import ProducerSequences


class BatchEncoder:
    """One producer's sealing: its codec and level, transactional or not, and the sequences its batches take."""

    def __init__(self, sequences: ProducerSequences, *, codec: Codec, level: int | None, transactional: bool) -> None:
        self.sequences = sequences
        self.codec, self.level, self.transactional = codec, level, transactional

    def seal(self, taken: Mapping[Partition, list[Record]],
             sections: Mapping[Partition, Any] | None = None) -> dict[Partition, Batch]:
        """The batches taken, framed and compressed all at once (in parallel on all cores, the GIL released), and
        the sections sealed, each under the next sequence numbers of its partition (taken once it is sealed)."""
        seq, now = self.sequences, time.monotonic()
        out = {}
        tps = list(taken)
        if tps:
            bases = [seq.peek(tp) for tp in tps]
            jobs = [(taken[tp], *seq.stamp(base)) for tp, base in zip(tps, bases, strict=True)]
            # framing reads a record's first four items (key, value, headers, timestamp); a Record's fifth is its size
            payloads = encode_batches(jobs, codec=self.codec, level=self.level,  # type: ignore[arg-type]
                                      transactional=self.transactional)
            for tp, payload in zip(tps, payloads, strict=True):  # sealed: their sequences are taken
                records = taken[tp]
                out[tp] = Batch(tp, records, seq.take(tp, len(records)), payload, now, sum(r[4] for r in records))
        if sections:
            stps = list(sections)
            sealed = seal_sections([sections[tp] for tp in stps], [seq.stamp(seq.peek(tp)) for tp in stps],
                                   codec=self.codec, level=self.level, transactional=self.transactional)
            for tp, payload in zip(stps, sealed, strict=True):
                s = sections[tp]
                out[tp] = Batch(tp, None, seq.take(tp, len(s)), payload, now, s.size, section=s)
        return out

    def stamp_again(self, retry: Mapping[Partition, Batch]) -> dict[Partition, Batch]:
        """Batches to send again under a new producer id: records framed again, sections' batches restamped (their
        header and CRC; what is compressed stays)."""
        out = self.seal({tp: b.records for tp, b in retry.items() if b.section is None and b.records is not None})
        for tp, b in retry.items():
            if b.section is not None:
                base = self.sequences.take(tp, b.count)
                out[tp] = Batch(tp, None, base, restamp(b.payload, *self.sequences.stamp(base)), b.first_sent,
                                b.size, section=b.section)
        return out
