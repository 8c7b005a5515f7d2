"""TLS and basic auth of the HTTP endpoints, from a web config file in Prometheus exporter-toolkit's format.

The file an exporter takes with `--web.config.file` (its `web-config.yml`): `tls_server_config` (`cert_file`,
`key_file`, `client_ca_file`, `client_auth_type`, `min_version`, `max_version`) and `basic_auth_users` (user: bcrypt
hash). Relative paths in it are read from its directory, as exporter-toolkit does. Keys of exporter-toolkit's that
transcoder does not implement are refused by name, never ignored: a file that asks for more than is enforced fails.

As exporter-toolkit reads the file on every request, `WebConfigFile` reads it again when it or a file it names has
changed, so a renewed certificate or a changed user needs no restart; a file that became invalid fails the requests
(closed), it does not fall back to serving without TLS or auth. Neither the key nor a hash is ever in a message.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import ssl
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, SecretStr, ValidationError, field_validator

from transcoder.errors import ConfigError

#: exporter-toolkit's `client_auth_type`s that Python's ssl can enforce, and how. RequestClientCert and
#: RequireAnyClientCert ask for a certificate without verifying it, which ssl cannot do: refused, not approximated.
CLIENT_AUTH: dict[str, ssl.VerifyMode] = {
    "NoClientCert": ssl.CERT_NONE,
    "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
    "RequireAndVerifyClientCert": ssl.CERT_REQUIRED,
}
TLS_VERSIONS: dict[str, ssl.TLSVersion] = {
    "TLS10": ssl.TLSVersion.TLSv1, "TLS11": ssl.TLSVersion.TLSv1_1, "TLS12": ssl.TLSVersion.TLSv1_2,
    "TLS13": ssl.TLSVersion.TLSv1_3,
}
#: exporter-toolkit's keys that transcoder does not implement, each refused with this reason.
NOT_IMPLEMENTED: dict[str, str] = {
    "cert": "give the certificate as cert_file",
    "key": "give the key as key_file",
    "client_ca": "give the client CA as client_ca_file",
    "cipher_suites": "OpenSSL's defaults apply",
    "curve_preferences": "OpenSSL's defaults apply",
    "prefer_server_cipher_suites": "OpenSSL's defaults apply",
    "client_allowed_sans": "not enforced by transcoder",
    "http_server_config": "not implemented by transcoder",
    "rate_limit": "not implemented by transcoder",
}
#: How long a client has for the TLS handshake and then for its request, in seconds.
TIMEOUT_S = 10.0


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TLSServerConfig(_Strict):
    """`tls_server_config`: the endpoints serve HTTPS with this certificate."""

    cert_file: str
    key_file: str
    client_ca_file: str | None = None
    client_auth_type: Literal["NoClientCert", "VerifyClientCertIfGiven", "RequireAndVerifyClientCert"] | None = None
    min_version: Literal["TLS10", "TLS11", "TLS12", "TLS13"] = "TLS12"
    max_version: Literal["TLS10", "TLS11", "TLS12", "TLS13"] = "TLS13"

    @field_validator("client_auth_type", mode="before")
    @classmethod
    def _enforceable(cls, value: Any) -> Any:
        if value in ("RequestClientCert", "RequireAnyClientCert", "RequireClientCert"):
            raise ValueError(f"{value} asks for a client certificate without verifying it, which transcoder cannot "
                             "do: use VerifyClientCertIfGiven or RequireAndVerifyClientCert with a client_ca_file")
        return value

    def verify_mode(self) -> ssl.VerifyMode:
        """exporter-toolkit's rules: a client CA needs a client auth type other than NoClientCert, and verifying
        needs a client CA."""
        mode = CLIENT_AUTH[self.client_auth_type or "NoClientCert"]
        if self.client_ca_file and mode == ssl.CERT_NONE:
            raise ValueError("client_ca_file is set but client_auth_type is NoClientCert: set client_auth_type to "
                             "RequireAndVerifyClientCert (or VerifyClientCertIfGiven)")
        if mode != ssl.CERT_NONE and not self.client_ca_file:
            raise ValueError(f"client_auth_type {self.client_auth_type} verifies client certificates: set "
                             "client_ca_file to the CA that signs them")
        if TLS_VERSIONS[self.min_version] > TLS_VERSIONS[self.max_version]:
            raise ValueError(f"min_version {self.min_version} is above max_version {self.max_version}")
        return mode


class _Document(_Strict):
    tls_server_config: TLSServerConfig | None = None
    basic_auth_users: dict[str, SecretStr] | None = None

    @field_validator("basic_auth_users")
    @classmethod
    def _bcrypt(cls, users: dict[str, SecretStr] | None) -> dict[str, SecretStr] | None:
        for user, hashed in (users or {}).items():
            if not user or ":" in user:
                raise ValueError(f"user {user!r}: a basic auth user name is not empty and has no ':'")
            if not hashed.get_secret_value().startswith(("$2a$", "$2b$", "$2y$")):
                raise ValueError(f"user {user!r}: the password is not a bcrypt hash ($2a$, $2b$ or $2y$...; make "
                                 "one with `htpasswd -nBC 10 \"\" | tr -d ':\\n'`)")
        return users


def credentials(authorization: str | None) -> tuple[str, str] | None:
    """The (user, password) of an `Authorization: Basic ...` header; None when there is none or it is malformed."""
    if not authorization:
        return None
    scheme, _, encoded = authorization.strip().partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(encoded.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None
    user, colon, password = decoded.partition(":")
    return (user, password) if colon else None


@dataclass
class BasicAuthUsers:
    """Who may read the endpoints: user -> bcrypt hash. A password once verified for a user and hash is
    remembered (by its SHA-256, not in clear), as exporter-toolkit caches, so a scrape costs no bcrypt round each
    time; an unknown user costs a bcrypt round too, so that timing does not tell which users exist."""

    hashes: Mapping[str, bytes] = field(repr=False)
    _verified: set[bytes] = field(default_factory=set, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def allows(self, authorization: str | None) -> bool:
        given = credentials(authorization)
        if given is None:
            return False
        user, password = given
        hashed = self.hashes.get(user)
        key = hashlib.sha256(b"\0".join((user.encode(), password.encode(), hashed or b""))).digest()
        with self._lock:
            if hashed is not None and key in self._verified:
                return True
        ok = _checkpw(password.encode(), hashed if hashed is not None else _DUMMY_HASH)
        if ok and hashed is not None:
            with self._lock:
                if len(self._verified) >= 1024:  # bounded: a flood of distinct passwords cannot grow it
                    self._verified.clear()
                self._verified.add(key)
            return True
        return False


#: A bcrypt hash (cost 10, exporter-toolkit's example cost) no password matches in practice; checked for unknown users.
_DUMMY_HASH = b"$2b$10$" + b"." * 53


def _checkpw(password: bytes, hashed: bytes) -> bool:
    import bcrypt  # imported once users are configured (`parse` checks it is there): plain endpoints need none

    try:
        return bcrypt.checkpw(password, hashed)
    except ValueError:  # a password longer than bcrypt's 72 bytes, or a malformed hash: no match
        return False


@dataclass(frozen=True)
class WebConfig:
    """A web config file as read: the TLS context (None: plain HTTP) and the users (None: no authentication)."""

    tls: ssl.SSLContext | None
    users: BasicAuthUsers | None
    files: tuple[Path, ...]
    """The files it was read from (itself, the certificate, key and client CA), whose changes make it stale."""


def parse(text: str, where: Path) -> WebConfig:
    """A web config from the text of the file at `where` (relative paths in it are from its directory); reads the
    files it names. ConfigError, one line, on any problem."""
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"web config {where}: not YAML{at}") from None
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        raise ConfigError(f"web config {where}: a mapping of tls_server_config and basic_auth_users is expected")
    try:
        parsed = _Document.model_validate(doc)
        mode = parsed.tls_server_config.verify_mode() if parsed.tls_server_config else ssl.CERT_NONE
    except ValidationError as exc:
        raise ConfigError(f"web config {where}: {_problems(exc)}") from None
    except ValueError as exc:
        raise ConfigError(f"web config {where}: tls_server_config: {exc}") from None
    files = [where]
    tls = None
    if parsed.tls_server_config is not None:
        tls, named = _context(parsed.tls_server_config, mode, where)
        files += named
    users = None
    if parsed.basic_auth_users:
        try:
            import bcrypt  # noqa: F401  (a dependency of transcoder's: missing only from a broken install)
        except ImportError:
            raise ConfigError(f"web config {where}: basic_auth_users needs the bcrypt package: pip install "
                              "bcrypt") from None
        users = BasicAuthUsers({u: h.get_secret_value().encode() for u, h in parsed.basic_auth_users.items()})
    return WebConfig(tls, users, tuple(files))


def load(path: Path) -> WebConfig:
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"web config {path}: cannot read it: {exc.strerror or exc}") from None
    return parse(text, path)


def _problems(exc: ValidationError) -> str:
    """pydantic's errors in one line, without the input (a hash is input): `where: what` each."""
    found = []
    for e in exc.errors(include_url=False, include_input=False):
        where = ".".join(str(p) for p in e["loc"])
        last = str(e["loc"][-1]) if e["loc"] else ""
        if e["type"] == "extra_forbidden":
            why = (f"exporter-toolkit's, not supported by transcoder ({NOT_IMPLEMENTED[last]})"
                   if last in NOT_IMPLEMENTED else "unknown key")
        else:
            why = e["msg"].removeprefix("Value error, ")
        found.append(f"{where}: {why}")
    return "; ".join(found)


def _no_password() -> bytes:
    raise ConfigError("key_file is encrypted: a web config has no key password; give an unencrypted key (readable "
                      "by transcoder only)")


def _context(c: TLSServerConfig, mode: ssl.VerifyMode, where: Path) -> tuple[ssl.SSLContext, list[Path]]:
    base = where.parent
    cert, key = base / c.cert_file, base / c.key_file
    ca = base / c.client_ca_file if c.client_ca_file else None
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version, ctx.maximum_version = TLS_VERSIONS[c.min_version], TLS_VERSIONS[c.max_version]
    for name, path in (("cert_file", cert), ("key_file", key), ("client_ca_file", ca)):
        if path is not None and not path.is_file():
            raise ConfigError(f"web config {where}: tls_server_config.{name} {path}: no such file")
    try:
        ctx.load_cert_chain(cert, key, password=_no_password)
        if ca is not None:
            ctx.load_verify_locations(cafile=ca)
    except ConfigError as exc:
        raise ConfigError(f"web config {where}: tls_server_config: {exc}") from None
    except (ssl.SSLError, OSError) as exc:  # ssl's reason names no key material
        raise ConfigError(f"web config {where}: tls_server_config: cert_file {cert} and key_file {key}"
                          f"{f' and client_ca_file {ca}' if ca else ''} do not load as PEM: "
                          f"{getattr(exc, 'reason', None) or exc}") from None
    ctx.verify_mode = mode
    return ctx, [p for p in (cert, key, ca) if p is not None]


def _stamp(files: tuple[Path, ...]) -> tuple[tuple[int, int] | None, ...]:
    stamps: list[tuple[int, int] | None] = []
    for f in files:
        try:
            st = os.stat(f)
        except OSError:
            stamps.append(None)
        else:
            stamps.append((st.st_mtime_ns, st.st_size))
    return tuple(stamps)


class WebConfigFile:
    """A web config file, read at start-up (ConfigError then) and again on the first connection after it or a file
    it names changed. A reading that fails raises ConfigError on each connection until the files are fixed, and so
    does one that would switch between HTTP and HTTPS (the listening socket keeps its scheme until a restart)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._config = load(self.path)
        self.tls = self._config.tls is not None
        """Whether the endpoints serve HTTPS."""
        self._files = self._config.files
        self._stamp = _stamp(self._files)
        self._error: ConfigError | None = None

    def current(self) -> WebConfig:
        with self._lock:
            stamp = _stamp(self._files)
            if stamp != self._stamp:
                self._stamp = stamp
                try:
                    self._config, self._error = self._reload(), None
                except ConfigError as exc:
                    self._error = exc
            if self._error is not None:
                raise self._error
            return self._config

    def _reload(self) -> WebConfig:
        new = load(self.path)
        if (new.tls is not None) != self.tls:
            was, now = ("HTTPS", "HTTP") if self.tls else ("HTTP", "HTTPS")
            raise ConfigError(f"web config {self.path}: now asks for {now} where the endpoints serve {was}: "
                              "restart transcoder to change the scheme")
        self._files = new.files
        self._stamp = _stamp(new.files)
        return new
