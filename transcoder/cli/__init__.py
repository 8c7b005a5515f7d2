"""The `transcoder` command: one module per command; nothing imports cli.

Importing this package registers every command on `main`.
"""

from transcoder.cli import demo, evaluate, local_kafka, migrate, report, run, seed  # noqa: F401  (registers the commands)
from transcoder.cli.main import main

__all__ = ["main"]
