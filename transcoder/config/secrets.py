"""Secrets in the config: which librdkafka properties are secret, and ${env:VAR} / ${file:...} references."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from transcoder.logs import MIN_REDACTED_LENGTH, REDACTOR

#: librdkafka properties that hold credentials: never inline, never logged, never exported.
SECRET_PROPERTIES = frozenset({
    "sasl.password",
    "sasl.oauthbearer.client.secret",
    "sasl.oauthbearer.config",
    "sasl.jaas.config",
    # OAUTHBEARER JWT client assertions (librdkafka 2.10+): the signing key and its passphrase
    "sasl.oauthbearer.assertion.private.key.pem",
    "sasl.oauthbearer.assertion.private.key.passphrase",
    "ssl.key.password",
    "ssl.key.pem",
    "ssl.keystore.password",
    "ssl.truststore.password",
})

REFERENCE = re.compile(r"\$\{(env|file):([^}]*)\}")


def resolve_references(value: str, environ: Mapping[str, str]) -> str:
    """Replace ${env:NAME}, ${file:/path} and ${file:/path:key}; ValueError saying what is missing."""

    def sub(m: re.Match[str]) -> str:
        kind, arg = m.group(1), m.group(2)
        if kind == "env":
            if arg not in environ:
                raise ValueError(f"environment variable {arg} is not set")
            return environ[arg]
        # ${file:/path} is the whole file; ${file:/path:key} one key of a properties file,
        # as Kafka's FileConfigProvider reads it.
        path, sep, key = arg.rpartition(":")
        if not sep:
            path, key = arg, ""
        try:
            text = Path(path).read_text()
        except OSError as exc:
            raise ValueError(f"cannot read secret file {path}: {exc.strerror}") from exc
        if not key:
            return text.strip()
        for line in text.splitlines():
            k, _, v = _property(line)
            if k == key:
                return v
        raise ValueError(f"no key {key!r} in {path}")

    return REFERENCE.sub(sub, value)


def resolve_properties(props: Mapping[str, Any], environ: Mapping[str, str], *,
                       inline: str) -> tuple[dict[str, Any], dict[str, str]]:
    """Client properties with their references resolved, each secret one a SecretStr; and every property's problem
    (key -> words, never its value): a secret given inline (`inline` says what to do instead), a reference that
    cannot be resolved. The secrets resolved are made unprintable at once (`remember`), problems or not."""
    from pydantic import SecretStr

    out: dict[str, Any] = {}
    problems: dict[str, str] = {}
    for key, value in props.items():
        is_ref = isinstance(value, str) and bool(REFERENCE.search(value))
        if key in SECRET_PROPERTIES and not is_ref:
            problems[key] = inline
            continue
        if is_ref:
            try:
                value = resolve_references(value, environ)
            except ValueError as exc:
                problems[key] = str(exc)
                continue
        out[key] = SecretStr(str(value)) if key in SECRET_PROPERTIES else value
    remember(out)  # never printed from now on, in any form (transcoder.logs.REDACTOR)
    return out, problems


def _property(line: str) -> tuple[str, str, str]:
    """One line of a Java properties file: key, separator, value (key=value, key: value, key value)."""
    line = line.strip()
    if not line or line[0] in "#!":
        return "", "", ""
    m = re.match(r"([^=:\s]+)\s*([=:]|\s)\s*(.*)", line)
    return (m.group(1), m.group(2), m.group(3).strip()) if m else (line, "", "")


#: A secret option inside a JAAS config: password="...", clientSecret='...', token=....
_JAAS_SECRET = re.compile(r"""(?i)\b(\w*(?:password|secret|token))\s*=\s*["']?([^"'\s;]+)""")


def secret_texts(conf: Mapping[str, Any]) -> set[str]:
    """Every secret a client config holds (SECRET_PROPERTIES, revealed or a pydantic SecretStr) and what a
    client sends of it: SASL PLAIN's `authzid\\0user\\0password` messages, each line of a PEM body."""
    def reveal(value: Any) -> str:
        value = value.get_secret_value() if hasattr(value, "get_secret_value") else value
        return "" if value is None else str(value)

    out: set[str] = set()
    for key in SECRET_PROPERTIES:
        value = reveal(conf.get(key)).strip()
        if not value:
            continue
        out.add(value)
        for line in value.splitlines():  # a PEM body, line by line; `key=value` lines of a JAAS or an oauth config
            line = line.strip()
            if line and not line.startswith("-----"):
                out.add(line)
        # A JAAS config's password (or client secret, token) on its own, as a login module may send it.
        out.update(m.group(2) for m in _JAAS_SECRET.finditer(value))
    password, user = reveal(conf.get("sasl.password")), reveal(conf.get("sasl.username"))
    if password and user:
        out.update({f"{user}\0{user}\0{password}", f"\0{user}\0{password}"})  # RFC 4616, as clients send it
    return {s for s in out if len(s) >= MIN_REDACTED_LENGTH}


def remember(conf: Mapping[str, Any]) -> None:
    """Make the secrets of `conf` unprintable from now on, in every log line and error (logs.REDACTOR)."""
    REDACTOR.add(secret_texts(conf))
