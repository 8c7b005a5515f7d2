"""The lease that keeps a second controller from acting on a migration, kept in the migration's state records.

Each controller writes heartbeats under `controller/<owner>` (migrate.state's StateStore), and the holder is the
live owner (last heartbeat within its lease) with the lowest claim offset; `holder` is that rule, pure. `Lease` is
one controller's hold; the guarantee and its limits are in its docstring.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Mapping
from types import TracebackType
from typing import Any, Self
from uuid import uuid4

import structlog

from transcoder.errors import MigrationError, TranscoderError
from transcoder.migrate.state import StateRecord, StateStore, now_ms

log = structlog.get_logger("transcoder.migrate")

#: State keys of controllers: `controller/<owner>`.
CONTROLLER_PREFIX = "controller/"


# -- the lease rule (pure) -------------------------------------------------------------------------------------

def claim_offset(record: StateRecord) -> int:
    """Where an owner's claim is in the log: the offset in its records, or (its first record) the record's own."""
    if record.value is None:
        raise ValueError(f"state record {record.key} at offset {record.offset} is a tombstone: it claims nothing")
    c = record.value.get("claim_offset")
    return record.offset if c is None else int(c)


def _controller(record: StateRecord) -> tuple[str, int, int] | None:
    """(owner, heartbeat_ms, lease_ms) of a controller record; None for a tombstone; MigrationError if malformed."""
    v = record.value
    if v is None:
        return None
    try:
        return str(v["owner"]), int(v["heartbeat_ms"]), int(v["lease_ms"])
    except (KeyError, TypeError, ValueError) as exc:
        raise MigrationError(f"state record {record.key} at offset {record.offset} is not a controller heartbeat "
                             f"({exc!r}); it was not written by transcoder: delete that key",
                             offset=record.offset) from exc


def live(records: Mapping[str, StateRecord], now_ms: int) -> list[StateRecord]:
    """Controller records (keys `controller/...`) whose last heartbeat is within their lease at `now_ms`,
    by claim offset, the holder first."""
    out = []
    for r in records.values():
        if not r.key.startswith(CONTROLLER_PREFIX):
            continue
        c = _controller(r)
        if c is not None and c[1] + c[2] > now_ms:
            out.append(r)
    return sorted(out, key=lambda r: (claim_offset(r), r.key))


def holder(records: Mapping[str, StateRecord], now_ms: int) -> StateRecord | None:
    """The controller holding the migration at `now_ms`: the live one with the lowest claim offset; None if none.

    `records` are the latest records per key (`StateStore.read_records()`); keys other than `controller/...`
    are ignored, tombstones and expired heartbeats are not live.
    """
    alive = live(records, now_ms)
    return alive[0] if alive else None


def _owner(record: StateRecord) -> str:
    return str(record.value["owner"]) if record.value else record.key[len(CONTROLLER_PREFIX):]


def _seconds(ms: float) -> str:
    return f"{max(ms, 0) / 1000:.3g}"


# -- the lease (I/O) -------------------------------------------------------------------------------------------

class Lease:
    """One controller's hold on a migration: a second controller refuses while the first is live.

    Protocol (every reader of the log agrees): each controller writes under `controller/<owner>` records
    {owner, command, claim_offset, heartbeat_ms, lease_ms}. `acquire` refuses if another owner is live,
    else writes a claim (its offset is the claim offset), reads to the end again and holds only if it is now
    the live owner with the lowest claim offset; a loser deletes its claim. Of controllers acquiring at
    once, at most one wins (exactly one, unless the winner's claim expires before it is read back). `heartbeat`
    re-reads, then renews with the same claim offset; `check` re-reads.
    A crashed controller's record expires after its lease_ms; another may then acquire, and a controller that
    comes back after that is fenced (its next `check`/`heartbeat` raises MigrationError).

    What it does not guarantee:
    - `check` then write: a caller that checks and then writes state may write up to one write's latency
      after losing the lease. State writes should be idempotent and re-validated by the next holder.
    - Clocks: liveness compares the writer's heartbeat_ms with the reader's clock; hosts' clocks must agree
      to well within lease_ms.
    - A renewal acknowledged only after the lease it renews had expired (a slow broker, a paused process) may
      have revived it after another controller claimed: the renewing controller then deletes its record and
      is fenced, and until it has, the other one may be fenced too (safe, but nobody holds the migration).
    """

    def __init__(self, store: StateStore, *, lease_ms: int, owner: str | None = None, command: str = "") -> None:
        self.store = store
        self.lease_ms = lease_ms
        self.owner = owner or f"{socket.gethostname()}:{os.getpid()}:{uuid4().hex[:6]}"
        self.command = command
        self.key = f"{CONTROLLER_PREFIX}{self.owner}"
        self._lock = threading.RLock()
        self._claim: int | None = None
        self._last_heartbeat_ms = 0
        self._fenced: MigrationError | None = None  # sticky: the lease is lost
        self._heartbeat_error: BaseException | None = None  # the last heartbeat failed (cleared by a later one)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def held(self) -> bool:
        """Acquired, not released and not (yet known to be) fenced."""
        return self._claim is not None and self._fenced is None

    def _value(self, claim: int | None, heartbeat_ms: int) -> dict[str, Any]:
        return {"owner": self.owner, "command": self.command, "claim_offset": claim,
                "heartbeat_ms": heartbeat_ms, "lease_ms": self.lease_ms}

    def _held_by(self, r: StateRecord, now: int) -> str:
        v = r.value or {}
        cmd = f"{v['command']}, " if v.get("command") else ""
        return (f"controller {_owner(r)} ({cmd}heartbeat {_seconds(now - int(v.get('heartbeat_ms', now)))} s ago)"
                f": wait for it to finish, or for its lease ({_seconds(int(v.get('lease_ms', 0)))} s) to expire "
                "if it died")

    def acquire(self) -> None:
        """Hold the migration, or MigrationError naming the controller that holds it."""
        with self._lock:
            if self._fenced is not None:
                raise self._fenced
            if self._claim is not None:
                raise MigrationError(f"migration {self.store.migration}: controller {self.owner} holds it already")
            self.store.ensure_topic()
            now = now_ms()
            others = [r for r in live(self.store.read_records(), now) if r.key != self.key]
            if others:
                log.info("lease_refused", migration=self.store.migration, owner=self.owner, held_by=_owner(others[0]))
                raise MigrationError(f"migration {self.store.migration} is held by {self._held_by(others[0], now)}")
            heartbeat = now_ms()
            offset = self.store.put(self.key, self._value(None, heartbeat))
            now = now_ms()
            h = holder(self.store.read_records(), now)
            if h is None or h.key != self.key or claim_offset(h) != offset:
                self.store.delete(self.key)
                if h is None or h.key == self.key:
                    raise MigrationError(f"migration {self.store.migration}: the claim of controller {self.owner} "
                                         f"expired before it was read back (lease {_seconds(self.lease_ms)} s); "
                                         "check the cluster's latency, or raise migration.lease_ms")
                log.info("lease_lost_race", migration=self.store.migration, owner=self.owner, held_by=_owner(h))
                raise MigrationError(f"migration {self.store.migration} is held by {self._held_by(h, now)}")
            self._claim, self._last_heartbeat_ms = offset, heartbeat
            self._fenced = self._heartbeat_error = None
            log.info("lease_acquired", migration=self.store.migration, owner=self.owner, claim_offset=offset,
                     lease_ms=self.lease_ms)

    def _verify(self) -> int:
        """MigrationError unless this controller holds the migration now; now_ms of the check."""
        if self._fenced is not None:
            raise self._fenced
        if self._claim is None:
            raise MigrationError(f"migration {self.store.migration}: controller {self.owner} does not hold it "
                                 "(acquire the lease first)")
        records = self.store.read_records()
        now = now_ms()
        h = holder(records, now)
        if h is not None and h.key == self.key and claim_offset(h) == self._claim:
            return now
        m = self.store.migration
        ago = _seconds(now - self._last_heartbeat_ms)
        if h is None or h.key == self.key:
            err = MigrationError(f"migration {m}: controller {self.owner} lost its lease (last heartbeat {ago} s ago, "
                                 f"lease {_seconds(self.lease_ms)} s) and was fenced; check the migration's state "
                                 "and run the command again")
        else:
            v = h.value or {}
            cmd = f" ({v['command']})" if v.get("command") else ""
            err = MigrationError(f"migration {m}: controller {self.owner} was fenced: controller {_owner(h)}{cmd} "
                                 f"took over after its last heartbeat {ago} s ago; stop here, the other controller "
                                 "continues the migration")
        self._fenced = err
        log.warning("lease_fenced", migration=m, owner=self.owner, held_by=_owner(h) if h else None)
        raise err

    def check(self) -> None:
        """MigrationError unless this controller still holds the migration (read from the log, nothing written).

        Also raises the error of the last heartbeat if it failed and none has succeeded since. Call it before
        every state write.
        """
        with self._lock:
            err = self._heartbeat_error
            if err is not None and not isinstance(err, MigrationError):
                raise err
            self._verify()

    def heartbeat(self) -> None:
        """Renew the lease: check it is still held, then write a fresh heartbeat with the same claim."""
        with self._lock:
            self._verify()
            now = now_ms()
            self.store.put(self.key, self._value(self._claim, now))
            acked = now_ms()
            expired_at = self._last_heartbeat_ms + self.lease_ms
            if acked >= expired_at:  # it may have landed after the lease expired, and revived it: give it up
                err = MigrationError(f"migration {self.store.migration}: controller {self.owner} renewed its lease "
                                     f"too late ({_seconds(acked - self._last_heartbeat_ms)} s after the last "
                                     f"heartbeat, lease {_seconds(self.lease_ms)} s) and gave it up; check the "
                                     "migration's state and run the command again")
                self._fenced = err
                log.warning("lease_renewed_too_late", migration=self.store.migration, owner=self.owner)
                self.store.delete(self.key)
                raise err
            self._last_heartbeat_ms = now
            self._heartbeat_error = None

    def start_heartbeats(self) -> None:
        """Heartbeat every lease_ms/3 in a daemon thread until `release` (or `stop_heartbeats`); a failure is
        logged and raised by the next `check`; a fenced lease stops the thread."""
        with self._lock:
            if self._thread is not None:
                return
            self._stop.clear()
            self._thread = threading.Thread(target=self._beat, name=f"lease-{self.store.migration}", daemon=True)
            self._thread.start()

    def _beat(self) -> None:
        interval = self.lease_ms / 3000
        while not self._stop.wait(interval):
            try:
                self.heartbeat()
            except MigrationError as exc:  # fenced: the lease is gone for good
                self._heartbeat_error = exc
                log.error("lease_heartbeat_fenced", migration=self.store.migration, owner=self.owner, error=str(exc))
                return
            except TranscoderError as exc:  # the cluster, for now: the next beat tries again
                self._heartbeat_error = exc
                log.warning("lease_heartbeat_failed", migration=self.store.migration, owner=self.owner,
                            error=str(exc))
            except Exception as exc:  # a bug: remembered for check(), the thread ends
                self._heartbeat_error = exc
                log.exception("lease_heartbeat_crashed", migration=self.store.migration, owner=self.owner)
                return

    def stop_heartbeats(self) -> None:
        """Stop the heartbeat thread without releasing (the lease then expires after lease_ms)."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout=self.lease_ms / 1000 + self.store.timeout_s * 2)

    def release(self) -> None:
        """Stop heartbeating and delete this controller's record, so another may acquire at once."""
        self.stop_heartbeats()
        with self._lock:
            if self._claim is None:
                return
            self.store.delete(self.key)
            self._claim, self._fenced, self._heartbeat_error = None, None, None
            log.info("lease_released", migration=self.store.migration, owner=self.owner)

    def withdraw(self) -> None:
        """Release, and delete this controller's record even if `acquire` was interrupted (a signal) after it
        wrote its claim and before it knew it held the migration."""
        self.stop_heartbeats()
        with self._lock:
            self.store.delete(self.key)
            self._claim, self._fenced, self._heartbeat_error = None, None, None
            log.info("lease_released", migration=self.store.migration, owner=self.owner)

    def __enter__(self) -> Self:
        """Acquire and start heartbeating."""
        self.acquire()
        self.start_heartbeats()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc is None:
            self.release()
            return
        try:
            self.release()
        except Exception:  # the body's error is the one to report; this one is logged, not lost
            log.exception("lease_release_failed", migration=self.store.migration, owner=self.owner)
