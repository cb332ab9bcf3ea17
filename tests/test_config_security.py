"""Configuration precedence and transport security (issue 8): flags > env > file > defaults;
TLS and mTLS with real certificates generated here."""

from __future__ import annotations

import datetime
import ipaddress

import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.helpers import serving
from workplace.env.v1 import environment_pb2 as pb
from workplace.env.v1 import environment_pb2_grpc as pb_grpc
from workplace_env.config import ConfigError, Settings, describe, load_settings

# -- configuration -------------------------------------------------------------------------------


def test_precedence_flag_over_env_over_file_over_default(tmp_path):
    path = tmp_path / "env.toml"
    path.write_text("[server]\nmax_sessions = 10\nidle_ttl_s = 5\nworkers = 3\n")
    environ = {"WORKPLACE_ENV_MAX_SESSIONS": "20", "WORKPLACE_ENV_IDLE_TTL_S": "6"}
    settings, sources = load_settings({"max_sessions": 30}, path, environ)
    assert (settings.max_sessions, sources["max_sessions"]) == (30, "flag")
    assert (settings.idle_ttl_s, sources["idle_ttl_s"]) == (6.0, "env")
    assert (settings.workers, sources["workers"]) == (3, "file")
    assert (settings.grace_s, sources["grace_s"]) == (Settings.grace_s, "default")
    assert settings.session_config().max_sessions == 30


def test_yaml_file_and_config_env_var(tmp_path):
    path = tmp_path / "env.yaml"
    path.write_text("max_call_ids: 7\nlog_level: DEBUG\n")
    settings, sources = load_settings({}, None, {"WORKPLACE_ENV_CONFIG": str(path)})
    assert (settings.max_call_ids, settings.log_level, sources["log_level"]) == (7, "DEBUG", "file")


@pytest.mark.parametrize(
    "flags,environ,text,needle",
    [
        ({"max_sessions": "many"}, {}, "", "max_sessions"),
        ({}, {"WORKPLACE_ENV_IDLE_TTL_S": "soon"}, "", "WORKPLACE_ENV_IDLE_TTL_S"),
        ({}, {}, "bogus_setting = 1\n", "bogus_setting"),
        ({}, {}, "max_sessions = [\n", "does not parse"),
        ({"tls_cert": "a.pem"}, {}, "", "tls_key"),
    ],
)
def test_bad_settings_name_the_setting(tmp_path, flags, environ, text, needle):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_settings(flags, path, environ)
    assert needle in str(err.value)


def test_secrets_are_masked():
    settings, sources = load_settings({"admin_token": "hunter2"}, None, {})
    rows = {name: value for name, value, _ in describe(settings, sources)}
    assert rows["admin_token"] == "***" and "hunter2" not in str(rows)


# -- TLS -----------------------------------------------------------------------------------------


def _key():
    return ec.generate_private_key(ec.SECP256R1())


def _cert(subject_key, name, issuer_key=None, issuer_name=None, ca=False):
    now = datetime.datetime.now(datetime.UTC)
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    issuer = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer_name or name)])
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(subject_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if not ca:
        builder = builder.add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
    return builder.sign(issuer_key or subject_key, hashes.SHA256())


def _pem(obj) -> bytes:
    if hasattr(obj, "private_bytes"):
        return obj.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    return obj.public_bytes(serialization.Encoding.PEM)


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    root = tmp_path_factory.mktemp("pki")
    ca_key = _key()
    ca = _cert(ca_key, "test-ca", ca=True)
    out = {"ca": _pem(ca)}
    for who in ("server", "client"):
        key = _key()
        out[f"{who}_key"] = _pem(key)
        out[f"{who}_cert"] = _pem(_cert(key, who, ca_key, "test-ca"))
    for name, data in out.items():
        (root / f"{name}.pem").write_bytes(data)
    out["dir"] = root
    return out


def _list_tools(target, credentials) -> int:
    with grpc.secure_channel(target, credentials) as channel:
        stub = pb_grpc.EnvironmentServiceStub(channel)
        return len(stub.ListTools(pb.ListToolsRequest(), timeout=10).tools)


def _serve(sandbox, pki, mtls: bool):
    """A server with TLS (and with ``mtls``, client certificates required)."""
    d = pki["dir"]
    settings = Settings(
        tls_cert=str(d / "server_cert.pem"),
        tls_key=str(d / "server_key.pem"),
        tls_client_ca=str(d / "ca.pem") if mtls else None,
    )
    return serving(sandbox, settings=settings)


def test_tls_server_accepts_a_client_trusting_its_ca(sandbox, pki):
    with _serve(sandbox, pki, mtls=False) as server:
        target = f"127.0.0.1:{server.port}"
        assert _list_tools(target, grpc.ssl_channel_credentials(pki["ca"])) == 27
        with grpc.insecure_channel(target) as channel, pytest.raises(grpc.RpcError):
            pb_grpc.EnvironmentServiceStub(channel).ListTools(pb.ListToolsRequest(), timeout=5)


def test_mtls_requires_a_client_certificate(sandbox, pki):
    with _serve(sandbox, pki, mtls=True) as server:
        target = f"127.0.0.1:{server.port}"
        with_cert = grpc.ssl_channel_credentials(pki["ca"], pki["client_key"], pki["client_cert"])
        assert _list_tools(target, with_cert) == 27
        with pytest.raises(grpc.RpcError) as err:
            _list_tools(target, grpc.ssl_channel_credentials(pki["ca"]))
        assert err.value.code() == grpc.StatusCode.UNAVAILABLE


@pytest.mark.parametrize(
    "flags,needle",
    [
        ({"max_call_ids": -1}, "max_call_ids"),
        ({"max_call_ids": 0}, "max_call_ids"),
        ({"evict_interval_s": 0}, "evict_interval_s"),
        ({"max_sessions": -1}, "max_sessions"),
        ({"idle_ttl_s": -5}, "idle_ttl_s"),
        ({"max_message_bytes": -1}, "max_message_bytes"),
        ({"workers": 0}, "workers"),
        ({"log_level": "FOO"}, "log_level"),
        ({"address": "127.0.0.1:99999"}, "address"),
        ({"metrics_address": "nohost"}, "metrics_address"),
        ({"http_address": "127.0.0.1:8000", "tls_cert": "c", "tls_key": "k"}, "http_address"),
    ],
)
def test_out_of_range_settings_are_refused(flags, needle):
    with pytest.raises(ConfigError) as err:
        load_settings(flags, None, {})
    assert needle in str(err.value)


def test_out_of_range_env_setting_names_its_source():
    with pytest.raises(ConfigError) as err:
        load_settings({}, None, {"WORKPLACE_ENV_MAX_SESSIONS": "-4"})
    assert "max_sessions (from env)" in str(err.value)
