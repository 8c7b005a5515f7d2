"""Times as the logs write them (access log, ISO 8601, klog, ...), in UTC and English whatever the locale."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# Fixed English names: strftime("%b") would follow the process locale.
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def _utc(sec: int) -> datetime:
    return _EPOCH + timedelta(seconds=sec)


def access_log_time(sec: int) -> str:
    """nginx's $time_local in UTC: 01/Jan/2026:00:00:00 +0000."""
    d = _utc(sec)
    return f"{d.day:02d}/{_MONTHS[d.month - 1]}/{d.year:04d}:{d.hour:02d}:{d.minute:02d}:{d.second:02d} +0000"


def slashed_time(sec: int) -> str:
    """nginx error.log's time: 2026/01/01 00:00:00."""
    d = _utc(sec)
    return f"{d.year:04d}/{d.month:02d}/{d.day:02d} {d.hour:02d}:{d.minute:02d}:{d.second:02d}"


def iso_time(sec: int) -> str:
    """ISO 8601 to the second, without a zone: 2026-01-01T00:00:00."""
    d = _utc(sec)
    return f"{d.year:04d}-{d.month:02d}-{d.day:02d}T{d.hour:02d}:{d.minute:02d}:{d.second:02d}"


def spaced_time(sec: int) -> str:
    """ISO 8601 with a space for the T: 2026-01-01 00:00:00."""
    d = _utc(sec)
    return f"{d.year:04d}-{d.month:02d}-{d.day:02d} {d.hour:02d}:{d.minute:02d}:{d.second:02d}"


def klog_time(sec: int) -> str:
    """Kubernetes klog's month, day and time: 0101 00:00:00."""
    d = _utc(sec)
    return f"{d.month:02d}{d.day:02d} {d.hour:02d}:{d.minute:02d}:{d.second:02d}"


class PerSecondText:
    """A per-second time text, re-rendered only when the second changes (most records share it)."""

    __slots__ = ("_fmt", "_sec", "_text")

    def __init__(self, fmt: Callable[[int], str]) -> None:
        self._fmt = fmt
        self._sec = -1 << 62
        self._text = ""

    def __call__(self, sec: int) -> str:
        if sec != self._sec:
            self._sec = sec
            self._text = self._fmt(sec)
        return self._text
