"""What confluent-kafka cannot ask or send, done through kafka-python: on-disk sizes (DescribeLogDirs),
API versions, a raw Fetch of stored batches, a raw Produce of batches transcoder built itself, and the requests
of a transactional producer (FindCoordinator, InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn,
TxnOffsetCommit, EndTxn).

One module a concern: `client` (RawClient: the connections, and each request sent and answered), `client_config`
(librdkafka properties as kafka-python's arguments; timeouts and backoff), `calls` (a request in flight, with its
own deadline), `fetch` (Fetch requests and transcoder's own Fetch connections), `produce` (Produce requests and
answers), `transactions` (the transactional producer's requests), `metadata` (leaders, coordinators, offsets) and
`admin_requests` (log dir sizes, client quotas). The request modules build kafka-python's request objects and read
its responses; only `client` and `fetch` hold connections.

Transactions are Kafka's protocol v1 (KIP-98): the producer adds each partition before writing to it and ends the
transaction with EndTxn; the epoch changes only at InitProducerId. The requests are capped at the versions before
KIP-890's transactions v2 (Produce 12, AddPartitionsToTxn 4, AddOffsetsToTxn 4, TxnOffsetCommit 5, EndTxn 5),
with which a broker adds partitions implicitly and bumps the epoch at every EndTxn: a client of v2 must follow
that, and transcoder's producer follows v1, which Kafka 4 keeps for such clients. So: Produce 7-11 in a
transaction (12 lets the broker add the partition itself), AddPartitionsToTxn 0-3 (4+ is the brokers' batched
verification form), AddOffsetsToTxn 0-3, TxnOffsetCommit 0-4 (5 adds the group itself), EndTxn 0-4 (5 makes the
coordinator bump the epoch at every EndTxn and answer with the new one), InitProducerId 0-4 (5 and 6 add
TRANSACTION_ABORTABLE and two-phase commit), FindCoordinator 1-3 (4+ batches keys, another shape).

Only kafka-python's public, versioned API (3.0): the requests are its protocol classes (`kafka.protocol.*`, each
with the versions above). All but Fetch are sent through its connection manager (`kafka.net.KafkaConnectionManager`,
exported by `kafka.net`, with `send` and `call_soon`) on its I/O thread (`kafka.net.NetworkSelector`); transcoder
builds the two itself and hands them to the admin client through its documented `kafka_client` argument, so
DescribeLogDirs and API versions (the admin client's public methods) and these requests share one set of
connections. Fetch, whose answers are the large ones, goes over transcoder's own connection per leader
(fetch_connection.FetchConnection), read in large pieces on the caller's thread: see that module for why."""

from transcoder.kafka.protocol.calls import Call
from transcoder.kafka.protocol.client import RawClient
from transcoder.kafka.protocol.client_config import (
    ANSWER_MARGIN_S,
    METADATA_MAX_AGE_MS,
    RECONNECT_BACKOFF_MAX_MS,
    RECONNECT_BACKOFF_MS,
    kafka_python_config,
)
from transcoder.kafka.protocol.fetch import PendingFetch
from transcoder.kafka.protocol.produce import PRODUCE_API_KEY

__all__ = ["ANSWER_MARGIN_S", "METADATA_MAX_AGE_MS", "PRODUCE_API_KEY", "RECONNECT_BACKOFF_MAX_MS",
           "RECONNECT_BACKOFF_MS", "Call", "PendingFetch", "RawClient", "kafka_python_config"]
