"""SASL OAUTHBEARER for transcoder's kafka-python client: librdkafka's unsecured JWT, built as librdkafka builds it.

librdkafka (`enable.sasl.oauthbearer.unsecure.jwt=true`) reads `sasl.oauthbearer.config` as space-separated
`key=value` parts: principal=<name> (required), principalClaimName=<claim> (default sub), scope=<a,b,...>,
scopeClaimName=<claim> (default scope), lifeSeconds=<n> (default 3600), extension_<name>=<value>. Its token is
base64url({"alg":"none"}) "." base64url(claims) "." (no signature), the claims
{"<principalClaimName>":"<principal>","iat":<s.mmm>,"exp":<s.mmm>[,"<scopeClaimName>":["a","b"]]}, what Kafka's
unsecured validator (the broker's default for OAUTHBEARER) accepts. The token is a secret: every token made is
given to the log redactor (transcoder.logs.REDACTOR) before a client can send it, and no error quotes the config.
"""

from __future__ import annotations

import base64
import re
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from transcoder.errors import ConfigError
from transcoder.logs import REDACTOR

#: librdkafka's defaults for the unsecured JWT
DEFAULT_PRINCIPAL_CLAIM = "sub"
DEFAULT_SCOPE_CLAIM = "scope"
DEFAULT_LIFE_SECONDS = 3600
#: librdkafka's bound for lifeSeconds (a positive C int)
MAX_LIFE_SECONDS = 2**31 - 1
#: base64url of {"alg":"none"}, unpadded
JOSE_HEADER = "eyJhbGciOiJub25lIn0"
#: A token is made again when this share of its life has passed (librdkafka refreshes at 80% too).
REFRESH_AT = 0.8

_EXTENSION_NAME = re.compile(r"[A-Za-z]+")  # RFC 7628 key = 1*(ALPHA)
_EXTENSION_VALUE = re.compile(r"[\x21-\x7E \t\r\n]+")  # RFC 7628 value
_PROP = "sasl.oauthbearer.config"


@dataclass(frozen=True)
class UnsecuredJwtConfig:
    """sasl.oauthbearer.config, parsed."""

    principal: str
    principal_claim: str = DEFAULT_PRINCIPAL_CLAIM
    scope: tuple[str, ...] = ()
    scope_claim: str = DEFAULT_SCOPE_CLAIM
    life_seconds: int = DEFAULT_LIFE_SECONDS
    extensions: dict[str, str] = field(default_factory=dict)


def parse_unsecured_jwt_config(text: str) -> UnsecuredJwtConfig:
    """librdkafka's rules; ConfigError naming the key at fault, never quoting a value (the config is a secret)."""
    single: dict[str, str | None] = {"principal": None, "principalClaimName": None, "scope": None,
                                     "scopeClaimName": None, "lifeSeconds": None}
    extensions: dict[str, str] = {}
    for part in text.split():
        key, sep, value = part.partition("=")
        if not sep:
            raise ConfigError(f"{_PROP}: a part is not key=value (expected principal=, principalClaimName=, "
                              "scope=, scopeClaimName=, lifeSeconds=, extension_NAME=)")
        if key.startswith("extension_"):
            name = key[len("extension_"):]
            _check_extension(name, value)
            extensions[name] = value
            continue
        if key not in single:
            raise ConfigError(f"{_PROP}: unknown key {key!r} (expected principal=, principalClaimName=, scope=, "
                              "scopeClaimName=, lifeSeconds=, extension_NAME=)")
        if single[key] is not None:
            raise ConfigError(f"{_PROP}: {key}= given twice")
        if not value:
            raise ConfigError(f"{_PROP}: empty {key}=")
        if key != "lifeSeconds" and '"' in value:
            raise ConfigError(f"{_PROP}: {key} cannot contain a '\"' character")
        single[key] = value
    if single["principal"] is None:
        raise ConfigError(f"{_PROP}: no principal=<value> (enable.sasl.oauthbearer.unsecure.jwt needs one)")
    life = _life_seconds(single["lifeSeconds"])
    scope = tuple(dict.fromkeys(s for s in (single["scope"] or "").split(",") if s))  # no empties, no repeats
    return UnsecuredJwtConfig(principal=single["principal"],
                              principal_claim=single["principalClaimName"] or DEFAULT_PRINCIPAL_CLAIM,
                              scope=scope, scope_claim=single["scopeClaimName"] or DEFAULT_SCOPE_CLAIM,
                              life_seconds=life, extensions=extensions)


def _check_extension(name: str, value: str) -> None:
    if not _EXTENSION_NAME.fullmatch(name) or name == "auth":
        raise ConfigError(f"{_PROP}: extension name {name!r} is not letters only (nor 'auth')")
    if not _EXTENSION_VALUE.fullmatch(value):
        raise ConfigError(f"{_PROP}: extension_{name} is empty or holds characters RFC 7628 forbids")


def _life_seconds(given: str | None) -> int:
    if given is None:
        return DEFAULT_LIFE_SECONDS
    if not re.fullmatch(r"[+-]?[0-9]+", given):
        raise ConfigError(f"{_PROP}: lifeSeconds is not a whole number")
    life = int(given)
    if not 0 < life <= MAX_LIFE_SECONDS:
        raise ConfigError(f"{_PROP}: lifeSeconds must be 1..{MAX_LIFE_SECONDS}")
    return life


def _b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def unsecured_jwt(config: UnsecuredJwtConfig, now_s: float) -> str:
    """The token librdkafka would make at wall-clock time `now_s` (seconds, kept to the millisecond)."""
    now = int(now_s * 1000) / 1000.0
    scope = ""
    if config.scope:
        scope = f',"{config.scope_claim}":[' + ",".join(f'"{s}"' for s in config.scope) + "]"
    claims = (f'{{"{config.principal_claim}":"{config.principal}","iat":{now:.3f},'
              f'"exp":{now + config.life_seconds:.3f}{scope}}}')
    return f"{JOSE_HEADER}.{_b64url(claims.encode())}."


def check_oauthbearer(librdkafka: Mapping[str, Any]) -> UnsecuredJwtConfig:
    """The unsecured JWT's config of a client config with sasl.mechanism OAUTHBEARER; ConfigError, one line naming
    the property, for what transcoder's kafka-python client cannot do (OIDC, a token from an application callback)."""
    method = str(librdkafka.get("sasl.oauthbearer.method", "default")).lower()
    if method == "oidc":
        raise ConfigError("sasl.oauthbearer.method=oidc is not supported by transcoder's kafka-python client "
                          "(record sets, on-disk sizes, validate, evaluate): use OAUTHBEARER with "
                          "enable.sasl.oauthbearer.unsecure.jwt=true, or SCRAM or PLAIN")
    if str(librdkafka.get("enable.sasl.oauthbearer.unsecure.jwt", "false")).lower() not in ("true", "1"):
        raise ConfigError("sasl.mechanism=OAUTHBEARER needs enable.sasl.oauthbearer.unsecure.jwt=true with "
                          "sasl.oauthbearer.config=principal=<name> (transcoder takes no token callback)")
    value: object = librdkafka.get(_PROP)
    value = value.get_secret_value() if hasattr(value, "get_secret_value") else value
    return parse_unsecured_jwt_config(str(value or ""))


def token_provider(config: UnsecuredJwtConfig, clock: Any = time.time) -> Any:
    """A kafka-python token provider (kafka.net.sasl.oauth.AbstractTokenProvider) making `config`'s unsecured JWT,
    made again once REFRESH_AT of its life has passed; each token is given to the redactor before it is sent."""
    from kafka.net.sasl.oauth import AbstractTokenProvider

    class UnsecuredJwtProvider(AbstractTokenProvider):  # type: ignore[misc]  # kafka-python has no types: Any
        def __init__(self) -> None:
            super().__init__()
            self._lock = threading.Lock()
            self._token = ""
            self._renew_at = 0.0
            REDACTOR.add(config.extensions.values())

        def token(self) -> str:
            with self._lock:
                now = clock()
                if not self._token or now >= self._renew_at:
                    token = unsecured_jwt(config, now)
                    REDACTOR.add([token, token.split(".")[1]])
                    self._token, self._renew_at = token, now + REFRESH_AT * config.life_seconds
                return self._token

        def extensions(self) -> dict[str, str]:
            return dict(config.extensions)

        def __repr__(self) -> str:  # never the token
            return "UnsecuredJwtProvider()"

    return UnsecuredJwtProvider()
