"""Continuous verification in a running service (`migration.verify_interval_s` > 0): every interval, each
destination is compared with its source from where the last pass stopped, with `migrate.verify`, and the
outcome exported as `transcoder_migration_verified_offset` and `transcoder_migration_mismatches_total`.

It only measures: the controller's own record of verification (the state topic) is written by
`transcoder migrate verify`, which cutover gates on. A mismatch is logged and counted once.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import structlog

from transcoder.config import Config
from transcoder.errors import TranscoderError
from transcoder.kafka import offset_map_topic
from transcoder.metrics.registry import MigrationMetrics
from transcoder.migrate.verify import Verifier
from transcoder.pipeline.routes import Plan

log = structlog.get_logger("transcoder.verify")


class ContinuousVerification:
    def __init__(self, config: Config, plan: Plan, metrics: MigrationMetrics,
                 committed: Callable[[], dict[tuple[str, int], int]] = dict) -> None:
        assert config.migration is not None
        self.config = config
        self.interval = config.migration.verify_interval_s
        self.pairs = [(s, t.topic_for(s)) for t in plan.targets for s in t.sources]
        self.metrics = metrics
        #: the lanes' committed source offsets: verification stops there (a record refused and re-sent alone
        #: may land after later copies until then)
        self.committed = committed
        #: destination -> partition -> verified through (the next pass starts there)
        self.through: dict[str, dict[int, int]] = {}
        self._seen: set[tuple[str, int, int]] = set()  # (destination, partition, source offset) mismatches logged
        self.passes = 0

    def run(self, stop: threading.Event) -> None:
        verifiers = {dest: Verifier(self.config, src, dest) for src, dest in self.pairs}
        try:
            while not stop.wait(self.interval):
                for src, dest in self.pairs:
                    self._pass(verifiers[dest], src, dest)
                self.passes += 1
        finally:
            for v in verifiers.values():
                v.close()

    def _pass(self, verifier: Verifier, source: str, dest: str) -> None:
        try:
            maps, _ = offset_map_topic.read(self.config, dest)
            ends = {p: o for (t, p), o in self.committed().items() if t == source}
            results = verifier.verify(maps, self.through.get(dest), ends=ends)
        except TranscoderError as exc:  # the copy goes on; the next pass tries again
            log.warning("verification_failed", source=source, destination=dest, error=str(exc), **exc.fields())
            return
        through = {p: r.verified_through for p, r in results.items()}
        self.through[dest] = through
        new = 0
        for p, r in sorted(results.items()):
            m = r.mismatch
            if m is not None and (dest, p, m.source_offset) not in self._seen:
                self._seen.add((dest, p, m.source_offset))
                new += 1
                log.error("verification_mismatch", source=source, destination=dest, mismatch=m.line)
        self.metrics.verified(dest, through, mismatches=new)
