"""The logs never show a secret or a record, and show other libraries' debug lines only when asked.

Pure logic and the logging set-up, with log records as kafka-python makes them (its own SASL request objects and
raw bytes): the real broker's side is tests/integration/test_secrets_in_output.py.
"""

from __future__ import annotations

import base64
import io
import json
import logging
import subprocess
import sys
import threading
from collections.abc import Iterator

import pytest
import structlog
from pydantic import SecretStr

from transcoder import logs
from transcoder.config.secrets import remember, secret_texts

PASSWORD = "pw-5e1f0c7a9b2d4e68"
USER = "alice"
PLAIN_MESSAGE = f"{USER}\0{USER}\0{PASSWORD}"


def forms_of(secret: str) -> list[str]:
    raw = secret.encode()
    return [secret, base64.b64encode(raw).decode(), base64.urlsafe_b64encode(raw).decode().rstrip("="), raw.hex(),
            raw.hex().upper(), repr(raw)[2:-1]]


@pytest.fixture
def configured(monkeypatch: pytest.MonkeyPatch) -> Iterator[io.StringIO]:
    """logs.configure onto a buffer (a config with PASSWORD remembered), undone afterwards."""
    monkeypatch.setattr(sys, "excepthook", sys.excepthook)
    monkeypatch.setattr(threading, "excepthook", threading.excepthook)
    monkeypatch.setattr(logs, "_client_debug", False)
    saved = structlog.get_config()
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    levels = {n: logging.getLogger(n).level for n in ("kafka", logs.RDKAFKA_LOGGER)}
    remember({"sasl.username": USER, "sasl.password": SecretStr(PASSWORD)})
    yield io.StringIO()
    structlog.configure(**saved)
    root.handlers[:], root.level = handlers, level
    for n, lv in levels.items():
        logging.getLogger(n).setLevel(lv)


def test_every_form_of_a_secret_is_redacted_and_short_ones_are_left_alone():
    r = logs.Redactor()
    r.add([PASSWORD, PLAIN_MESSAGE, "abc"])
    for secret in (PASSWORD, PLAIN_MESSAGE):
        for form in forms_of(secret):
            text = f"before {form} after"
            assert r.redact(text) == f"before {logs.REDACTED} after", form
            # inside JSON (a log line holding a repr)
            assert form not in r.redact(json.dumps({"event": text})), form
    assert r.redact("abc and abcd") == "abc and abcd"  # below MIN_REDACTED_LENGTH: not searched for
    assert logs.Redactor().redact(PASSWORD) == PASSWORD  # nothing learnt, nothing changed


def test_the_secrets_of_a_config_include_plain_messages_pem_lines_and_jaas_passwords():
    pem = "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIFHDBOBgkqhkiG9w0BBQ0wQTApBgkq\nhkiG9w0BBQwwHAQI\n" \
          "-----END ENCRYPTED PRIVATE KEY-----"
    texts = secret_texts({
        "sasl.username": USER, "sasl.password": SecretStr(PASSWORD), "ssl.key.pem": SecretStr(pem),
        "sasl.jaas.config": SecretStr('org.x.PlainLoginModule required username="u" password="jaas-pw-123";'),
        "ssl.ca.location": "/etc/ca.pem", "bootstrap.servers": "h:9092",
    })
    assert {PASSWORD, PLAIN_MESSAGE, f"\0{USER}\0{PASSWORD}", "MIIFHDBOBgkqhkiG9w0BBQ0wQTApBgkq",
            "hkiG9w0BBQwwHAQI", "jaas-pw-123"} <= texts
    assert not {USER, "/etc/ca.pem", "h:9092", "-----END ENCRYPTED PRIVATE KEY-----"} & texts


def kafka_python_record(logger: str, msg: str, *args: object, level: int = logging.DEBUG) -> None:
    logging.getLogger(logger).log(level, msg, *args)


def test_kafka_python_wire_dumps_show_types_and_sizes_never_contents_or_secrets(configured):
    from kafka.protocol.sasl import SaslAuthenticateRequest

    logs.configure("debug", stream=configured, json=True, debug_clients=True)
    records = b"\x00" * 10 + b"GET /index.html HTTP/1.1 record value" * 100
    kafka_python_record("kafka.net.connection", "%s Request %d: %s", "<conn>", 7,
                        SaslAuthenticateRequest(PLAIN_MESSAGE.encode()))
    kafka_python_record("kafka.protocol.parser", "%s Send: %r", "<conn>", bytearray(PLAIN_MESSAGE.encode()))
    kafka_python_record("kafka.protocol.parser", "%s Recv: %r", "<conn>", records)
    kafka_python_record("kafka.admin.client", "Starting KafkaAdminClient with configuration: %s",
                        {"sasl_plain_username": USER, "sasl_plain_password": PASSWORD, "other_secret": "zzzzzz"})
    lines = [json.loads(ln) for ln in configured.getvalue().splitlines()]
    events = [ln["event"] for ln in lines]
    assert events[0] == "<conn> Request 7: SaslAuthenticateRequest"
    assert events[1] == f"<conn> Send: <{len(PLAIN_MESSAGE)} bytes>"
    assert events[2] == f"<conn> Recv: <{len(records)} bytes>"
    assert "'sasl_plain_password': '***'" in events[3] and "'other_secret': '***'" in events[3]
    text = configured.getvalue()
    for form in forms_of(PASSWORD) + forms_of(PLAIN_MESSAGE) + ["record value", "zzzzzz"]:
        assert form not in text, form


def test_other_libraries_lines_are_cut_to_max_client_line(configured):
    logs.configure("debug", stream=configured, json=True, debug_clients=True)
    kafka_python_record(logs.RDKAFKA_LOGGER, "%s", "x" * 5000)
    event = json.loads(configured.getvalue())["event"]
    assert event == "x" * logs.MAX_CLIENT_LINE + f"... ({5000 - logs.MAX_CLIENT_LINE} more characters)"


@pytest.mark.parametrize("debug_clients", [False, True])
def test_the_clients_debug_lines_only_with_debug_clients(configured, debug_clients):
    from transcoder.kafka.clients import client_config

    logs.configure("debug", stream=configured, json=True, debug_clients=debug_clients)
    kafka_python_record("kafka.protocol.parser", "%s Sending request %d %s", "<conn>", 3, "FetchRequest")
    kafka_python_record(logs.RDKAFKA_LOGGER, "%s", "PROTOCOL [thrd:main]: Sent FetchRequest")
    kafka_python_record("kafka.net.manager", "%s", "connected to broker", level=logging.INFO)
    structlog.get_logger("transcoder.test").debug("ours", topic="t")
    events = [json.loads(ln)["event"] for ln in configured.getvalue().splitlines()]
    client_debug = ["<conn> Sending request 3 FetchRequest", "PROTOCOL [thrd:main]: Sent FetchRequest"]
    assert events == ([*client_debug] if debug_clients else []) + ["connected to broker", "ours"]
    conf = client_config({"bootstrap.servers": "h:1"})
    assert conf.get("debug") == (logs.RDKAFKA_DEBUG_CONTEXTS if debug_clients else None)
    assert client_config({"bootstrap.servers": "h:1", "debug": "all"})["debug"] == "all"  # the user's own


def test_no_client_line_at_info_and_our_events_and_tracebacks_are_redacted(configured):
    logs.configure("info", stream=configured, json=True)
    kafka_python_record("kafka.net.manager", "%s", "connected to broker", level=logging.INFO)
    log = structlog.get_logger("transcoder.test")
    log.info("ours", password_by_mistake=PASSWORD, blob=base64.b64encode(PLAIN_MESSAGE.encode()).decode())
    try:
        raise ValueError(f"refused {PASSWORD}")
    except ValueError:
        log.exception("failed")
    err = io.StringIO()
    saved, sys.stderr = sys.stderr, err
    try:
        sys.excepthook(ValueError, ValueError(f"uncaught {PASSWORD}"), None)
    finally:
        sys.stderr = saved
    text = configured.getvalue() + err.getvalue()
    assert "connected to broker" not in text
    assert [json.loads(ln)["event"] for ln in configured.getvalue().splitlines()] == ["ours", "failed"]
    assert "refused ***" in text and "uncaught ***" in err.getvalue()
    for form in forms_of(PASSWORD) + forms_of(PLAIN_MESSAGE):
        assert form not in text, form


def test_sigusr1_writes_every_thread_s_stack_to_stderr_and_the_process_goes_on():
    # A fenced instance once hung with no line for 120 s (every thread waiting): SIGUSR1 now says where each waits.
    script = ("import os, signal, threading, time\n"
              "from transcoder import logs\n"
              "logs.stacks_on_signal()\n"
              "def parked():\n"
              "    threading.Event().wait(5)\n"
              "threading.Thread(target=parked, daemon=True).start()\n"
              "time.sleep(0.2)\n"
              "os.kill(os.getpid(), signal.SIGUSR1)\n"
              "time.sleep(0.2)\n"
              "print('alive')\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout == "alive\n", done.stderr
    assert "Current thread" in done.stderr and 'in parked' in done.stderr, done.stderr


def test_the_log_format_json_when_piped_human_readable_on_a_terminal_or_as_forced():
    assert logs.renders_json("auto", isatty=False) and not logs.renders_json("auto", isatty=True)
    assert logs.renders_json("json", isatty=True) and logs.renders_json("json", isatty=False)
    assert not logs.renders_json("console", isatty=False) and not logs.renders_json("console", isatty=True)
    with pytest.raises(ValueError, match="not one of auto, json, console"):
        logs.renders_json("yaml", isatty=True)
    assert logs.colours(True, {}) and logs.colours(True, {"NO_COLOR": ""})  # empty: not set (no-color.org)
    assert not logs.colours(True, {"NO_COLOR": "1"}) and not logs.colours(False, {})


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(("stream_type", "log_format", "no_color", "rendered"), [
    (io.StringIO, "auto", "", "json"),  # piped: JSON lines
    (Terminal, "auto", "", "colours"),  # a terminal: human-readable, coloured
    (Terminal, "auto", "1", "plain"),  # ... without colours when NO_COLOR is set
    (Terminal, "json", "", "json"),  # forced either way
    (io.StringIO, "console", "", "plain"),
])
def test_no_secret_in_either_renderer_events_tracebacks_and_client_lines_alike(configured, monkeypatch, stream_type,
                                                                                log_format, no_color, rendered):
    monkeypatch.setenv("NO_COLOR", no_color)
    out = stream_type()
    logs.configure("info", stream=out, log_format=log_format)
    log = structlog.get_logger("transcoder.test")
    log.info("ours", password_by_mistake=PASSWORD, nested={"conf": {"sasl.password": PASSWORD}},
             raw=PLAIN_MESSAGE.encode(), blob=base64.b64encode(PLAIN_MESSAGE.encode()).decode())

    def failing(config: dict[str, str]) -> None:
        record_value = "GET /private/record HTTP/1.1"  # a local of the failing frame: never shown  # noqa: F841
        raise ValueError(f"refused {config['sasl.password']}")

    try:
        failing({"sasl.password": PASSWORD})
    except ValueError:
        log.exception("failed")
        logging.getLogger("another.library").exception("client %s", PASSWORD)  # a stdlib record with a traceback
    kafka_python_record("kafka.net.manager", "%s", f"auth with {PLAIN_MESSAGE}", level=logging.CRITICAL)
    text = out.getvalue()
    for form in forms_of(PASSWORD) + forms_of(PLAIN_MESSAGE):
        assert form not in text, form
    assert "refused ***" in text and "GET /private/record" not in text  # plain tracebacks: no frame's locals
    lines = text.splitlines()
    if rendered == "json":
        events = [json.loads(ln)["event"] for ln in lines]
        assert events == ["ours", "failed", "client ***", "auth with ***"]
    else:
        assert not lines[0].startswith("{") and "ours" in lines[0] and "password_by_mistake" in lines[0]
        assert ("\x1b[" in text) == (rendered == "colours")
        assert "Traceback (most recent call last)" in text
