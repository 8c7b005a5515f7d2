"""The exception root of transcoder: every error a user can cause says what went wrong and what to do.

Imports nothing of transcoder. An error carries, where they exist, the topic, partition and offset
at fault and Kafka's error name, as fields (for code, logs and metrics) and in its one-line
message (for people); `retriable` is what the retry policies read.
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """The exit statuses of every `transcoder` command: one table (docs/reference/exit-codes.md), one place."""

    OK = 0
    #: an error outside the classes below (a record could not be delivered, a topic cannot be used)
    FAILED = 1
    #: bad command line, configuration or input: nothing was started
    USAGE = 2
    #: a migration gate refused, or verification found a difference between the copy and the source
    REFUSED = 3
    #: records the copy needed were lost from the source (retention, truncation, an unclean election)
    DATA_LOSS = 4
    #: Kafka (or Spark) did not answer
    UNAVAILABLE = 5
    #: stopped by SIGINT (128 + 2) / SIGTERM (128 + 15) before finishing
    SIGINT = 130
    SIGTERM = 143


class TranscoderError(Exception):
    """Root of every error transcoder reports to a user as one line and a non-zero exit."""

    #: exit status the CLI uses for this error
    exit_code: int = 1
    #: True where trying again later may succeed (a broker restarting, a leader moving)
    retriable: bool = False

    def __init__(self, message: str, *, topic: str | None = None, partition: int | None = None,
                 offset: int | None = None, kafka_error: str | None = None,
                 retriable: bool | None = None) -> None:
        super().__init__(message)
        self.topic = topic
        self.partition = partition
        self.offset = offset
        #: Kafka's error name (e.g. MSG_SIZE_TOO_LARGE), where Kafka reported the error
        self.kafka_error = kafka_error
        if retriable is not None:
            self.retriable = retriable

    def fields(self) -> dict[str, str | int]:
        """The error's coordinates, for structured logs (never a key or a value)."""
        out = {"topic": self.topic, "partition": self.partition, "offset": self.offset,
               "kafka_error": self.kafka_error}
        return {k: v for k, v in out.items() if v is not None}


class ConfigError(TranscoderError):
    """Bad configuration or command-line input: nothing was started."""

    exit_code = 2


class InputError(TranscoderError):
    """Input data that cannot be read: a missing file, a malformed NDJSON line."""

    exit_code = 2


class KafkaUnavailableError(TranscoderError):
    """The cluster did not answer: wrong bootstrap address, broker down, network."""

    retriable = True


class TopicError(TranscoderError):
    """A topic is missing, or exists with a shape or config transcoder cannot use."""


class DeliveryError(TranscoderError):
    """A record could not be delivered; topic, partition and offset name the source record."""


class LocalKafkaError(TranscoderError):
    """The local development broker could not be fetched, started, or stopped."""


class PortInUseError(LocalKafkaError):
    """A port the local broker was asked to bind is already taken."""


class MigrationError(TranscoderError):
    """A migration step refused: a gate failed, a group is unknown or active, another controller holds it."""


class RefusedError(MigrationError):
    """A cutover gate refused to move a group, or verification found a difference: the copy is not (yet) what
    the source is. Nothing was changed."""

    exit_code = ExitCode.REFUSED


class DataLossError(TranscoderError):
    """Records the copy needed are gone from the source (deleted by retention or truncated before being copied)."""

    exit_code = ExitCode.DATA_LOSS
