"""Record sets as the broker stores them: read (decode_stored), re-batched (Rebatcher) and sealed for another
codec (seal_sections), without a record object per record; all compiled (native/src/stored.rs).

- `decode_stored(data, from_offset, aborted)`: a Fetch response's records from `from_offset` on, CRCs checked,
  control batches and aborted transactions left out (as a read_committed Java consumer), v0/v1 message sets
  read as records; a `StoredRecords` (len, offsets, next_offset, size, record(i)). ValueError naming the offset
  for data it cannot read.
- `Rebatcher(max_bytes, max_records)`: records appended (`add`) into v2 records sections closed by size
  (uncompressed, as librdkafka's batch.size) and count; `take(flush)` hands out the closed `Section`s.
- `seal_sections(sections, stamps, codec=, level=, transactional=)`: the v2 batches, compressed in parallel with the
  GIL released (`transactional`: with the attribute bit of a batch written in a transaction);
  `restamp(batch, producer_id, epoch, base_sequence, transactional=None)` gives one a new producer id without
  compressing again (`transactional`: None keeps its attribute bit, True sets it, False clears it; CRC after).
"""

from __future__ import annotations

from transcoder_native import Rebatcher, Section, StoredRecords, decode_stored, restamp, seal_sections

__all__ = ["Rebatcher", "Section", "StoredRecords", "decode_stored", "restamp", "seal_sections"]
