"""`transcoder migrate report`: did the migration pay off — the prediction kept at `migrate start` next to what the
clusters and the copier realized since, with the migration's stages, groups, verification and savings."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

FORMATS = ("table", "json", "markdown")


@click.command(name="report")
@click.option("--config", "-c", "config_path", required=True, type=click.Path(path_type=Path),
              envvar="TRANSCODER_CONFIG", help="The service's YAML config (with a `migration:` section).")
@click.option("--destination", "-d", default=None,
              help="The destination (its name, or its topic) migrated to; may be omitted when the config has one.")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True,
              help="Output format.")
@click.option("--html", "html_dir", type=click.Path(path_type=Path), default=None,
              help="Also write the report as one self-contained HTML page with its plots (disk over time, "
                   "predicted against realized, lag around each cutover) here: DIR/index.html.")
def report(config_path: Path, destination: str | None, fmt: str, html_dir: Path | None) -> None:
    """Predicted against realized, per figure (ratio, stored and wire bytes per record, disk ratio, CPU), with the
    stages, groups, verification, disk saved and CPU paid. Reads only: holds no lease, stores nothing."""
    from transcoder import config as cfg
    from transcoder.migrate import payoff_report as pr
    from transcoder.migrate.controller import Controller

    page = None if html_dir is None else writable_page(html_dir)  # before anything connects
    c = Controller(cfg.load(config_path), destination, command="report")
    try:
        p = c.report()
    finally:
        c.close()
    if page is not None:
        page.write_text(pr.page(p), encoding="utf-8")
    if fmt == "json":
        click.echo(json.dumps(pr.as_dict(p), indent=2, sort_keys=True, default=str))
    elif fmt == "markdown":
        click.echo(pr.markdown(p), nl=False)
    else:
        from rich.console import Console

        console = Console(width=None if sys.stdout.isatty() else 160)
        for line in pr.summary_lines(p):
            console.print(line, markup=False, highlight=False)
        for t in pr.tables(p):
            console.print(t)
    if page is not None:
        click.echo(f"wrote {page}", err=True)


def writable_page(directory: Path) -> Path:
    """DIR/index.html, DIR created; ConfigError, one line, when it cannot be written there."""
    from transcoder.errors import ConfigError

    if directory.exists() and not directory.is_dir():
        raise ConfigError(f"--html {directory}: is a file; give a directory for index.html")
    page = directory / "index.html"
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with page.open("a", encoding="utf-8"):
            pass
    except OSError as exc:
        raise ConfigError(f"--html {directory}: cannot write {page}: {exc.strerror or exc}") from None
    return page
