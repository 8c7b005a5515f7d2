"""Pure: Kafka's codecs (names, attribute ids, levels: native/'s codec table), Kafka-compatible compression, v2 batch
framing.

May import: transcoder.errors and transcoder_native (the compiled framing, native/) only. No Kafka client.
"""

from transcoder.codecs.framing import (
    BATCH_OVERHEAD,
    compress,
    decompress,
    encode_batch,
    encode_batches,
    encode_record,
    records_section,
)
from transcoder.codecs.names import (
    ATTRIBUTE_ID,
    BUILT_HERE,
    CODEC_OF_ID,
    CODECS,
    LEVELS,
    LIBRDKAFKA_MAX_LEVEL,
    TABLE,
    ZSTD_MIN_PRODUCE_VERSION,
    Codec,
    CodecRow,
    broker_recompresses,
    built_here,
    check_level,
    is_codec,
    stored_recompressed,
)
from transcoder.codecs.pool import POOL_THREAD_PREFIX, pool_cpu_by_thread
from transcoder.codecs.stored import (
    Rebatcher,
    Section,
    StoredRecords,
    decode_stored,
    restamp,
    seal_sections,
    stored_from_columns,
)

__all__ = ["ATTRIBUTE_ID", "BATCH_OVERHEAD", "BUILT_HERE", "CODECS", "CODEC_OF_ID", "LEVELS", "LIBRDKAFKA_MAX_LEVEL",
           "TABLE", "ZSTD_MIN_PRODUCE_VERSION", "Codec", "CodecRow", "broker_recompresses", "built_here", "check_level",
           "compress", "decompress", "encode_batch", "encode_batches", "encode_record", "is_codec", "records_section",
           "stored_recompressed", "Rebatcher", "Section", "StoredRecords", "decode_stored", "restamp", "seal_sections",
           "stored_from_columns", "POOL_THREAD_PREFIX", "pool_cpu_by_thread"]
