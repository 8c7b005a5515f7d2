"""The exception root of transcoder: every error a user can cause says what went wrong and what to do."""

from __future__ import annotations


class TranscoderError(Exception):
    """Root of every error transcoder reports to a user as one line and a non-zero exit."""

    #: exit status the CLI uses for this error
    exit_code: int = 1
    #: True where trying again later may succeed (a broker restarting, a leader moving)
    retriable: bool = False


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
    """A record could not be delivered; the message names topic, partition and offset."""


class LocalKafkaError(TranscoderError):
    """The local development broker could not be fetched, started, or stopped."""


class PortInUseError(LocalKafkaError):
    """A port the local broker was asked to bind is already taken."""
