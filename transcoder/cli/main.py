"""The `transcoder` command group: parse, set up logging, turn errors into one line; shared option types."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import click

from transcoder import __version__, logs
from transcoder.errors import ConfigError, TranscoderError


class _Cli(click.Group):
    """Turns every TranscoderError into one line on stderr and its exit status."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except TranscoderError as exc:
            click.echo(f"transcoder: error: {exc}", err=True)
            ctx.exit(exc.exit_code)


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
    """The bootstrap servers given, else the running local broker's; ConfigError when neither."""
    if servers:
        return servers
    from transcoder.dev.local_kafka import LocalKafka

    st = LocalKafka(local_state_dir).state()
    if st is None:
        raise ConfigError("no --bootstrap-servers given (or TRANSCODER_BOOTSTRAP_SERVERS), "
                          "and no local broker runs: start one with `deploy/local/kafka up`")
    return st.bootstrap


def properties(values: tuple[str, ...]) -> dict[str, str]:
    out = {}
    for item in values:
        key, sep, val = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"expected key=value, got {item!r}")
        out[key.strip()] = val.strip()
    return out


@click.group(cls=_Cli, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="transcoder")
@click.option("--log-level", default="info", show_default=True, envvar="TRANSCODER_LOG_LEVEL",
              type=click.Choice(["debug", "info", "warning", "error"], case_sensitive=False))
def main(log_level: str) -> None:
    """Copy Kafka topics into per-codec destination topics and measure what each codec costs and saves."""
    logs.configure(log_level)
