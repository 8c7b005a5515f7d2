"""transcoder.kafka.oauthbearer: librdkafka's unsecured JWT for kafka-python's OAUTHBEARER, never printed."""

from __future__ import annotations

import base64
import json

import pytest

from transcoder.errors import ConfigError
from transcoder.kafka import oauthbearer
from transcoder.kafka.protocol import kafka_python_config
from transcoder.logs import REDACTOR, redact


def parts(token: str) -> tuple[dict, dict, str]:
    header, claims, signature = token.split(".")
    decode = lambda s: json.loads(base64.urlsafe_b64decode(s + "=" * (-len(s) % 4)))  # noqa: E731
    return decode(header), decode(claims), signature


def test_token_is_librdkafkas_unsecured_jwt():
    config = oauthbearer.parse_unsecured_jwt_config("principal=alice")
    token = oauthbearer.unsecured_jwt(config, 1549251467.5467)
    header, claims, signature = parts(token)
    assert header == {"alg": "none"} and signature == ""
    assert token.startswith("eyJhbGciOiJub25lIn0.")  # librdkafka's constant header, byte for byte
    assert claims == {"sub": "alice", "iat": 1549251467.546, "exp": 1549255067.546}
    raw = base64.urlsafe_b64decode(token.split(".")[1] + "==").decode()
    assert raw == '{"sub":"alice","iat":1549251467.546,"exp":1549255067.546}'  # librdkafka's printf, no spaces
    assert "=" not in token and "+" not in token and "/" not in token  # base64url, unpadded


def test_every_key_of_the_config():
    config = oauthbearer.parse_unsecured_jwt_config(
        "principalClaimName=azp principal=svc-1  scope=read,,write,read scopeClaimName=scp lifeSeconds=60 "
        "extension_traceId=abc123 extension_logicalCluster=lkc-1")
    assert config.extensions == {"traceId": "abc123", "logicalCluster": "lkc-1"}
    _, claims, _ = parts(oauthbearer.unsecured_jwt(config, 1000.0))
    assert claims == {"azp": "svc-1", "iat": 1000.0, "exp": 1060.0, "scp": ["read", "write"]}


@pytest.mark.parametrize("text,names", [
    ("", "no principal"),
    ("scope=a", "no principal"),
    ("principal=a principal=b", "principal= given twice"),
    ("principal=a lifeSeconds=0", "lifeSeconds must be"),
    ("principal=a lifeSeconds=ten", "lifeSeconds is not a whole number"),
    ("principal=a colour=blue", "unknown key 'colour'"),
    ("principal=a extension_auth=x", "extension name 'auth'"),
    ("principal=a extension_a1=x", "extension name 'a1'"),
    ('principal=a"b', "principal cannot contain"),
    ("principal=a hunter2secret", "a part is not key=value"),
])
def test_bad_config_names_the_key_and_never_quotes_the_value(text, names):
    with pytest.raises(ConfigError) as err:
        oauthbearer.parse_unsecured_jwt_config(text)
    assert names in str(err.value)
    assert "hunter2secret" not in str(err.value) and "blue" not in str(err.value)


BASE = {"bootstrap.servers": "a:9093", "security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER"}


@pytest.mark.parametrize("extra,names", [
    ({"sasl.oauthbearer.method": "oidc", "sasl.oauthbearer.client.secret": "s3cr3t-value"},
     "sasl.oauthbearer.method=oidc"),
    ({"sasl.oauthbearer.config": "principal=a"}, "enable.sasl.oauthbearer.unsecure.jwt=true"),
])
def test_what_the_kafka_python_client_cannot_do_is_one_line_naming_the_property(extra, names):
    with pytest.raises(ConfigError) as err:
        kafka_python_config({**BASE, **extra})
    assert names in str(err.value) and "\n" not in str(err.value) and "s3cr3t" not in str(err.value)


def test_kafka_python_gets_a_provider_whose_token_is_redacted():
    from kafka.net.sasl.oauth import AbstractTokenProvider

    now = [2_000_000_000.0]
    config = oauthbearer.parse_unsecured_jwt_config("principal=bob lifeSeconds=100 extension_tenant=acme-42")
    provider = oauthbearer.token_provider(config, clock=lambda: now[0])
    assert isinstance(provider, AbstractTokenProvider)
    token = provider.token()
    assert parts(token)[1]["sub"] == "bob"
    assert provider.extensions() == {"tenant": "acme-42"}
    now[0] += 79
    assert provider.token() == token  # reused within 80% of its life
    now[0] += 2
    renewed = provider.token()
    assert renewed != token and parts(renewed)[1]["iat"] == 2_000_000_081.0
    for secret in (token, renewed, token.split(".")[1], "acme-42"):
        assert REDACTOR and secret not in redact(f"sending {secret} and {base64.b64encode(secret.encode())!r}")
    assert token not in repr(provider)

    conf = kafka_python_config({**BASE, "enable.sasl.oauthbearer.unsecure.jwt": "true",
                                "sasl.oauthbearer.config": "principal=carol"})
    assert conf["sasl_mechanism"] == "OAUTHBEARER"
    assert parts(conf["sasl_oauth_token_provider"].token())[1]["sub"] == "carol"
