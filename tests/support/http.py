"""A running instance's HTTP endpoints (/metrics, /healthz, /readyz, /status), as a scraper sees them."""

from __future__ import annotations

import urllib.error
import urllib.request


def get(url: str) -> tuple[int, str]:
    """(status, body); an error status is an answer too; (0, why) when nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except OSError as exc:
        return 0, str(exc)
