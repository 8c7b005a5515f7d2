"""transcoder.metrics.web_config: the exporter-toolkit web config file read (TLS, users), its refusals in one line
with no secret in them, the basic auth check, and the file read again when it changes; the metrics config keys."""

from __future__ import annotations

import base64
import os
import ssl
from pathlib import Path

import bcrypt
import pytest
import yaml

from tests.support.cli import one_line, run_cli
from transcoder.config import parse as parse_config
from transcoder.dev import certs
from transcoder.dev.ports import free_port
from transcoder.errors import ConfigError
from transcoder.metrics import web_config as wc
from transcoder.metrics.web_config import BasicAuthUsers, WebConfigFile, credentials, load

# cost 4, bcrypt's least: a check takes ~1 ms (exporter-toolkit's example uses 10)
HASH = bcrypt.hashpw(b"s3cret", bcrypt.gensalt(4)).decode()


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


@pytest.fixture(scope="module")
def tls_dir(tmp_path_factory: pytest.TempPathFactory) -> certs.CertPaths:
    """The local broker's throwaway CA and certificates (EC keys: milliseconds)."""
    return certs.generate(tmp_path_factory.mktemp("certs"))


def write(directory: Path, text: str) -> Path:
    path = directory / "web-config.yml"
    path.write_text(text)
    return path


def refusal(directory: Path, text: str) -> str:
    with pytest.raises(ConfigError) as info:
        load(write(directory, text))
    line = str(info.value)
    assert "\n" not in line
    return line


# ------------------------------------------------------------------------------------------ the Authorization header

@pytest.mark.parametrize(("header", "expected"), [
    (basic("prom", "s3cret"), ("prom", "s3cret")),
    (basic("prom", "a:b"), ("prom", "a:b")),  # a password may hold ':', a user may not
    ("basic " + base64.b64encode(b"prom:x").decode(), ("prom", "x")),  # the scheme is case-insensitive
    (basic("prom", ""), ("prom", "")),
    (None, None),
    ("", None),
    ("Bearer abc", None),
    ("Basic !!!not-base64", None),
    ("Basic " + base64.b64encode(b"no-colon").decode(), None),
    ("Basic " + base64.b64encode(b"\xff\xfe:x").decode(), None),  # not UTF-8
])
def test_credentials_of_a_basic_authorization_header(header, expected):
    assert credentials(header) == expected


def test_users_allow_the_right_password_only():
    users = BasicAuthUsers({"prom": HASH.encode()})
    assert users.allows(basic("prom", "s3cret"))
    assert not users.allows(basic("prom", "wrong"))
    assert not users.allows(basic("other", "s3cret"))
    assert not users.allows(None)
    assert not users.allows(basic("prom", "x" * 100))  # past bcrypt's 72 bytes: no match, no exception


def test_a_verified_password_costs_no_second_bcrypt_round(monkeypatch):
    users = BasicAuthUsers({"prom": HASH.encode()})
    rounds = []
    real = wc._checkpw
    monkeypatch.setattr(wc, "_checkpw", lambda pw, h: rounds.append(h) or real(pw, h))
    assert users.allows(basic("prom", "s3cret")) and users.allows(basic("prom", "s3cret"))
    assert len(rounds) == 1
    assert not users.allows(basic("prom", "wrong")) and not users.allows(basic("prom", "wrong"))
    assert len(rounds) == 3  # a wrong password is checked every time
    assert not users.allows(basic("nobody", "s3cret"))
    assert rounds[-1] == wc._DUMMY_HASH  # an unknown user costs a round too


# ---------------------------------------------------------------------------------------------- reading the file

def test_an_empty_file_asks_for_nothing(tmp_path):
    web = load(write(tmp_path, ""))
    assert web.tls is None and web.users is None


def test_users_only_serve_plain_http_with_basic_auth(tmp_path):
    web = load(write(tmp_path, f"basic_auth_users:\n  prom: '{HASH}'\n"))
    assert web.tls is None
    assert web.users is not None and web.users.allows(basic("prom", "s3cret"))


def test_tls_paths_are_read_from_the_files_directory(tls_dir):
    web = load(write(tls_dir.dir, "tls_server_config:\n  cert_file: broker-keystore.pem\n"
                                  "  key_file: broker-keystore.pem\n  min_version: TLS13\n"))
    assert web.tls is not None
    assert web.tls.minimum_version == ssl.TLSVersion.TLSv1_3
    assert web.tls.verify_mode == ssl.CERT_NONE
    assert tls_dir.broker_keystore in web.files


def test_client_certificates_verified_against_the_client_ca(tls_dir):
    web = load(write(tls_dir.dir, "tls_server_config:\n  cert_file: broker-keystore.pem\n"
                                  "  key_file: broker-keystore.pem\n  client_ca_file: ca.pem\n"
                                  "  client_auth_type: RequireAndVerifyClientCert\n"))
    assert web.tls is not None and web.tls.verify_mode == ssl.CERT_REQUIRED


@pytest.mark.parametrize(("text", "says"), [
    ("tls_server_config:\n  cert_file: c.pem\n  key_file: k.pem\n  cipher_suites: [TLS_AES_128_GCM_SHA256]\n",
     "tls_server_config.cipher_suites: exporter-toolkit's, not supported by transcoder (OpenSSL's defaults apply)"),
    ("http_server_config:\n  http2: false\n", "http_server_config: exporter-toolkit's, not supported"),
    ("basic_auth_user:\n  prom: x\n", "basic_auth_user: unknown key"),
    ("tls_server_config:\n  key_file: k.pem\n", "tls_server_config.cert_file: Field required"),
    ("tls_server_config:\n  cert_file: c.pem\n  key_file: k.pem\n  client_auth_type: RequireAnyClientCert\n",
     "RequireAnyClientCert asks for a client certificate without verifying it"),
    ("tls_server_config:\n  cert_file: c.pem\n  key_file: k.pem\n  min_version: TLS14\n",
     "tls_server_config.min_version: Input should be 'TLS10', 'TLS11', 'TLS12' or 'TLS13'"),
    ("tls_server_config:\n  cert_file: c.pem\n  key_file: k.pem\n  client_ca_file: ca.pem\n",
     "client_ca_file is set but client_auth_type is NoClientCert"),
    ("tls_server_config:\n  cert_file: c.pem\n  key_file: k.pem\n  client_auth_type: VerifyClientCertIfGiven\n",
     "set client_ca_file"),
    ("tls_server_config:\n  cert_file: c.pem\n  key_file: k.pem\n  min_version: TLS13\n  max_version: TLS12\n",
     "min_version TLS13 is above max_version TLS12"),
    ("- a list\n", "a mapping of tls_server_config and basic_auth_users is expected"),
    ("tls_server_config: [\n", "not YAML at line"),
])
def test_a_bad_file_is_refused_in_one_line(tmp_path, text, says):
    line = refusal(tmp_path, text)
    assert line.startswith(f"web config {tmp_path / 'web-config.yml'}: ")
    assert says in line


def test_a_password_that_is_no_bcrypt_hash_is_refused_without_showing_it(tmp_path):
    line = refusal(tmp_path, "basic_auth_users:\n  prom: plain-text-password\n")
    assert "user 'prom': the password is not a bcrypt hash" in line
    assert "plain-text-password" not in line


def test_a_missing_or_unreadable_file_is_named(tmp_path, tls_dir):
    with pytest.raises(ConfigError, match=r"web config .*absent\.yml: cannot read it: No such file"):
        load(tmp_path / "absent.yml")
    line = refusal(tls_dir.dir, "tls_server_config:\n  cert_file: nope.pem\n  key_file: broker-keystore.pem\n")
    assert f"tls_server_config.cert_file {tls_dir.dir / 'nope.pem'}: no such file" in line


def test_an_encrypted_key_is_refused_without_prompting(tls_dir):
    # client-key.pem is encrypted: ssl would ask for its password on the terminal without the callback
    line = refusal(tls_dir.dir, "tls_server_config:\n  cert_file: client-cert.pem\n  key_file: client-key.pem\n")
    assert "key_file is encrypted" in line


def test_a_key_that_does_not_match_is_refused(tls_dir):
    line = refusal(tls_dir.dir, "tls_server_config:\n  cert_file: ca.pem\n  key_file: broker-keystore.pem\n")
    assert "do not load as PEM" in line
    assert "PRIVATE KEY" not in line


def test_no_hash_in_the_read_configs_repr(tmp_path):
    web = load(write(tmp_path, f"basic_auth_users:\n  prom: '{HASH}'\n"))
    assert HASH not in repr(web) and HASH[7:] not in repr(web.users)


# ---------------------------------------------------------------------------------------------- read again on change

def touch_later(path: Path, text: str) -> None:
    """Rewrite `path` with a later mtime (a file system's clock may not tick between two writes in a test)."""
    before = path.stat().st_mtime_ns
    path.write_text(text)
    os.utime(path, ns=(before + 10**9, before + 10**9))


def test_a_changed_file_is_read_again(tmp_path):
    path = write(tmp_path, f"basic_auth_users:\n  prom: '{HASH}'\n")
    web = WebConfigFile(path)
    first = web.current()
    assert web.current() is first  # unchanged: not read again
    other = bcrypt.hashpw(b"new", bcrypt.gensalt(4)).decode()
    touch_later(path, f"basic_auth_users:\n  grafana: '{other}'\n")
    users = web.current().users
    assert users is not None
    assert users.allows(basic("grafana", "new")) and not users.allows(basic("prom", "s3cret"))


def test_a_file_broken_after_start_fails_closed_until_fixed(tmp_path):
    path = write(tmp_path, f"basic_auth_users:\n  prom: '{HASH}'\n")
    web = WebConfigFile(path)
    touch_later(path, "basic_auth_users:\n  prom: not-a-hash\n")
    for _ in range(2):  # every request, not only the first after the change
        with pytest.raises(ConfigError, match="not a bcrypt hash"):
            web.current()
    touch_later(path, f"basic_auth_users:\n  prom: '{HASH}'\n")
    assert web.current().users is not None


def test_a_change_of_scheme_needs_a_restart(tmp_path, tls_dir):
    path = write(tls_dir.dir, "tls_server_config:\n  cert_file: broker-keystore.pem\n  key_file: broker-keystore.pem\n")
    web = WebConfigFile(path)
    assert web.tls
    touch_later(path, f"basic_auth_users:\n  prom: '{HASH}'\n")
    with pytest.raises(ConfigError, match="now asks for HTTP where the endpoints serve HTTPS: restart"):
        web.current()


def test_a_renewed_certificate_is_picked_up(tmp_path, tls_dir):
    for name in ("broker-keystore.pem", "ca.pem"):
        (tmp_path / name).write_bytes((tls_dir.dir / name).read_bytes())
    path = write(tmp_path, "tls_server_config:\n  cert_file: broker-keystore.pem\n  key_file: broker-keystore.pem\n")
    web = WebConfigFile(path)
    first = web.current()
    renewed = certs.generate(tmp_path / "renewed")
    touch_later(tmp_path / "broker-keystore.pem", renewed.broker_keystore.read_text())
    assert web.current() is not first


# ---------------------------------------------------------------------------------------------- the config's keys

MINIMAL = {"cluster": {"bootstrap_servers": "k1:9092"},
           "routes": [{"source": "a", "destinations": [{"codec": "zstd"}]}]}


def test_metrics_defaults_keep_todays_endpoints():
    m = parse_config(MINIMAL, environ={}).metrics
    assert (m.host, m.port, m.web_config_file, m.auth_probes) == ("0.0.0.0", 9308, None, False)


def test_metrics_web_config_keys_from_the_file_and_the_environment():
    raw = {**MINIMAL, "metrics": {"host": "127.0.0.1", "web_config_file": "/etc/transcoder/web/web-config.yml"}}
    m = parse_config(raw, environ={"TRANSCODER__METRICS__AUTH_PROBES": "true"}).metrics
    assert (m.host, m.web_config_file, m.auth_probes) == ("127.0.0.1", "/etc/transcoder/web/web-config.yml", True)
    with pytest.raises(ConfigError, match="web_config_file"):
        parse_config({**MINIMAL, "metrics": {"web_config_file": ""}}, environ={})


def test_run_refuses_a_bad_web_config_file_before_connecting_in_one_line_without_the_secret(tmp_path):
    web = write(tmp_path, "basic_auth_users:\n  prom: hunter2-in-clear\n")
    path = tmp_path / "config.yaml"
    metrics = {"port": free_port(), "host": "127.0.0.1", "web_config_file": str(web)}
    path.write_text(yaml.safe_dump({**MINIMAL, "cluster": {"bootstrap_servers": "127.0.0.1:1"}, "metrics": metrics}))
    proc = run_cli("run", "--config", str(path), timeout=60)
    assert proc.returncode == 2
    assert one_line(proc) == (f"transcoder: error: web config {web}: basic_auth_users: user 'prom': the password is "
                              "not a bcrypt hash ($2a$, $2b$ or $2y$...; make one with `htpasswd -nBC 10 \"\" | tr -d "
                              "':\\n'`)")
    assert "hunter2" not in proc.stdout + proc.stderr


@pytest.mark.parametrize("command", [("migrate", "verify", "--config", "absent.yaml"),
                                     ("migrate", "watch", "--topic", "t", "--follow")])
def test_web_config_file_without_metrics_port_is_refused_before_anything(tmp_path, command):
    proc = run_cli(*command, "--web-config-file", str(write(tmp_path, "")), timeout=60)
    assert proc.returncode == 2
    assert "--web-config-file needs --metrics-port" in one_line(proc)
