"""The writer every engine writes through: one sink per lane, of the lane's mode (records or record sets, at least
or exactly once), built by `build_sink`; what an engine may call of it is the `Sink` Protocol (`TransactionalSink`
under exactly-once). Its parts have modules of their own: the Protocols (sink), the modes (records, record_sets,
transactional), what they share (parts, deliveries, failures, offset_map), the producers they build (producers), the
records and record-sets paths (record_routes, batching, destination_batcher), exactly-once's calls (transactions),
and what they report (metrics)."""

from transcoder.kafka.writer.factory import build_sink
from transcoder.kafka.writer.metrics import WriterMetrics
from transcoder.kafka.writer.producers import ClientFactory, build_client
from transcoder.kafka.writer.sink import ColumnRun, Sink, TransactionalSink

__all__ = ["ClientFactory", "ColumnRun", "Sink", "TransactionalSink", "WriterMetrics", "build_client", "build_sink"]
