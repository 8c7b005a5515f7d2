"""A Service run on a thread of its own, as the tests that watch it while it copies need it."""

from __future__ import annotations

import threading
from typing import Any


class ServiceThread:
    """Runs `service.run(**kwargs)` on a daemon thread; whatever it raised is kept in `errors`, for the test
    to assert on."""

    def __init__(self, service: Any, **run_kwargs: Any) -> None:
        self.service = service
        self.errors: list[BaseException] = []
        self._thread = threading.Thread(target=self._run, kwargs=run_kwargs, daemon=True)

    def _run(self, **run_kwargs: Any) -> None:
        try:
            self.service.run(**run_kwargs)
        except BaseException as exc:  # noqa: BLE001 - the test asserts on it
            self.errors.append(exc)

    def start(self) -> ServiceThread:
        self._thread.start()
        return self

    def join(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)

    def is_alive(self) -> bool:
        return self._thread.is_alive()
