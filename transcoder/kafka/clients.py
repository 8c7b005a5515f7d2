"""Building confluent-kafka clients: logging wired to ours, connection errors made plain."""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable, Mapping
from typing import Any

import kafka.errors
import structlog
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, ClusterMetadata

from transcoder.config import SECRET_PROPERTIES
from transcoder.config.problems import ConfigProblems, Problem
from transcoder.config.secrets import remember
from transcoder.errors import ConfigError, KafkaUnavailableError
from transcoder.logs import RDKAFKA_LOGGER, client_debug_contexts

#: librdkafka's logs go to this stdlib logger; it is quiet below WARNING unless asked.


class ErrorTracker:
    """`error_cb` for a client: remembers the last global error so a failure can say why, and the client's current
    outage: from its first "unreachable" error (`streak_start`) to the first answer of a broker after it
    (`answered`, or `statistics`: librdkafka's own figures). Only an answer ends an outage: librdkafka repeats its
    errors seldom (identical ones are suppressed, reconnects back off to 10 s), so a quiet minute says nothing.

    One broker of several failing is not an outage while the others answer: an "unreachable" error begins one at
    once when every broker is down (_ALL_BROKERS_DOWN) or when no broker answered within `grace_s` before it;
    otherwise only once no broker answered for `grace_s` after it (seen at a statistics emission). Either way the
    outage is dated from that first failure."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, grace_s: float = 10.0) -> None:
        self.last: KafkaError | None = None
        self.at = 0.0  # clock() of the last error
        #: the last error that says why (librdkafka follows each with a bare "N/N brokers are down")
        self.cause: KafkaError | None = None
        #: clock() of the first "unreachable" error of the current outage (None: no outage)
        self.streak_start: float | None = None
        #: the last "unreachable" error: why the current outage is one
        self.unreachable_error: KafkaError | None = None
        #: the last outage that ended: (its first failure, the first answer after it), clock() times
        self.recovered: tuple[float, float] | None = None
        #: the latest answer known: (a broker answered certainly after this, at this), clock() times
        self.last_answer: tuple[float, float] | None = None
        self._clock = clock
        self._grace = grace_s
        #: clock() of the first "unreachable" error no answer followed yet (an outage's start, if it becomes one)
        self._failing_since: float | None = None
        self._rx: dict[str, int] = {}  # broker -> responses received, at the last statistics emission
        self._stats_at: float | None = None  # clock() of the last statistics emission

    def __call__(self, err: KafkaError) -> None:
        now = self._clock()
        if err.code() in _UNREACHABLE:
            self.unreachable_error = err
            if self._failing_since is None:
                self._failing_since = now
            if self.streak_start is None and (err.code() == KafkaError._ALL_BROKERS_DOWN
                                              or not self._answered_within(now)):
                self.streak_start = self._failing_since
        self.last = err
        self.at = now
        if err.code() != KafkaError._ALL_BROKERS_DOWN:
            self.cause = err

    def answered(self, at: float, after: float | None = None) -> None:
        """A broker answered this client (or the lane it serves) at `at` (clock time), and certainly after `after`
        (default `at`): an outage that began by then is over, `at` its first success."""
        after = at if after is None else after
        if self.last_answer is None or after > self.last_answer[0]:
            self.last_answer = (after, at)
        if self._failing_since is not None and after >= self._failing_since:
            self._failing_since = None
        start = self.streak_start
        if start is not None and after >= start:
            self.streak_start = None
            self.recovered = (start, at)

    def _answered_within(self, now: float) -> bool:
        """Whether a broker answered within `grace_s` before `now`."""
        return self.last_answer is not None and now - self.last_answer[1] <= self._grace

    def statistics(self, stats: Mapping[str, Any], now: float | None = None) -> None:
        """One librdkafka statistics emission of this client (parsed): what its brokers answered. A connection UP
        answered its handshake when it came up (`stateage` back from now); a broker whose responses received
        (`rx`) grew answered since the previous emission. The first such answer after an outage began ends it."""
        now = self._clock() if now is None else now
        brokers = stats.get("brokers") or {}
        previous, since = self._rx, self._stats_at
        self._rx = {name: int(b.get("rx", 0)) for name, b in brokers.items()}
        self._stats_at = now
        answers = []  # (certainly after, at)
        for name, b in brokers.items():
            rx = self._rx[name]
            if b.get("state") == "UP" and rx > 0:
                up = now - float(b.get("stateage", 0)) / 1e6
                answers.append((up, up))
            if since is not None and rx > previous.get(name, 0):
                answers.append((since, now))
        for after, at in sorted(answers, key=lambda a: a[1]):  # the earliest that ends the outage, if one does
            self.answered(at, after)
        failing = self._failing_since
        if self.streak_start is None and failing is not None and now - failing >= self._grace:
            self.streak_start = failing  # a broker failed and none answered since, for the grace: an outage

    def wrap_statistics(self, stats_cb: Callable[[str], None]) -> Callable[[str], None]:
        """The client's `stats_cb`, passing each emission through `statistics` first."""

        def on_stats(raw: str) -> None:
            try:
                self.statistics(json.loads(raw))
            except ValueError:  # not JSON: the figures are the callback's business, the outage stays as it was
                pass
            stats_cb(raw)

        return on_stats

    def unreachable(self) -> KafkaError | None:
        """The last "unreachable" error of an outage not over yet (no broker answered since it began)."""
        return self.unreachable_error if self.streak_start is not None else None


#: librdkafka's errors for a cluster it cannot reach (every broker down, a connection failing or timing out).
_UNREACHABLE = frozenset({KafkaError._ALL_BROKERS_DOWN, KafkaError._TRANSPORT, KafkaError._TIMED_OUT,
                          KafkaError._RESOLVE})


def retriable(err: KafkaError) -> bool:
    """Whether Kafka says trying again may succeed: librdkafka's flag, else Kafka's own error table.

    librdkafka flags request-level errors itself, but builds per-partition errors of admin results
    (list_offsets, describe_configs) from the bare code with the flag unset. Broker error codes are
    Kafka's protocol codes, whose `retriable` flag kafka-python's table carries (the Java client's).
    """
    if err.retriable():
        return True
    code = err.code()
    if code > 0:
        return bool(kafka.errors.for_code(code).retriable)
    return code in (KafkaError._TIMED_OUT, KafkaError._TRANSPORT)  # librdkafka's own: no answer in time


def client_config(base: Mapping[str, Any], **extra: Any) -> dict[str, Any]:
    """A librdkafka config with our logger, an error tracker under `error_cb`, and librdkafka's debug contexts
    when `--debug-clients` asks for them; its secrets are redacted from all output from now on."""
    conf: dict[str, Any] = {**base, **extra}
    remember(conf)
    contexts = client_debug_contexts()
    if contexts is not None:
        conf.setdefault("debug", contexts)
    conf.setdefault("logger", logging.getLogger(RDKAFKA_LOGGER))
    tracker = conf.setdefault("error_cb", ErrorTracker())
    if isinstance(tracker, ErrorTracker) and "stats_cb" in conf:  # its outages end on the brokers' answers
        conf["stats_cb"] = tracker.wrap_statistics(conf["stats_cb"])
    return conf


class OwnedAdmin:
    """An admin client for queries answered later (asked from a loop, taken at its next turn): created at first use,
    destroyed by `close` on its owner's thread.

    confluent-kafka sets an admin result on its future from librdkafka's background thread, running Python there.
    Left to the garbage collector (its owner in a reference cycle, as a lane is), the client can be collected on that
    very thread while a query is in flight, and librdkafka aborts the whole process when a client is destroyed from
    a thread of its own. Owners therefore close it, and after `close` it is never created again."""

    def __init__(self, cluster: Mapping[str, Any], client_id: str,
                 create: Callable[[Callable[[], Any]], Any] = lambda make: make()) -> None:
        self._conf = client_config(cluster, **{"client.id": client_id})
        self._create = create  # builds the client (a lane's: so its threads are counted as the lane's)
        self._admin: AdminClient | None = None
        self._closed = False

    def client(self) -> AdminClient:
        if self._closed:
            raise RuntimeError(f"admin client {self._conf['client.id']} used after close")
        if self._admin is None:
            conf = self._conf
            self._admin = self._create(lambda: AdminClient(conf))
        return self._admin

    def close(self) -> None:
        """Destroy the client here (librdkafka waits for the answers in flight; they are dropped)."""
        self._closed = True
        admin, self._admin = self._admin, None
        del admin  # the last reference: destroyed on this thread, never on its own background thread


def _why(conf: Mapping[str, Any], exc: BaseException | None) -> str:
    tracker = conf.get("error_cb")
    error = (tracker.cause or tracker.last) if isinstance(tracker, ErrorTracker) else None
    if error is not None:
        return error.str()
    if isinstance(exc, KafkaException) and exc.args:
        err = exc.args[0]
        return err.str() if isinstance(err, KafkaError) else str(err)
    return str(exc) if exc else "no answer"


#: librdkafka's prefix naming the broker connection ("sasl_ssl://host:port/bootstrap: ") and suffix
#: ("(after 12ms in state AUTH_REQ)"): noise in a one-line error that already names the bootstrap address.
_BROKER_PREFIX = re.compile(r"^\S+://\S+/(?:bootstrap|\d+): |^[\w.-]+:\d+/(?:bootstrap|\d+): ")
_AFTER_SUFFIX = re.compile(r"\s*\(after \d+ms in state \w+\)\s*$")
_OPENSSL_CODE = re.compile(r"error:[0-9A-F]+:SSL routines::")


def security_hint(conf: Mapping[str, Any], err: KafkaError | None) -> str | None:
    """What a connection error most likely means for the client's security settings, or None.

    librdkafka reports a wrong password, an untrusted certificate or a listener that speaks another security
    protocol as transport errors; this names the setting to check. Reads only non-secret properties.
    """
    protocol = str(conf.get("security.protocol", "plaintext")).upper()
    if err is None or err.code() == KafkaError._ALL_BROKERS_DOWN:
        # The broker closed every connection without a TLS or SASL error: what a listener does when the client
        # speaks another protocol (PLAINTEXT to a TLS listener, a metadata request before SASL).
        return (f"the broker closed every connection before answering: the security protocol likely mismatches "
                f"(security.protocol={protocol}; does the listener expect TLS, SASL, or neither?)")
    text = err.str()
    if "connecting to a PLAINTEXT broker listener" in text or (
            "closed by peer" in text and "state SSL_HANDSHAKE" in text):
        return (f"the security protocol likely mismatches: security.protocol={protocol} but the listener "
                f"speaks PLAINTEXT")
    if err.code() == KafkaError._AUTHENTICATION:
        m = re.search(r"broker's supported mechanisms: *([^()]*)", text)
        if m is not None and not m.group(1).strip():
            return (f"the security protocol likely mismatches: security.protocol={protocol} but the listener "
                    f"offers no SASL mechanism")
        if m is not None:
            return f"sasl.mechanism={conf.get('sasl.mechanism', 'GSSAPI')} is not one the listener offers"
        return "check sasl.username and sasl.password"
    if "certificate verify failed" in text:
        ca = conf.get("ssl.ca.location") or ("ssl.ca.pem" if conf.get("ssl.ca.pem") else None)
        return ("the broker's certificate is not signed by a CA the "
                + (f"client trusts (ssl.ca.location={ca})" if ca else "system trusts: set ssl.ca.location")
                + ", or does not name the bootstrap host")
    if "alert bad certificate" in text or "alert certificate required" in text:
        return ("the broker requires a client certificate it trusts (mTLS): set ssl.certificate.location and "
                "ssl.key.location" + (" (or is this not the SASL_SSL listener?)" if protocol == "SASL_SSL" else ""))
    if "alert certificate unknown" in text or "alert unknown ca" in text:
        return "the broker does not trust the client certificate (mTLS): is it signed by a CA in its truststore?"
    if err.code() == KafkaError._TRANSPORT and "Disconnected" in text:
        return security_hint(conf, None)
    return None


def _unavailable(conf: Mapping[str, Any], exc: BaseException, timeout: float) -> KafkaUnavailableError:
    """The one-line error of a client that got no answer: librdkafka's reason, and what it likely means."""
    bootstrap = conf.get("bootstrap.servers", "<unset>")
    tracker = conf.get("error_cb")
    cause = tracker.cause if isinstance(tracker, ErrorTracker) else None
    refused = cause is not None and cause.code() in (KafkaError._TRANSPORT, KafkaError._RESOLVE) and (
        "Connection refused" in cause.str() or cause.code() == KafkaError._RESOLVE)
    hint = None if refused or not isinstance(tracker, ErrorTracker) or tracker.last is None \
        else security_hint(conf, cause)
    if hint is None:
        return KafkaUnavailableError(f"cannot reach Kafka at {bootstrap} within {timeout:g}s: {_why(conf, exc)}")
    if cause is None:
        why = ""
    elif "certificate verify failed" in cause.str():  # OpenSSL's codes and librdkafka's install advice: noise
        why = "TLS certificate verification failed; "
    else:
        why = _OPENSSL_CODE.sub("", _AFTER_SUFFIX.sub("", _BROKER_PREFIX.sub("", cause.str()))) + "; "
    # Not retriable: a password, a certificate or a protocol does not fix itself.
    return KafkaUnavailableError(f"cannot connect to Kafka at {bootstrap}: {why}{hint}", retriable=False,
                                 kafka_error=cause.name() if cause is not None else None)


#: Seconds a command waits for Kafka's first answer before it says Kafka is unavailable (exit 5).
CONNECT_TIMEOUT_S = 10.0


def connect_admin(base: Mapping[str, Any], *, timeout: float | None = None) -> tuple[AdminClient, ClusterMetadata]:
    """An AdminClient that has answered a metadata request within `timeout` s (default CONNECT_TIMEOUT_S), or
    KafkaUnavailableError saying why."""
    timeout = CONNECT_TIMEOUT_S if timeout is None else timeout
    conf = client_config(base)
    admin = AdminClient(conf)
    try:
        md = admin.list_topics(timeout=timeout)
    except KafkaException as exc:
        admin.poll(0)  # serves error_cb: the connection errors behind the timeout
        raise _unavailable(conf, exc, timeout) from exc
    return admin, md


def start_threads(client: Any) -> None:
    """A metadata request makes a librdkafka client start its broker threads, so they can be attributed
    to it (metrics.cpu); a client that cannot reach the cluster yet says so later, where it matters."""
    try:
        client.list_topics(timeout=10)
    except KafkaException as exc:
        structlog.get_logger("transcoder.clients").warning("metadata_request_failed", error=str(exc.args[0]))


#: librdkafka's wording when rd_kafka_new (not one property) refuses a config: the client kind is noise here.
_FAILED_TO_CREATE = re.compile(r"^Failed to create [\w ]+: ")


def check_properties(base: Mapping[str, Any], where: str) -> None:
    """ConfigError naming what librdkafka refuses in `base` (an unknown property, a value of the wrong type or
    out of range, settings that contradict each other) and why; `where` names the config section. Every property
    refused is named, one per line: librdkafka stops at the first, so once it refuses, each property is tried alone,
    and then what is left together.

    A throwaway client without bootstrap servers is built and dropped: it connects nowhere, and what it logs
    goes nowhere. The reason never shows a secret's value (it is replaced by ***).
    """
    remember(base)
    conf = {k: v for k, v in base.items() if k not in ("bootstrap.servers", "metadata.broker.list")}
    refused = _refusal(conf, base)
    if refused is None:
        return
    alone = {k: r for k, v in conf.items() if (r := _refusal({k: v}, base)) is not None}
    together = _refusal({k: v for k, v in conf.items() if k not in alone}, base) if alone else refused
    reasons = [*alone.values(), *([together] if together is not None else [])]
    hint = ": fix or remove the property (librdkafka's CONFIGURATION.md lists them)"
    if len(reasons) == 1:
        raise ConfigError(f"{where}: {reasons[0]}{hint}")
    raise ConfigProblems(where, [Problem("", f"{r}{hint}") for r in reasons])


def _refusal(conf: Mapping[str, Any], base: Mapping[str, Any]) -> str | None:
    """Why librdkafka refuses to build a client of `conf` (secrets of `base` shown as ***), or None."""
    conf = dict(conf)
    # A logger of its own, in no hierarchy, never enabled: what the throwaway client logs (no bootstrap servers,
    # the refused property) is said by the error, once.
    conf["logger"] = logging.Logger("transcoder.property-check", logging.CRITICAL + 1)
    try:
        AdminClient(conf)
    except (KafkaException, ValueError, TypeError) as exc:
        err = exc.args[0] if exc.args else exc
        reason = err.str() if isinstance(err, KafkaError) else str(err)
        reason = " ".join(_FAILED_TO_CREATE.sub("", reason.strip()).split())
        for key in SECRET_PROPERTIES:
            secret = str(base.get(key) or "")
            if secret:
                reason = reason.replace(secret, "***")
        return reason
    return None
