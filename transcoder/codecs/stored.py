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
- `stored_from_columns(offsets, keys, values, headers, stamps)`: records read elsewhere (the Spark engine's Arrow
  columns) as a `StoredRecords`, so that they take the same compiled path as fetched ones.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise

from transcoder_native import Rebatcher, Section, StoredRecords, decode_stored, encode_batch, restamp, seal_sections

__all__ = ["Rebatcher", "Section", "StoredRecords", "decode_stored", "restamp", "seal_sections", "stored_from_columns"]


def stored_from_columns(offsets: Sequence[int], keys: Sequence[bytes | None], values: Sequence[bytes | None],
                        headers: Sequence[Sequence[tuple[str, bytes | None]] | None], stamps: Sequence[int]
                        ) -> StoredRecords:
    """One source partition's records, given as columns in offset order, as a StoredRecords with these offsets
    (a gap in them, as in a compacted or transactional source, stays a gap): framed uncompressed, one v2 batch per
    run of consecutive offsets, and read back, with no record object per record. ValueError for no records or
    offsets not increasing."""
    n = len(offsets)
    if not n:
        raise ValueError("no records")
    rows = list(zip(keys, values, headers, stamps, strict=True))
    cuts = [0, *(i for i in range(1, n) if offsets[i] != offsets[i - 1] + 1), n]  # where a gap is: a new batch
    if any(offsets[i] <= offsets[i - 1] for i in cuts[1:-1]):
        raise ValueError(f"offsets must increase: {offsets[0]}..{offsets[-1]}")
    if len(cuts) == 2:  # no gap (the usual case): one batch, the rows as they are
        return decode_stored(encode_batch(rows, base_offset=offsets[0]), offsets[0])
    data = b"".join(encode_batch(rows[a:b], base_offset=offsets[a]) for a, b in pairwise(cuts))
    return decode_stored(data, offsets[0])
