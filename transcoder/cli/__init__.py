"""The `transcoder` command: one module per command; nothing imports cli.

Importing this package registers every command on `main`.
"""

from transcoder.cli import (  # noqa: F401  (registers the commands)
    demo,
    evaluate,
    local_kafka,
    migrate,
    report,
    run,
    seed,
    spark,
)
from transcoder.cli.main import main

__all__ = ["main"]
