"""The exit-code reference: Markdown rendered from errors.ExitCode (each status and its meaning) and, per command,
the statuses it can end with, published as docs/reference/exit-codes.md.

Regenerate the page with `python -m transcoder.cli.exit_codes > docs/reference/exit-codes.md`.
"""

from __future__ import annotations

import sys

from transcoder.errors import ExitCode

PAGE = "docs/reference/exit-codes.md"
REGENERATE = f"python -m transcoder.cli.exit_codes > {PAGE}"

#: What every command can end with, besides the statuses its row names.
COMMON = (ExitCode.OK, ExitCode.USAGE, ExitCode.SIGINT, ExitCode.SIGTERM)

F, R, L, U = ExitCode.FAILED, ExitCode.REFUSED, ExitCode.DATA_LOSS, ExitCode.UNAVAILABLE

#: Per command (its words after `transcoder`): the statuses beyond COMMON it can end with, and when.
COMMANDS: dict[str, tuple[tuple[ExitCode, ...], str]] = {
    "run": ((F, L, U), "1: a lane failed (a record not delivered within 300 s, a destination that cannot be used, "
                       "fenced by another instance); 4: records lost from the source with `on_source_loss: stop` "
                       "(or the source topic recreated); 5: Kafka, or with `--engine spark` the Spark master, did "
                       "not answer at start. A signal is the service's normal end: drain, commit, exit 0; with "
                       "`--until-caught-up`, a signal before every lane caught up exits 143/130."),
    "validate": ((F, U), "1: a topic cannot be used as configured; 5: Kafka (or the Spark master) did not answer."),
    "seed": ((F, U), "1: the topic cannot be used (another partition count); 5: Kafka did not answer."),
    "evaluate": ((F, U), "1: the topic does not exist or cannot be sampled (message format v0 with "
                         "--since); 5: Kafka, or with "
                         "`--engine spark` the Spark master, did not answer."),
    "demo": ((F,), "1: the local broker could not be fetched or started."),
    "report": ((F, U), "1: the answer is not a /status document; 5: nothing answers at `--url`."),
    "local-kafka fetch": ((F,), "1: Maven is missing or could not fetch the broker's jars."),
    "local-kafka up": ((F,), "1: the broker did not start (a port taken, no Java)."),
    "local-kafka status": ((U,), "5: no local broker runs."),
    "local-kafka logs": ((), "With `--follow`, a signal is its normal end: exit 0."),
    "local-kafka down": ((F,), "1: a node did not stop."),
    "migrate plan": ((F, U), "5: Kafka did not answer."),
    "migrate start": ((F, U), "1: refused (the destination has groups' commits but the migration no state; another "
                              "controller holds the lease); 5: Kafka did not answer."),
    "migrate verify": ((F, R, L, U), "3: the copy differs from the source; 4: records were lost from the source "
                                     "before they were copied (4 when a pass found both); 5: "
                                     "Kafka did not answer. With `--follow`, a signal ends it after the pass: 0, or "
                                     "3/4 if a pass found a mismatch."),
    "migrate cutover": ((F, R, U), "3: a gate refused a group (nothing of it moved), or `--dry-run` found a group "
                                   "that would be refused; 1: refused for another reason "
                                   "(an unknown group, the lease held by another controller); 5: Kafka did not "
                                   "answer."),
    "migrate rollback": ((F, R, U), "3: committing would move a group backwards on the source (a rewind); 1: a "
                                    "group's position cannot be translated back, or it has active members (stop "
                                    "them, or --wait); 5: Kafka did not answer."),
    "migrate status": ((F, U), "5: Kafka did not answer."),
    "migrate finish": ((F, U), "1: groups still read the source or have not moved; 5: Kafka did not answer."),
    "migrate report": ((F, U), "1: the migration has no state (not started), or its state was written by a newer "
                               "transcoder; 5: Kafka did not answer."),
    "migrate watch": ((F, U), "1: the topic cannot be sampled; 5: Kafka did not answer. With `--follow`, a signal "
                              "is its normal end: exit 0."),
    "spark pack": ((), ""),
}


def _codes(codes: tuple[ExitCode, ...]) -> str:
    return ", ".join(str(int(c)) for c in sorted({*COMMON, *codes}))


def render() -> str:
    """The page: the table of ExitCode, then each command's statuses."""
    out = [
        "# Exit codes",
        "",
        f"<!-- Generated from transcoder/errors.py (ExitCode) and transcoder/cli/exit_codes.py: `{REGENERATE}`. -->",
        "",
        "Every `transcoder` command exits with one of these statuses, so that a script can tell a refusal from an "
        "outage: retry on 5, alert on 4, look at the named difference on 3, fix the command line or configuration "
        "on 2. An error is one line on stderr, `transcoder: error: ...`, never a traceback.",
        "",
        "| Status | Name | Meaning |",
        "|---|---|---|",
    ]
    out += [f"| {int(c)} | `{c.name}` | {c.meaning} |" for c in ExitCode]
    out += [
        "",
        "## Per command",
        "",
        "Every command can end with "
        + ", ".join(f"{int(c)} (`{c.name}`)" for c in COMMON)
        + ": 2 also for click's own usage errors (an unknown option, a missing argument); 130 and 143 when SIGINT "
        "or SIGTERM stops it before it finished, once its clean-up ran (a migration step releases its lease). A "
        "command whose normal end is a signal (`run` without `--until-caught-up`, the `--follow` modes) exits 0 "
        "on it instead.",
        "",
        "| Command | Statuses | When, beyond the above |",
        "|---|---|---|",
    ]
    out += [f"| `transcoder {name}` | {_codes(codes)} | {when or '-'} |" for name, (codes, when) in COMMANDS.items()]
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    sys.stdout.write(render())
