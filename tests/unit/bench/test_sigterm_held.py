"""bench's SIGTERM hold while a copier starts: noted inside the block, acted on at its end (by the handler in place)."""

from __future__ import annotations

import os
import signal
import sys

import pytest

from bench.copiers import sigterm_held


def test_a_sigterm_inside_the_block_is_acted_on_at_its_end():
    old = signal.signal(signal.SIGTERM, lambda signum, _frame: sys.exit(128 + signum))
    steps = []
    try:
        with pytest.raises(SystemExit) as exc:
            with sigterm_held():
                os.kill(os.getpid(), signal.SIGTERM)
                for _ in range(1000):  # the handler would run at one of these bytecodes
                    steps.append(1)
                steps.append("started")
        assert exc.value.code == 128 + signal.SIGTERM
        assert steps[-1] == "started"
    finally:
        signal.signal(signal.SIGTERM, old)


def test_without_a_signal_the_handler_is_given_back():
    def handler(signum, _frame):
        raise AssertionError("not called")
    old = signal.signal(signal.SIGTERM, handler)
    try:
        with sigterm_held():
            pass
        assert signal.getsignal(signal.SIGTERM) is handler
    finally:
        signal.signal(signal.SIGTERM, old)
