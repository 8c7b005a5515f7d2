"""The exception root of transcoder: every error a user can cause says what went wrong and what to do.

Imports nothing of transcoder. An error carries, where they exist, the topic, partition and offset
at fault and Kafka's error name, as fields (for code, logs and metrics) and in its one-line
message (for people); `retriable` is what the retry policies read; `exit_code` is the command's exit status
when the error ends it (one of ExitCode: the CLI's handler, transcoder.cli.main, exits with nothing else).
"""

from __future__ import annotations

import signal
from enum import IntEnum


class ExitCode(IntEnum):
    """The exit statuses of every `transcoder` command: one table (docs/reference/exit-codes.md, rendered from
    these members and their meanings by transcoder.cli.exit_codes), one place."""

    meaning: str

    def __new__(cls, value: int, meaning: str) -> ExitCode:
        member = int.__new__(cls, value)
        member._value_ = value
        member.meaning = meaning
        return member

    OK = 0, "the command did what it was asked"
    FAILED = 1, ("an error outside the classes below: a record could not be delivered, a topic cannot be used, a "
                 "migration step was refused for another reason than a gate (an unknown group, a lease held by "
                 "another controller)")
    USAGE = 2, "bad command line, configuration or input: nothing was started"
    REFUSED = 3, ("a migration gate refused, or verification found a difference between the copy and the source: "
                  "nothing was changed")
    DATA_LOSS = 4, ("records the copy needed were lost from the source before they were copied (retention, "
                    "DeleteRecords, truncation, a topic deleted and recreated)")
    UNAVAILABLE = 5, ("what the command talks to did not answer: Kafka (address, network, TLS or SASL), a Spark "
                      "master, a running instance's /status, or no local broker runs")
    SIGINT = 130, "stopped by SIGINT (128 + 2) before finishing"
    SIGTERM = 143, "stopped by SIGTERM (128 + 15) before finishing"

    @classmethod
    def for_signal(cls, signum: int) -> ExitCode:
        """The status of a command stopped by `signum` (SIGINT or SIGTERM) before finishing."""
        return {signal.SIGINT: cls.SIGINT, signal.SIGTERM: cls.SIGTERM}[signal.Signals(signum)]


class TranscoderError(Exception):
    """Root of every error transcoder reports to a user as one line and a non-zero exit."""

    #: exit status the CLI uses for this error
    exit_code: ExitCode = ExitCode.FAILED
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

    exit_code = ExitCode.USAGE


class InputError(TranscoderError):
    """Input data that cannot be read: a missing file, a malformed NDJSON line."""

    exit_code = ExitCode.USAGE


class UnavailableError(TranscoderError):
    """What the command talks to did not answer: Kafka, a Spark master, a running instance's endpoints."""

    exit_code = ExitCode.UNAVAILABLE


class KafkaUnavailableError(UnavailableError):
    """The cluster did not answer: wrong bootstrap address, broker down, network (or refused the connection: TLS,
    SASL, where `retriable` is False)."""

    retriable = True


class SparkUnavailableError(UnavailableError):
    """The Spark master did not answer (none of a standalone master's addresses, or the master Spark gave up on)."""


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


class Interrupted(BaseException):
    """SIGTERM or SIGINT, raised in the main thread so that every `with` and `finally` on the way out runs; a
    BaseException (as KeyboardInterrupt is), so that no `except Exception` on the way swallows it. The CLI's handler
    exits with `exit_code` (143, 130) and the message as one line."""

    def __init__(self, signum: int, message: str | None = None) -> None:
        name = signal.Signals(signum).name
        super().__init__(message or f"stopped by {name} before finishing")
        self.signum = signum
        self.exit_code = ExitCode.for_signal(signum)
