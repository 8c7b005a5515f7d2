"""The HTTP endpoints with a web config file, as a scraper and a probe see them: HTTPS with the local broker's
throwaway certificates, basic auth on /metrics and /status, the probes without it. No broker: the endpoints alone."""

from __future__ import annotations

import base64
import ssl
import urllib.error
import urllib.request
from pathlib import Path

import bcrypt
import pytest
from structlog.testing import capture_logs

from transcoder.dev import certs
from transcoder.metrics.registry import MigrationMetrics


def get(url: str, *, auth: tuple[str, str] | None = None, context: ssl.SSLContext | None = None
        ) -> tuple[int, str, dict[str, str]]:
    """(status, body, headers); an error status is an answer too."""
    request = urllib.request.Request(url)
    if auth is not None:
        request.add_header("Authorization", "Basic " + base64.b64encode(":".join(auth).encode()).decode())
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as resp:
            return resp.status, resp.read().decode(), dict(resp.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(), dict(exc.headers)


@pytest.fixture
def tls(tmp_path: Path) -> certs.CertPaths:
    return certs.generate(tmp_path / "certs")


HASHED = bcrypt.hashpw(b"s3cret", bcrypt.gensalt(4)).decode()


def serve(tls: certs.CertPaths, extra: str = "", **kw: bool) -> tuple[MigrationMetrics, int]:
    hashed = HASHED
    web = tls.dir / "web-config.yml"
    web.write_text("tls_server_config:\n  cert_file: broker-keystore.pem\n  key_file: broker-keystore.pem\n"
                   f"{extra}basic_auth_users:\n  prometheus: '{hashed}'\n")
    metrics = MigrationMetrics()
    metrics.verified("orders-zstd", {0: 1234})
    return metrics, metrics.serve(0, "127.0.0.1", web_config_file=web, **kw)


def test_https_and_basic_auth_on_metrics_and_status_not_on_the_probes(tls):
    with capture_logs() as logs:
        served(tls)
    secrets = [HASHED, "s3cret"] + [line for line in tls.broker_keystore.read_text().splitlines()
                                    if line and not line.startswith("-----")]
    assert logs and not [s for s in secrets if s in repr(logs)]  # the failed handshakes were logged, nothing secret


def served(tls: certs.CertPaths) -> None:
    metrics, port = serve(tls)
    trust = ssl.create_default_context(cafile=str(tls.ca))
    try:
        code, body, _ = get(f"https://127.0.0.1:{port}/metrics", auth=("prometheus", "s3cret"), context=trust)
        assert code == 200
        assert 'transcoder_migration_verified_offset{destination="orders-zstd",partition="0"} 1234.0' in body

        for path, auth in (("/metrics", ("prometheus", "wrong")), ("/metrics", ("grafana", "s3cret")),
                           ("/metrics", None), ("/status", None)):
            code, body, headers = get(f"https://127.0.0.1:{port}{path}", auth=auth, context=trust)
            assert (code, body) == (401, "unauthorized\n"), (path, auth)
            assert headers["WWW-Authenticate"] == 'Basic realm="transcoder", charset="UTF-8"'
            assert "transcoder_migration" not in body

        assert get(f"https://127.0.0.1:{port}/status", auth=("prometheus", "s3cret"), context=trust)[:2] == (200, "{}")
        assert get(f"https://127.0.0.1:{port}/healthz", context=trust)[:2] == (200, "ok\n")  # Kubernetes' probe
        assert get(f"https://127.0.0.1:{port}/readyz", context=trust)[:2] == (200, "ok\n")

        # plain HTTP to the HTTPS port: told so, nothing served (with credentials or not)
        for auth in (None, ("prometheus", "s3cret")):
            assert get(f"http://127.0.0.1:{port}/metrics", auth=auth)[:2] == (
                400, "Client sent an HTTP request to an HTTPS server.\n")
        with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):  # not the broker's CA
            get(f"https://127.0.0.1:{port}/healthz", context=ssl.create_default_context())
        # the endpoints still serve after the failed handshakes
        assert get(f"https://127.0.0.1:{port}/metrics", auth=("prometheus", "s3cret"), context=trust)[0] == 200
    finally:
        metrics.stop()


def test_client_certificates_and_probes_behind_auth(tls):
    extra = "  client_ca_file: ca.pem\n  client_auth_type: RequireAndVerifyClientCert\n"
    metrics, port = serve(tls, extra, auth_probes=True)
    trust = ssl.create_default_context(cafile=str(tls.ca))
    mutual = ssl.create_default_context(cafile=str(tls.ca))
    mutual.load_cert_chain(tls.client_cert, tls.client_key, password=tls.client_key_password.read_text().strip())
    try:
        assert get(f"https://127.0.0.1:{port}/healthz", context=mutual)[0] == 401  # auth_probes
        assert get(f"https://127.0.0.1:{port}/healthz", auth=("prometheus", "s3cret"), context=mutual)[0] == 200
        with pytest.raises(OSError):  # no client certificate: the handshake is refused
            get(f"https://127.0.0.1:{port}/healthz", auth=("prometheus", "s3cret"), context=trust)
    finally:
        metrics.stop()
