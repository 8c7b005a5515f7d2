"""transcoder's own batch producer, in parts (after aiokafka's producer/): the front (BatchProducer), what waits to be
sent (accumulator), the sealing (encoder), the sender's thread and its Produce requests (sender, requests), the
producer id and sequences (sequences), the guarantee chosen once (guarantee: idempotent, or the transactions:
transactions, transaction_state, transaction_requests), the reports waiting for `poll` (reports, statistics), the
batches and the one error vocabulary (batches, errors)."""

from transcoder.kafka.failure_log import FailureLog
from transcoder.kafka.producer.batches import Delivered, Headers
from transcoder.kafka.producer.errors import ProduceError
from transcoder.kafka.producer.producer import BatchProducer
from transcoder.kafka.producer.transaction_requests import TXN_RETRY_BACKOFF_S, Transactions

# what the writer, the lane and the tests import from here
__all__ = ["TXN_RETRY_BACKOFF_S", "BatchProducer", "Delivered", "FailureLog", "Headers", "ProduceError",
           "Transactions"]
