"""The `transcoder` command group: parse, set up logging, turn errors into one line; shared option types."""

from __future__ import annotations

import contextlib
import re
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from transcoder import logs, versions
from transcoder.cli.help import Sectioned
from transcoder.errors import ConfigError, ExitCode, Interrupted, TranscoderError


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


class _Cli(Sectioned):
    """The one place a command's exit status is decided (errors.ExitCode, docs/reference/exit-codes.md): every
    TranscoderError, librdkafka refusing a client property, and SIGTERM or SIGINT before the command finished,
    become one line on stderr and the status of their class. Click's own usage errors exit 2 (USAGE) by themselves.
    """

    def invoke(self, ctx: click.Context) -> Any:
        with _signals_interrupt():
            try:
                return super().invoke(ctx)
            except TranscoderError as exc:
                click.echo(logs.redact(f"transcoder: error: {exc}"), err=True)
                ctx.exit(exc.exit_code)
            except (Interrupted, KeyboardInterrupt) as exc:
                stopped = exc if isinstance(exc, Interrupted) else Interrupted(signal.SIGINT)
                click.echo(logs.redact(f"transcoder: error: {stopped}"), err=True)
                ctx.exit(stopped.exit_code)
            except Exception as exc:
                reason = _refused_properties(exc)
                if reason is None:
                    raise
                click.echo(logs.redact(f"transcoder: error: {reason}"), err=True)
                ctx.exit(ConfigError.exit_code)


@contextlib.contextmanager
def _signals_interrupt() -> Iterator[None]:
    """SIGTERM raises Interrupted in the main thread, as SIGINT raises KeyboardInterrupt: a command stopped before
    finishing cleans up on the way out (its `with`s and `finally`s) and exits 143, not killed by the signal with
    nothing said. Commands whose normal end is a signal (`run`, `--follow`) set handlers of their own. Only the
    main thread can set a handler (a command invoked from another thread, in tests, keeps the default)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_sigterm(signum: int, _frame: Any) -> None:
        signal.signal(signum, signal.SIG_IGN)  # once: a second SIGTERM while cleaning up does not cut it short
        raise Interrupted(signum)

    previous = signal.signal(signal.SIGTERM, on_sigterm)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


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
    from transcoder.dev.local_cluster import LocalCluster
    from transcoder.dev.local_kafka import LocalKafka

    st = LocalKafka(local_state_dir).state() or LocalCluster(local_state_dir).state()
    if st is None:
        raise ConfigError("no --bootstrap-servers given (or TRANSCODER_BOOTSTRAP_SERVERS), "
                          "and no local broker runs: start one with `transcoder local-kafka up`")
    return st.bootstrap


def properties(values: tuple[str, ...]) -> dict[str, str]:
    """-X key=value pairs, as the config's cluster properties: references resolved, secrets only as references
    (${env:VAR}, ${file:/path}, ${file:/path:key}), never typed on a command line where `ps` shows them. Every
    problem at once, one per line (a ConfigError)."""
    import os

    from transcoder.config.problems import ConfigProblems, Problem
    from transcoder.config.secrets import SECRET_PROPERTIES, resolve_properties

    given: dict[str, str] = {}
    problems: list[Problem] = []
    for item in values:
        key, sep, val = item.partition("=")
        key, val = key.strip(), val.strip()
        if not sep or not key:  # not echoed when it may hold a secret (`-X sasl.password:...`)
            secret = next((s for s in sorted(SECRET_PROPERTIES) if item.strip().startswith(s)), None)
            problems.append(Problem("", f"expected key=value, got {item!r}" if secret is None else
                                    f"expected key=value, got {secret} and more (not shown: it may be a secret)"))
        else:
            given[key] = val
    resolved, found = resolve_properties(
        given, os.environ, inline="a secret must not be typed on the command line: use ${env:VAR} or ${file:/path}")
    problems += [Problem(key, found[key]) for key in given if key in found]
    if problems:
        raise ConfigProblems("-X", problems)
    return {k: (v.get_secret_value() if hasattr(v, "get_secret_value") else v) for k, v in resolved.items()}


def _print_versions(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        click.echo("\n".join(f"{name} {v}" for name, v in versions()))
        ctx.exit(ExitCode.OK)


@click.group(cls=_Cli, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=_print_versions,
              help="Print the versions of transcoder, its native module and the Kafka clients (one per line), and "
                   "exit.")
@click.option("--log-level", default="info", show_default=True, envvar="TRANSCODER_LOG_LEVEL",
              type=click.Choice(["debug", "info", "warning", "error"], case_sensitive=False),
              help="The least severe log lines printed (on stderr).")
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
