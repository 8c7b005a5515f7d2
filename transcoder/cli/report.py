"""`transcoder report`: the per-destination figures of a running instance, from its /status."""

from __future__ import annotations

import sys

import click

from transcoder.cli.main import main
from transcoder.cli.options import Choice
from transcoder.errors import TranscoderError, UnavailableError


@main.command()
@click.option("--url", default="http://localhost:9308", show_default=True, envvar="TRANSCODER_URL",
              help="A running instance's endpoint (its metrics port).")
@click.option("--format", "fmt", type=Choice(["table", "markdown", "json"]), default="table",
              show_default=True, help="How the figures are printed on stdout.")
@click.option("--timeout", type=float, default=10.0, show_default=True,
              help="Seconds to wait for the instance's /status.")
def report(url: str, fmt: str, timeout: float) -> None:
    """Per destination of a running instance: records, CPU per 1M records, disk, ratios, lag, p99 latency."""
    import json
    import urllib.error
    import urllib.request

    from rich.console import Console

    from transcoder.report import tables as report_mod

    status_url = url.rstrip("/") + "/status"
    try:
        with urllib.request.urlopen(status_url, timeout=timeout) as resp:
            doc = json.load(resp)
    except (urllib.error.HTTPError, ValueError) as exc:  # something answers, but not with a /status document
        raise TranscoderError(f"cannot read {status_url}: {getattr(exc, 'reason', exc)}") from exc
    except (urllib.error.URLError, OSError) as exc:  # nothing answers there (refused, unresolved, timed out)
        raise UnavailableError(f"cannot read {status_url}: {getattr(exc, 'reason', exc)}") from exc
    rows = report_mod.from_status(doc)
    if fmt == "markdown":
        click.echo(report_mod.status_markdown(rows))
    elif fmt == "json":
        click.echo(report_mod.as_json(rows))
    else:
        Console(width=None if sys.stdout.isatty() else 220).print(report_mod.status_table(rows))
