"""The engine contract: what an engine must provide for `transcoder run` and `transcoder validate` to drive it,
written as a Protocol (as Kafka Connect's `Task`/`SinkTask` state what a connector provides) and held to by the
type checker, through the registry's builders (transcoder.engines).

An engine copies the lanes of one config. The CLI builds it from the config (the registry), then:
`validate`: prepare(create=False), preflight(prepared); `run`: serve(), run(until_caught_up=...), and from a
signal handler stop(); when run returns or raises, `abandoned` says whether lanes were left waiting on Kafka.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from transcoder.config import Config
from transcoder.engine.progress import ProgressObserver
from transcoder.kafka.provisioning import Prepared
from transcoder.metrics.registry import LaneMetrics
from transcoder.metrics.status import LaneStatus
from transcoder.pipeline.routes import LaneSpec


class EngineLane(Protocol):
    """One lane as its engine reports it: what it copies, where it stands, its metrics."""

    @property
    def spec(self) -> LaneSpec: ...

    @property
    def status(self) -> LaneStatus:
        """The lane's snapshot (state, records, committed offsets, lag): read by /status, health and readiness,
        and by `run`'s last log line. Written only by the lane's engine."""
        ...

    @property
    def metrics(self) -> LaneMetrics: ...


class Engine(Protocol):
    """What an engine provides. Every method but `run` returns promptly; none reads the environment (the config
    it was built from is all it knows)."""

    @property
    def config(self) -> Config:
        """The config it runs, as the engine resolved it (e.g. the Spark master given on the command line)."""
        ...

    @property
    def lanes(self) -> Sequence[EngineLane]:
        """The lanes being copied: empty until `run` built them, then one per lane of the plan, each keeping its
        last status after `run` returned."""
        ...

    @property
    def abandoned(self) -> bool:
        """True once stopping outlasted shutdown_timeout_s and lanes were left waiting on Kafka: the CLI then
        exits at once, without the interpreter's clean-up (which would wait on Kafka again). An engine whose
        stop always returns keeps it False."""
        ...

    def prepare(self, *, create: bool) -> Prepared:
        """Every shared pre-flight check (config against the clusters, routes, destinations); with `create`, the
        missing destination topics created. Raises ConfigError (or another TranscoderError) naming what fails."""
        ...

    def preflight(self, prepared: Prepared) -> list[str]:
        """The engine's own checks beyond `prepare`, for `validate` (e.g. Spark: the session starts, each lane's
        checkpoint belongs to this config): lines saying what was checked, to print; copies and claims nothing.
        Raises ConfigError when a check fails. An engine with nothing of its own to check returns []."""
        ...

    def serve(self, port: int | None = None) -> int | None:
        """Start /metrics, /healthz, /readyz and /status on the config's metrics port (None: not served, port 0),
        or on `port` (0: any free one); return the port bound. Called before `run`."""
        ...

    def run(self, *, until_caught_up: bool = False, progress: ProgressObserver | None = None) -> Prepared:
        """Prepare (creating destinations), then copy every lane until `stop` is called (drain, commit, return) or,
        with `until_caught_up`, until every lane has copied and committed the source end offsets seen at start.
        `progress`, when given, is called with every lane's progress (transcoder.engine.progress) about twice a
        second, and once more after the lanes ended; with `until_caught_up`, against the end offsets seen at start.
        A failed lane stops the others; its error is raised (a TranscoderError) once they stopped. Delivery is at
        least once, or exactly once where the engine and the config's guarantee say so: a stop never loses a
        record, and what was not committed is copied again by the next run."""
        ...

    def stop(self) -> None:
        """Ask every lane to stop, drain and commit. Safe from a signal handler: it only records the request, and
        may be called before `run`, during it, after it, and more than once."""
        ...

    def status(self) -> dict[str, Any]:
        """The /status document of this engine's lanes (metrics.status.document)."""
        ...

    def healthy(self) -> tuple[bool, str]:
        """Liveness (/healthz): false with the reason once a running lane's loop has not turned for longer than the
        shutdown timeout allows (metrics.status.healthy)."""
        ...

    def ready(self) -> tuple[bool, str]:
        """Readiness (/readyz): true while every lane copies or is caught up; false with the reason before the lanes
        exist, while one starts, has stopped, failed, has no partitions or cannot reach Kafka (metrics.status.ready)."""
        ...
