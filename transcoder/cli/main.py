"""The `transcoder` command group: parse, set up logging, turn errors into one line; shared option types."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import click

from transcoder import __version__, logs
from transcoder.errors import ConfigError, TranscoderError


def _refused_properties(exc: Exception) -> str | None:
    """librdkafka's reason when it refused to build a client from the properties given (`-X key=value`), else None.

    Commands that take librdkafka properties on the command line hand them to confluent-kafka as given; its
    refusal (an unknown property, a bad value) is bad input like any other, not a crash.
    """
    from confluent_kafka import KafkaError, KafkaException

    err = exc.args[0] if isinstance(exc, KafkaException) and exc.args else None
    if not isinstance(err, KafkaError) or err.code() != KafkaError._INVALID_ARG:
        return None
    reason = " ".join(err.str().split())
    if "configuration property" not in reason and not reason.startswith("Failed to create"):
        return None
    return f"a Kafka client property was refused: {reason} (librdkafka's CONFIGURATION.md lists them)"


class _Cli(click.Group):
    """Turns every TranscoderError, and librdkafka refusing a client property, into one line on stderr and a
    non-zero exit status."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except TranscoderError as exc:
            click.echo(logs.redact(f"transcoder: error: {exc}"), err=True)
            ctx.exit(exc.exit_code)
        except Exception as exc:
            reason = _refused_properties(exc)
            if reason is None:
                raise
            click.echo(logs.redact(f"transcoder: error: {reason}"), err=True)
            ctx.exit(ConfigError.exit_code)


class ByteSize(click.ParamType):
    """A size such as 1000, 250MB, 1.5GiB (k/M/G are powers of 1000, Ki/Mi/Gi of 1024)."""

    name = "size"
    _units = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12,
              "ki": 2**10, "mi": 2**20, "gi": 2**30, "ti": 2**40}

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]i?)?b?\s*", str(value), re.IGNORECASE)
        if not m:
            self.fail(f"{value!r} is not a size (e.g. 1000, 250MB, 1GiB)", param, ctx)
        return int(float(m.group(1)) * self._units[(m.group(2) or "").lower()])


def bootstrap(servers: str | None, local_state_dir: Path | None) -> str:
    """The bootstrap servers given, else the running local broker's (or local cluster's); ConfigError when neither."""
    if servers:
        return servers
    from transcoder.dev.local_kafka import LocalCluster, LocalKafka

    st = LocalKafka(local_state_dir).state() or LocalCluster(local_state_dir).state()
    if st is None:
        raise ConfigError("no --bootstrap-servers given (or TRANSCODER_BOOTSTRAP_SERVERS), "
                          "and no local broker runs: start one with `deploy/local/kafka up`")
    return st.bootstrap


def properties(values: tuple[str, ...]) -> dict[str, str]:
    """-X key=value pairs, as the config's cluster properties: references resolved, secrets only as references
    (${env:VAR}, ${file:/path}, ${file:/path:key}), never typed on a command line where `ps` shows them."""
    import os

    from transcoder.config.secrets import REFERENCE, SECRET_PROPERTIES, remember, resolve_references

    out = {}
    for item in values:
        key, sep, val = item.partition("=")
        key, val = key.strip(), val.strip()
        if not sep or not key:
            raise ConfigError(f"expected key=value, got {item!r}")
        is_ref = bool(REFERENCE.search(val))
        if key in SECRET_PROPERTIES and not is_ref:
            raise ConfigError(f"-X {key} is a secret and must not be typed on the command line: "
                              "use ${env:VAR} or ${file:/path}")
        if is_ref:
            try:
                val = resolve_references(val, os.environ)
            except ValueError as exc:
                raise ConfigError(f"-X {key}: {exc}") from None
        out[key] = val
    remember(out)
    return out


@click.group(cls=_Cli, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="transcoder")
@click.option("--log-level", default="info", show_default=True, envvar="TRANSCODER_LOG_LEVEL",
              type=click.Choice(["debug", "info", "warning", "error"], case_sensitive=False))
@click.option("--debug-clients", is_flag=True, envvar="TRANSCODER_DEBUG_CLIENTS",
              help="Also log the Kafka clients' own debug lines (kafka-python's requests and responses by type, "
                   "librdkafka's debug contexts " + logs.RDKAFKA_DEBUG_CONTEXTS + "), each cut to "
                   f"{logs.MAX_CLIENT_LINE} characters: never record contents, never a secret. Verbose.")
@click.option("--log-format", type=click.Choice(logs.LOG_FORMATS), default="auto", show_default=True,
              envvar="TRANSCODER_LOG_FORMAT",
              help="auto: human-readable lines on a terminal, JSON lines otherwise (piped, a file, Kubernetes); "
                   "json or console: always that.")
def main(log_level: str, debug_clients: bool, log_format: str) -> None:
    """Copy Kafka topics into per-codec destination topics and measure what each codec costs and saves."""
    logs.configure(log_level, log_format=log_format, debug_clients=debug_clients)
    logs.stacks_on_signal()
