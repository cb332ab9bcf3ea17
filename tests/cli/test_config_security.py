"""Configuration precedence and transport security: flags > env > file > defaults;
TLS and mTLS with real certificates generated here."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import ipaddress
import json
import os
import queue
import re
import subprocess
import sys
import threading
from typing import Any

import grpc
import httpx
import pytest
import typer
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from typer.testing import CliRunner

from tests.helpers import HANG_S, REPO, serving
from workplace.env.v1 import environment_pb2 as pb
from workplace.env.v1 import environment_pb2_grpc as pb_grpc
from workplace_env.cli import app
from workplace_env.config import (
    COMMANDS,
    MAX_COUNT,
    MAX_DURATION_S,
    RANGES,
    SPECS,
    ConfigError,
    Settings,
    describe,
    load_settings,
    setting_warnings,
    unknown_env_vars,
    used_by,
)
from workplace_env.gateway.settings import GatewaySettings
from workplace_env.sessions import SessionConfig
from workplace_env.taskgen import generate_tasks
from workplace_env_client import (
    AsyncEnvironmentClient,
    EnvironmentClient,
    UnavailableError,
    tls_credentials,
)

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


# -- TLS with the HTTP gateway, co-hosted and separate ---------------------------------------------

CLI = (sys.executable, "-m", "workplace_env.cli")
ROW = {"id": "tls-row", "ground_truth": []}


class _Lines:
    """A CLI process's stderr, read in a thread; :meth:`wait_for` a line (bounded wait)."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen(
            [*CLI, *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env={k: v for k, v in os.environ.items() if not k.startswith("WORKPLACE_ENV_")},
        )
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.put(line.rstrip("\n"))
        self.lines.put("")  # EOF

    def wait_for(self, pattern: str) -> re.Match[str]:
        seen = []
        while True:
            line = self.lines.get(timeout=HANG_S)  # hang guard, not pacing
            assert line or self.proc.poll() is None, f"exited before {pattern!r}: {seen}"
            found = re.search(pattern, line)
            if found:
                return found
            seen.append(line)

    def stop(self) -> int:
        self.proc.terminate()
        return self.proc.wait(HANG_S)


def _http_episode(url: str) -> None:
    """/ready, a legacy seed and a tool call through the gateway at ``url``, all answered."""
    with httpx.Client(base_url=url, timeout=HANG_S) as http:
        ready = http.get("/ready")
        assert ready.status_code == 200, ready.text
        assert http.post("/seed_session", json=ROW).status_code == 200
        found = http.post("/company_directory_find_email_address", json={"name": "zzzz"})
        assert found.status_code == 200 and found.json() == {"output": []}, found.text


def test_tls_serve_co_hosts_its_plain_http_gateway(pki):
    """``serve --tls-cert --tls-key --http-address`` is taken: the co-hosted gateway calls the
    servicer in-process. One process: TLS gRPC and plain HTTP."""
    d = pki["dir"]
    serve = _Lines(
        "serve", "--address", "127.0.0.1:0", "--http-address", "127.0.0.1:0",
        "--tls-cert", str(d / "server_cert.pem"), "--tls-key", str(d / "server_key.pem"),
    )  # fmt: skip
    try:
        port = serve.wait_for(r"serving on 127\.0\.0\.1:(\d+)\"").group(1)
        url = serve.wait_for(r"HTTP gateway on (http://[^\s\"]+)\"").group(1)
        assert _list_tools(f"127.0.0.1:{port}", grpc.ssl_channel_credentials(pki["ca"])) == 27
        _http_episode(url)
    finally:
        assert serve.stop() == 0


@pytest.mark.parametrize("mtls", [False, True])
def test_the_separate_gateway_reaches_a_tls_server_with_its_ca(sandbox, pki, mtls):
    """``workplace-env gateway`` reaches a TLS server: ``--tls-ca`` (and, for mTLS,
    ``--tls-client-cert`` / ``--tls-client-key``) make its channel a TLS one (a plain channel
    would leave ``/ready`` backend_unavailable and seeds 503)."""
    d = pki["dir"]
    with _serve(sandbox, pki, mtls=mtls) as server:
        target = f"127.0.0.1:{server.port}"
        tls = ["--tls-ca", str(d / "ca.pem")]
        if mtls:
            tls += ["--tls-client-cert", str(d / "client_cert.pem")]
            tls += ["--tls-client-key", str(d / "client_key.pem")]
        gateway = _Lines("gateway", "--grpc-target", target, "--address", "127.0.0.1:0", *tls)
        try:
            url = gateway.wait_for(rf"HTTP gateway on (http://\S+) -> {target} \(TLS\)\"").group(1)
            _http_episode(url)
        finally:
            assert gateway.stop() == 0


CLI_TOKEN = "tls-admin"


def _client_command(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """A client command of the CLI run to its end (no WORKPLACE_ENV_* from the test run)."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("WORKPLACE_ENV_")}
    return subprocess.run(
        [*CLI, *args],
        capture_output=True,
        text=True,
        timeout=HANG_S,  # hang guard
        env={**clean, "WORKPLACE_ENV_ADMIN_TOKEN": CLI_TOKEN, **(env or {})},
    )


@pytest.mark.parametrize("command", ["checkpoint", "run"])
def test_a_tls_client_of_a_plaintext_server_is_told_about_tls_ca(sandbox, pki, tmp_path, command):
    plaintext = Settings(admin_token=CLI_TOKEN)
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps(generate_tasks(sandbox, 1, 5)[0]) + "\n")
    args = {
        "checkpoint": ["checkpoint", "save", str(tmp_path / "ck"), "--timeout-s", "10"],
        "run": ["run", str(tasks), "--policy", "oracle"],
    }[command]
    with serving(sandbox, settings=plaintext) as server:
        target = f"127.0.0.1:{server.port}"
        done = _client_command(*args, "--target", target, "--tls-ca", str(pki["dir"] / "ca.pem"))
    said = " ".join(done.stderr.split())
    assert done.returncode == 1 and "Traceback" not in said, said
    assert f"fix: TLS with {target} failed" in said and "--tls-ca" in said
    assert "plaintext server" in said and "tls_credentials(" not in said


@pytest.mark.parametrize(("mtls", "given"), [(False, "flags"), (True, "flags"), (True, "env")])
def test_checkpoint_and_run_reach_a_tls_server(sandbox, pki, tmp_path, mtls, given):
    """``checkpoint save/restore`` and ``run --target`` had no TLS option
    and ignored WORKPLACE_ENV_TLS_CA (``export failed: UNAVAILABLE ... Socket closed``). They
    take the gateway's ``--tls-ca`` / ``--tls-client-cert`` / ``--tls-client-key`` (or its
    variables): save from one TLS server, restore into another, play an episode on it."""
    d = pki["dir"]
    files = {"tls_ca": d / "ca.pem"}
    if mtls:
        files |= {"tls_client_cert": d / "client_cert.pem", "tls_client_key": d / "client_key.pem"}
    flags: list[str] = []
    env: dict[str, str] = {}
    for name, path in files.items():
        if given == "flags":
            flags += [f"--{name.replace('_', '-')}", str(path)]
        else:
            env[f"WORKPLACE_ENV_{name.upper()}"] = str(path)
    settings = Settings(
        tls_cert=str(d / "server_cert.pem"),
        tls_key=str(d / "server_key.pem"),
        tls_client_ca=str(d / "ca.pem") if mtls else None,
        admin_token=CLI_TOKEN,
    )
    credentials = tls_credentials(*(str(p) for p in files.values()))
    task = generate_tasks(sandbox, 1, 5)[0]
    with serving(sandbox, settings=settings) as a, serving(sandbox, settings=settings) as b:
        with EnvironmentClient(f"127.0.0.1:{a.port}", credentials=credentials) as client:
            client.seed("tls-1", ("tls", 0), ("unit", "t"), task)
        plain_save = _client_command(
            "checkpoint", "save", str(tmp_path / "plain"), "--target", f"127.0.0.1:{a.port}"
        )
        assert plain_save.returncode == 1 and "export failed" in plain_save.stderr
        assert "fix:" in plain_save.stderr and "--tls-ca" in plain_save.stderr  # what to type
        save = _client_command(
            "checkpoint", "save", str(tmp_path / "ck"), "--target", f"127.0.0.1:{a.port}",
            *flags, env=env,
        )  # fmt: skip
        assert save.returncode == 0 and "saved 1 session " in save.stderr, save.stderr
        restore = _client_command(
            "checkpoint", "restore", str(tmp_path / "ck"), "--target", f"127.0.0.1:{b.port}",
            *flags, env=env,
        )  # fmt: skip
        assert restore.returncode == 0 and "restored 1 session " in restore.stderr, restore.stderr
        assert b.store.state_counts() == {"restored_unclaimed": 1}
        lines = tmp_path / "tasks.jsonl"
        lines.write_text(json.dumps(task) + "\n")
        run = _client_command(
            "run", str(lines), "--policy", "oracle", "--target", f"127.0.0.1:{b.port}",
            *flags, env=env,
        )  # fmt: skip
        assert run.returncode == 0, run.stdout + run.stderr
        assert b.store.live_count() == 1  # the run's episode was closed; the restored one stays


def test_a_client_command_with_an_unreadable_tls_file_exits_2(tmp_path):
    missing = str(tmp_path / "nope.pem")
    result = _client_command("checkpoint", "save", str(tmp_path / "ck"), "--tls-ca", missing)
    # The settings' own TLS check names the setting, its source and the file.
    assert result.returncode == 2, result.stderr
    assert f"configuration error: tls_ca (from --tls-ca) {missing}: cannot read" in result.stderr
    assert not (tmp_path / "ck").exists()


def test_a_tls_client_of_the_sdk_reaches_an_mtls_server(sandbox, pki):
    d = pki["dir"]
    with _serve(sandbox, pki, mtls=True) as server:
        credentials = tls_credentials(
            str(d / "ca.pem"), str(d / "client_cert.pem"), str(d / "client_key.pem")
        )
        with EnvironmentClient(f"127.0.0.1:{server.port}", credentials=credentials) as client:
            assert len(client.list_tools()) == 27
        with pytest.raises(ValueError):
            tls_credentials(str(d / "ca.pem"), str(d / "client_cert.pem"))


def test_a_tls_client_of_the_async_sdk_reaches_an_mtls_server(sandbox, pki):
    """The async client takes ``credentials=`` as the sync one does: TLS with them (here mTLS:
    the client's certificate too), plaintext without, which a TLS server does not answer."""
    d = pki["dir"]
    ca_only = tls_credentials(str(d / "ca.pem"))
    full = tls_credentials(str(d / "ca.pem"), str(d / "client_cert.pem"), str(d / "client_key.pem"))

    async def episode(target: str) -> tuple[int, float]:
        async with AsyncEnvironmentClient(target, credentials=full, max_attempts=1) as env:
            tools = len(await env.list_tools())
            async with env.session({"id": "t", "ground_truth": []}, episode=("tls", 0)) as s:
                await s.call_tool("company_directory_find_email_address", {"name": "a"})
                return tools, (await s.verify([])).reward

    async def refused(target: str, credentials: grpc.ChannelCredentials | None) -> None:
        async with AsyncEnvironmentClient(
            target, credentials=credentials, timeout_s=5, max_attempts=1
        ) as env:
            with pytest.raises(UnavailableError):
                await env.list_tools()

    with _serve(sandbox, pki, mtls=True) as server:
        target = f"127.0.0.1:{server.port}"
        assert asyncio.run(episode(target)) == (27, 1.0)
        asyncio.run(refused(target, None))  # plaintext
        asyncio.run(refused(target, ca_only))  # no client certificate


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
        ({"tls_client_cert": "c.pem"}, "tls_client_key"),
    ],
)
def test_out_of_range_settings_are_refused(flags, needle):
    with pytest.raises(ConfigError) as err:
        load_settings(flags, None, {})
    assert needle in str(err.value)


def test_out_of_range_env_setting_names_its_source():
    with pytest.raises(ConfigError) as err:
        load_settings({}, None, {"WORKPLACE_ENV_MAX_SESSIONS": "-4"})
    assert "max_sessions (from WORKPLACE_ENV_MAX_SESSIONS)" in str(err.value)


FLOAT_SETTINGS = [
    name
    for name, kind in ((f.name, str(f.type)) for f in dataclasses.fields(Settings))
    if kind.startswith("float")
]


@pytest.mark.parametrize("name", FLOAT_SETTINGS)
@pytest.mark.parametrize("text", ["nan", "inf", "-inf", "NaN"])
def test_a_float_setting_that_is_not_finite_is_refused_from_every_source(tmp_path, name, text):
    """``--idle-ttl-s nan`` passed every range check (NaN compares false) and a
    server started with it; inf is a TTL or drain that never elapses. Flags, env and file."""
    path = tmp_path / "f.toml"
    path.write_text(f"{name} = {text.lower()}\n")  # TOML spells them nan, inf, -inf
    sources = [
        ({name: float(text)}, None, {}),
        ({name: text}, None, {}),
        ({}, None, {f"WORKPLACE_ENV_{name.upper()}": text}),
        ({}, path, {}),
    ]
    for flags, file, environ in sources:
        with pytest.raises(ConfigError) as err:
            load_settings(flags, file, environ)
        assert name in str(err.value) and "finite" in str(err.value), (flags, file, environ)


def test_the_float_settings_are_the_durations_and_sizes():
    assert {"grace_s", "drain_delay_s", "idle_ttl_s", "evict_interval_s"} <= set(FLOAT_SETTINGS)


@pytest.mark.parametrize(
    "text,needle",
    [
        ("workers = 2\n[server]\nworkers = 7\n", "top-level workers and [server] workers"),
        ("grace_s = 2\n[server]\nworkers = 7\n", "top-level grace_s beside a [server] table"),
    ],
)
def test_a_setting_both_at_the_top_level_and_under_server_is_refused(tmp_path, text, needle):
    """The file's ``[server] workers = 7`` silently won over ``workers = 2``
    (and a top-level setting beside a ``[server]`` table was ignored)."""
    for suffix, body in ((".toml", text), (".yaml", _as_yaml(text))):
        path = tmp_path / f"both{suffix}"
        path.write_text(body)
        with pytest.raises(ConfigError) as err:
            load_settings({}, path, {})
        assert needle in str(err.value), suffix


def _as_yaml(toml_text: str) -> str:
    top, _, server = toml_text.partition("[server]\n")
    indented = "".join(f"  {line.replace(' = ', ': ')}\n" for line in server.splitlines())
    return top.replace(" = ", ": ") + "server:\n" + indented


def test_settings_under_server_alone_still_load(tmp_path):
    path = tmp_path / "ok.toml"
    path.write_text("[server]\nworkers = 7\n")
    assert load_settings({}, path, {})[0].workers == 7


NUMERIC_SETTINGS = [
    f.name for f in dataclasses.fields(Settings) if str(f.type).split()[0] in ("int", "float")
]


def _too_large(name: str) -> list[object]:
    """Values over a numeric setting's upper bound: an int just over a C int and one far over
    it; a float over every bound (durations and MiB) and one no timer takes."""
    if str(Settings.__dataclass_fields__[name].type).startswith("int"):
        return [MAX_COUNT + 1, 99_999_999_999_999]
    return [1e300, 1e10]


@pytest.mark.parametrize("name", NUMERIC_SETTINGS)
def test_a_numeric_setting_too_large_for_the_runtime_is_refused_from_every_source(tmp_path, name):
    """``--max-message-bytes 2147483648`` crashed the server at start
    (gRPC takes a C int), ``--drain-delay-s 1e300`` crashed the drain (time.sleep) and
    ``--evict-interval-s 1e300`` killed the eviction thread. Every numeric setting has an upper
    bound now, refused by flag, environment and file, naming the setting."""
    for value in _too_large(name):
        path = tmp_path / "big.toml"
        path.write_text(f"{name} = {value!r}\n")
        flag, variable = f"--{name.replace('_', '-')}", f"WORKPLACE_ENV_{name.upper()}"
        sources = [
            ({name: value}, None, {}, flag),
            ({name: str(value)}, None, {}, flag),
            ({}, None, {variable: str(value)}, variable),
            ({}, path, {}, f"file {path}"),
        ]
        for flags, file, environ, source in sources:
            with pytest.raises(ConfigError) as err:
                load_settings(flags, file, environ)
            assert f"{name} (from {source}) must be <=" in str(err.value), (value, source)


@pytest.mark.parametrize("name", NUMERIC_SETTINGS)
def test_the_largest_value_of_a_numeric_setting_loads(name):
    kind = str(Settings.__dataclass_fields__[name].type)
    value = MAX_COUNT if kind.startswith("int") else MAX_DURATION_S
    flags = {name: value}
    if name == "max_admin_rpcs":  # admin RPCs are admitted among max_concurrent_rpcs
        flags["max_concurrent_rpcs"] = MAX_COUNT
    assert getattr(load_settings(flags, None, {})[0], name) == value


@pytest.mark.parametrize(
    "args",
    [
        ("--max-message-bytes", "2147483648"),
        ("--drain-delay-s", "1e300"),
        ("--evict-interval-s", "1e300"),
    ],
)
def test_serve_with_a_too_large_setting_exits_2_without_a_traceback(args):
    served = subprocess.run(
        [sys.executable, "-m", "workplace_env.cli", "serve", "--address", "127.0.0.1:0", *args],
        capture_output=True,
        text=True,
        timeout=HANG_S,
    )
    assert served.returncode == 2, served.stderr
    assert "configuration error:" in served.stderr and "Traceback" not in served.stderr


def test_an_unknown_workplace_env_variable_is_warned_about_with_the_closest_setting():
    """A typo such as WORKPLACE_ENV_ADMIN_TOKN is warned about, naming the closest setting
    (ignored silently, the server would run without its admin token; an unknown file key is
    refused); the tests' and tools' variables are not."""
    environ = {
        "WORKPLACE_ENV_ADMIN_TOKN": "t",
        "WORKPLACE_ENV_MAX_SESSIONS": "5",
        "WORKPLACE_ENV_SHARED": "/data",
        "WORKPLACE_ENV_NEMO_VENV": "/venv",
        "WORKPLACE_ENV_DATA_FROM": "nemo-gym",
        "WORKPLACE_ENV_CONFIG": "",
        "WORKPLACE_ENV_QQQ": "1",
        "OTHER_ADMIN_TOKN": "t",
    }
    assert unknown_env_vars(environ) == [
        "WORKPLACE_ENV_ADMIN_TOKN is not a setting and is ignored; "
        "did you mean WORKPLACE_ENV_ADMIN_TOKEN?",
        "WORKPLACE_ENV_QQQ is not a setting and is ignored",
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith("WORKPLACE_ENV_")}
    shown = subprocess.run(
        [sys.executable, "-m", "workplace_env.cli", "config"],
        capture_output=True,
        text=True,
        timeout=HANG_S,
        env={**env, "WORKPLACE_ENV_ADMIN_TOKN": "t", "WORKPLACE_ENV_NEMO_VENV": "/venv"},
    )
    assert shown.returncode == 0, shown.stderr
    warnings = [line for line in shown.stderr.splitlines() if "warning:" in line]
    assert warnings == [
        "warning: WORKPLACE_ENV_ADMIN_TOKN is not a setting and is ignored; "
        "did you mean WORKPLACE_ENV_ADMIN_TOKEN?"
    ]


@pytest.mark.parametrize(
    "args",
    [
        ["config"],
        ["generate-tasks", "--count", "0"],
        ["checkpoint", "save", "{tmp}/out", "--tls-ca", "{tmp}/missing.pem"],
    ],
    ids=["config", "generate-tasks", "checkpoint-save"],
)
def test_every_command_warns_once_about_an_unknown_variable(args, tmp_path):
    """A command reading no settings warns too, and one that reads them warns once."""
    result = CliRunner().invoke(
        app,
        [a.format(tmp=tmp_path) for a in args],
        env={"COLUMNS": "200", "WORKPLACE_ENV_MAX_SESSION": "5"},
    )
    assert "Traceback" not in result.output, result.output
    assert result.output.count("WORKPLACE_ENV_MAX_SESSION is not a setting") == 1, result.output
    assert "did you mean WORKPLACE_ENV_MAX_SESSIONS?" in result.output


# -- each setting declared once ------------------------------------------------------


def test_every_number_setting_has_a_range_and_every_duration_ends_at_the_duration_bound():
    numbers = {f.name for f in dataclasses.fields(Settings) if str(f.type) in ("int", "float")}
    assert set(RANGES) == numbers
    for name, (_, _, high) in RANGES.items():
        duration = name.endswith(("_s", "_seconds"))
        assert high == (MAX_DURATION_S if duration else MAX_COUNT), name


def _options(command: Any) -> dict[str, Any]:
    """A click command's options by name."""
    return {str(p.name): p for p in command.params if p.param_type_name == "option"}


def test_each_command_has_an_option_for_each_setting_naming_it_and_no_other():
    commands = typer.main.get_command(app).commands  # type: ignore[attr-defined]
    taking = {
        "serve": commands["serve"],
        "gateway": commands["gateway"],
        "run": commands["run"],
        "checkpoint": commands["checkpoint"].commands["save"],
    }
    taking["checkpoint-restore"] = commands["checkpoint"].commands["restore"]
    for command, cli in taking.items():
        named = {n for n, spec in SPECS.items() if command.split("-")[0] in spec.commands}
        # options of the same name that are the command's own: the gateway's HTTP address,
        # the sandbox of run's in-process server
        own = {"gateway": {"address"}, "run": {"data_dir"}}.get(command, set())
        assert set(_options(cli)) & set(SPECS) - own == named, command
    serve = _options(taking["serve"])
    # the help shows the default it is given, here the store's own bound
    assert f"[{SessionConfig().max_sessions:,}]" in str(serve["max_sessions"].help)
    assert serve["admin_open"].opts == ["--admin-open"]
    assert serve["admin_open"].secondary_opts == ["--no-admin-open"]
    result = CliRunner().invoke(app, ["serve", "--max-sessions", "0", "--print-config"])
    assert result.exit_code == 2
    assert "max_sessions (from --max-sessions) must be >= 1, got 0" in result.output


def test_the_store_and_the_gateway_take_their_settings_from_the_server_settings():
    settings = Settings(
        max_sessions=7,
        verify_cache_mb=1.5,
        session_close_retry_window_seconds=9.0,
        max_verify_calls=0,
        mcp_path="",
        http_max_connections=0,
        cookie_secret=None,
    )
    bounds = settings.session_config()
    assert (bounds.max_sessions, bounds.retry_window_s) == (7, 9.0)
    assert bounds.verify_cache_bytes == int(1.5 * 2**20)
    assert Settings().session_config() == SessionConfig()
    gateway = GatewaySettings.of(settings)
    assert (gateway.max_verify_calls, gateway.mcp_path, gateway.max_connections) == (0, "", 0)
    assert gateway.secret_key  # random per process when unset
    assert GatewaySettings.of(dataclasses.replace(settings, cookie_secret="k")).secret_key == "k"
    with pytest.raises(ValueError, match=r"header_timeout_s \(the setting http_header_timeout_s\)"):
        GatewaySettings(header_timeout_s=0)


# -- TLS files checked before binding -----------------------------------------


def _tls_cases(d):
    """(flags, setting named, what the message says) for each way a TLS file can be wrong."""
    junk = d / "junk.pem"
    junk.write_bytes(b"-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n")
    cert, key = str(d / "server_cert.pem"), str(d / "server_key.pem")
    other_key = str(d / "client_key.pem")
    return [
        ({"tls_cert": cert, "tls_key": other_key}, "tls_key", "does not match the certificate"),
        ({"tls_cert": str(junk), "tls_key": key}, "tls_cert", "not a PEM certificate"),
        ({"tls_cert": key, "tls_key": key}, "tls_cert", "not a PEM certificate"),
        ({"tls_cert": cert, "tls_key": str(junk)}, "tls_key", "not a PEM private key"),
        ({"tls_cert": cert, "tls_key": str(d / "absent.pem")}, "tls_key", "cannot read"),
        (
            {"tls_cert": cert, "tls_key": key, "tls_client_ca": str(junk)},
            "tls_client_ca",
            "not a PEM certificate",
        ),
        ({"tls_ca": str(junk)}, "tls_ca", "not a PEM certificate"),
        (
            {"tls_ca": str(d / "ca.pem"), "tls_client_cert": cert, "tls_client_key": other_key},
            "tls_client_key",
            "does not match the certificate",
        ),
    ]


def test_a_tls_file_that_cannot_serve_is_named_before_anything_binds(pki):
    for flags, name, needle in _tls_cases(pki["dir"]):
        with pytest.raises(ConfigError) as err:
            load_settings(flags, None, {})
        message = str(err.value)
        flag = f"--{name.replace('_', '-')}"
        assert message.startswith(f"{name} (from {flag}) {flags[name]}: "), message
        assert needle in message, message
    good = {
        "tls_cert": str(pki["dir"] / "server_cert.pem"),
        "tls_key": str(pki["dir"] / "server_key.pem"),
    }
    assert load_settings(good, None, {})[0].tls_key == good["tls_key"]


def test_serve_with_a_mismatched_tls_key_says_so_and_exits_2(pki):
    d = pki["dir"]
    served = subprocess.run(
        [
            sys.executable, "-m", "workplace_env.cli", "serve", "--address", "127.0.0.1:0",
            "--tls-cert", str(d / "server_cert.pem"), "--tls-key", str(d / "client_key.pem"),
        ],
        capture_output=True,
        text=True,
        timeout=HANG_S,
    )  # fmt: skip
    assert served.returncode == 2, served.stderr
    text = " ".join(served.stderr.split())
    assert "configuration error: tls_key" in text and "does not match the certificate" in text
    assert "Failed to bind" not in text


# -- blank text settings -------------------------------------------------------

#: Every text setting but mcp_path (where "" turns MCP off): a blank one is refused.
_TEXT_SETTINGS = sorted(
    f.name
    for f in dataclasses.fields(Settings)
    if str(f.type).startswith("str") and not SPECS[f.name].may_be_empty
)


@pytest.mark.parametrize("blank", ["", "  "])
@pytest.mark.parametrize("source", ["flag", "env", "file"])
@pytest.mark.parametrize("name", _TEXT_SETTINGS)
def test_a_blank_text_setting_is_refused_from_every_source(tmp_path, name, source, blank):
    """WORKPLACE_ENV_COOKIE_SECRET= showed as set in ``config`` while the key was random."""
    path = tmp_path / "c.toml"
    path.write_text(f'{name} = "{blank}"\n' if source == "file" else "")
    flags = {name: blank} if source == "flag" else {}
    environ = {f"WORKPLACE_ENV_{name.upper()}": blank} if source == "env" else {}
    with pytest.raises(ConfigError) as err:
        load_settings(flags, path, environ)
    where = {
        "flag": f"--{name.replace('_', '-')}",
        "env": f"WORKPLACE_ENV_{name.upper()}",
        "file": f"file {path}",
    }
    said = str(err.value)
    assert f"{name} (from {where[source]}): {'empty' if blank == '' else 'blank'} value" in said
    # the way back is the one of the source the value came from, and only that one
    ways = {"flag": "omit the flag", "env": "unset it", "file": "remove the line"}
    assert [way for way in ways.values() if way in said] == [ways[source]], said


def test_an_empty_mcp_path_is_a_value_turning_mcp_off():
    settings, sources = load_settings({}, None, {"WORKPLACE_ENV_MCP_PATH": ""})
    assert (settings.mcp_path, sources["mcp_path"]) == ("", "env")


@pytest.mark.parametrize("command", ["save", "restore"])
def test_checkpoint_refuses_a_blank_token_flag(tmp_path, command):
    """``--token ""`` fell back to WORKPLACE_ENV_ADMIN_TOKEN as if not given."""
    result = CliRunner().invoke(
        app, ["checkpoint", command, str(tmp_path), "--token", ""], env={"COLUMNS": "200"}
    )
    assert result.exit_code == 2, result.output
    assert "'--token'" in result.output and "omit the flag" in result.output
    assert "unset it" not in result.output


def test_config_refuses_an_empty_cookie_secret_naming_its_variable():
    result = CliRunner().invoke(app, ["config"], env={"WORKPLACE_ENV_COOKIE_SECRET": ""})
    assert result.exit_code == 2, result.output
    assert "WORKPLACE_ENV_COOKIE_SECRET" in result.output and "unset it" in result.output


# -- the admin token -----------------------------------------------------------


@pytest.mark.parametrize(
    ("token", "needle"),
    [
        (" ", "blank value"),
        ("", "empty value"),
        ("\t\n", "blank value"),
        (" padded-admin-token-0123", "whitespace"),
        ("padded-admin-token-0123 ", "whitespace"),
        ("tök-admin-token-0123456", "printable ASCII"),
    ],
)
@pytest.mark.parametrize("source", ["flag", "env", "file"])
def test_an_admin_token_that_cannot_be_sent_is_refused_from_every_source(
    tmp_path, token, needle, source
):
    """WORKPLACE_ENV_ADMIN_TOKEN=' ' granted admin to ``authorization: Bearer  ``."""
    path = tmp_path / "c.toml"
    path.write_text(f"admin_token = {token!r}\n".replace("'", '"') if source == "file" else "")
    flags = {"admin_token": token} if source == "flag" else {}
    environ = {"WORKPLACE_ENV_ADMIN_TOKEN": token} if source == "env" else {}
    with pytest.raises(ConfigError) as err:
        load_settings(flags, path, environ)
    where = {"flag": "--admin-token", "env": "WORKPLACE_ENV_ADMIN_TOKEN", "file": f"file {path}"}
    assert str(err.value).startswith(f"admin_token (from {where[source]})")
    assert needle in str(err.value)


def test_a_blank_admin_token_in_code_is_refused_by_the_guard():
    from workplace_env.server.admin import AdminToken

    with pytest.raises(ValueError, match=r"blank value.* pass None"):
        AdminToken("   ")


def test_a_short_admin_token_is_warned_about_and_a_long_one_is_not():
    short, _ = load_settings({"admin_token": "s3cret"}, None, {})
    [line] = setting_warnings(short)
    assert "admin_token has 6 characters, fewer than 16" in line
    assert setting_warnings(load_settings({"admin_token": "a" * 16}, None, {})[0]) == []
    assert setting_warnings(load_settings({}, None, {})[0]) == []  # off: nothing to warn about


@pytest.mark.parametrize(
    ("args", "warned"),
    [
        (["checkpoint", "save", "TMP/ck", "--token", "s3cret", "--timeout-s", "1"], False),
        (["checkpoint", "restore", "TMP", "--token", "s3cret", "--timeout-s", "1"], False),
        (["run", "TMP/tasks.jsonl", "--target", "127.0.0.1:1", "--token", "s3cret"], False),
        (["config"], True),
        (["serve", "--print-config"], True),
    ],
    ids=["checkpoint-save", "checkpoint-restore", "run-target", "config", "serve"],
)
def test_the_short_admin_token_warning_is_for_the_commands_that_serve_it(tmp_path, args, warned):
    """A client command sends ``$WORKPLACE_ENV_ADMIN_TOKEN`` (or ``--token``) to a server and
    serves none: the server-side warning about its length is not its own."""
    (tmp_path / "tasks.jsonl").write_text('{"id": "t", "ground_truth": []}\n')
    typed = [a.replace("TMP", str(tmp_path)) for a in args]
    env = {"WORKPLACE_ENV_ADMIN_TOKEN": "s3cret", "COLUMNS": "200"}
    result = CliRunner().invoke(app, typed, env=env)
    said = " ".join(result.output.split())
    assert ("admin_token has 6 characters" in said) == warned, said
    assert "Traceback" not in said


# -- config loading gaps ------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    ["address: 127.0.0.1:1\naddress: 127.0.0.1:2\n", "server:\n  workers: 3\n  workers: 4\n"],
)
def test_a_yaml_key_given_twice_is_refused_naming_it(tmp_path, text):
    """PyYAML kept the last value silently; TOML refuses a repeated key, and so does YAML now."""
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=r"duplicate key '(address|workers)'"):
        load_settings({}, path, {})


@pytest.mark.parametrize("spelling", ["3.0", "1e3", "3.5"])
def test_an_integer_setting_refuses_a_float_in_every_spelling_and_source(tmp_path, spelling):
    """``workers: 3.0`` (a YAML float) was accepted as 3 and ``3.5`` truncated, while ``1e3``
    (a YAML string) was refused: an integer setting takes an integer from every source."""
    for suffix in (".yaml", ".toml"):
        path = tmp_path / f"c{suffix}"
        path.write_text(
            f"workers: {spelling}\n" if suffix == ".yaml" else f"workers = {spelling}\n"
        )
        with pytest.raises(ConfigError, match=r"workers .* is not an integer"):
            load_settings({}, path, {})
    with pytest.raises(ConfigError, match=r"workers .* is not an integer"):
        load_settings({}, None, {"WORKPLACE_ENV_WORKERS": spelling})
    with pytest.raises(ConfigError, match=r"workers .* is not an integer"):
        load_settings({"workers": spelling}, None, {})
    assert load_settings({}, None, {"WORKPLACE_ENV_WORKERS": "3"})[0].workers == 3


def test_max_admin_rpcs_over_max_concurrent_rpcs_is_refused_when_set():
    refused = r"max_admin_rpcs \(from --max-admin-rpcs\) 100 is more than"
    with pytest.raises(ConfigError, match=refused):
        load_settings({"max_admin_rpcs": 100, "max_concurrent_rpcs": 1}, None, {})
    # the default admin bound (16) is simply capped by a smaller total
    assert load_settings({"max_concurrent_rpcs": 1}, None, {})[0].max_admin_rpcs == 16
    assert load_settings({"max_admin_rpcs": 4, "max_concurrent_rpcs": 4}, None, {})[0]


# -- each command reads and checks only the settings it uses --------------------------------------


def _refused_value(name: str) -> str:
    """A value of setting ``name`` that every command using it refuses."""
    kind = str(_FIELDS_BY_NAME[name].type).split()[0]
    return {"int": "x", "float": "x", "bool": "maybe"}.get(kind, "x" if name == "mcp_path" else " ")


_FIELDS_BY_NAME = {f.name: f for f in dataclasses.fields(Settings)}


@pytest.mark.parametrize("command", COMMANDS)
def test_a_setting_the_command_does_not_use_is_warned_about_and_never_checked(command):
    """A shell set up for the client starts a server, and the reverse: each setting the
    command does not use, even a value refused where it is used, is left at its default and
    warned about once, naming its source."""
    unused = sorted(set(SPECS) - used_by(command))
    assert unused
    for name in unused:
        variable = f"WORKPLACE_ENV_{name.upper()}"
        environ = {variable: _refused_value(name)}
        with pytest.raises(ConfigError, match=variable):
            load_settings({}, None, environ)  # the value is refused where it is used
        warned: list[str] = []
        settings, sources = load_settings({}, None, environ, command=command, warn=warned.append)
        assert getattr(settings, name) == _FIELDS_BY_NAME[name].default, name
        assert sources[name] == "default"
        assert warned == [f"{name} (from {variable}) is not used by {command} and is ignored"]
    for name in used_by(command):  # and each one it uses is checked, the gateway's log level too
        variable = f"WORKPLACE_ENV_{name.upper()}"
        with pytest.raises(ConfigError, match=variable):
            load_settings({}, None, {variable: _refused_value(name)}, command=command)


def test_the_reported_client_settings_start_a_server():
    env = {k: v for k, v in os.environ.items() if not k.startswith("WORKPLACE_ENV_")}
    for given in (
        {"WORKPLACE_ENV_TLS_CLIENT_CERT": "/tmp/ca.pem"},
        {"WORKPLACE_ENV_TLS_CA": "/bad"},
    ):
        shown = subprocess.run(
            [sys.executable, "-m", "workplace_env.cli", "serve", "--print-config"],
            capture_output=True,
            text=True,
            timeout=HANG_S,
            env={**env, **given},
        )
        assert shown.returncode == 0, shown.stderr
        [(variable, _)] = given.items()
        name = variable.removeprefix("WORKPLACE_ENV_").lower()
        assert f"{name} (from {variable}) is not used by serve" in shown.stderr


def test_a_tls_pair_with_one_half_names_the_half_given_and_its_source():
    with pytest.raises(ConfigError) as err:
        load_settings(
            {}, None, {"WORKPLACE_ENV_TLS_CLIENT_CERT": "/tmp/ca.pem"}, command="checkpoint"
        )
    assert str(err.value).startswith(
        "tls_client_cert (from WORKPLACE_ENV_TLS_CLIENT_CERT) needs tls_client_key "
        "(--tls-client-key)"
    )


@pytest.mark.parametrize("given", ["env", "file"])
def test_run_warns_once_about_a_server_setting_its_in_process_server_does_not_take(tmp_path, given):
    """``max_sessions = 1`` given to ``run`` is not applied by its in-process server: said,
    once, naming where it came from."""
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("")
    config = tmp_path / "server.toml"
    config.write_text("max_sessions = 1\n")
    args, env = ["run", str(tasks)], {"COLUMNS": "300"}
    if given == "file":
        args += ["--config", str(config)]
    else:
        env["WORKPLACE_ENV_MAX_SESSIONS"] = "1"
    result = CliRunner().invoke(app, args, env=env)
    source = f"file {config}" if given == "file" else "WORKPLACE_ENV_MAX_SESSIONS"
    line = f"max_sessions (from {source}) is not used by run without --target and is ignored"
    assert " ".join(result.output.split()).count(line) == 1, result.output


@pytest.mark.parametrize("command", ["save", "restore"])
def test_checkpoint_sends_the_admin_token_of_its_config_file(tmp_path, monkeypatch, command):
    """A --config file's admin_token is the token ``checkpoint`` sends (``--token`` wins)."""
    import workplace_env.cli as cli

    sent: list[str | None] = []
    monkeypatch.setattr(
        cli, f"{command}_checkpoint", lambda _dir, _target, token, *_: sent.append(token) or 0
    )
    config = tmp_path / "server.toml"
    config.write_text('admin_token = "from-the-file-0123456789"\n')
    directory = tmp_path / "ck"
    if command == "restore":
        directory.mkdir()
    env = {k: "" for k in os.environ if k.startswith("WORKPLACE_ENV_")}
    for extra in ([], ["--token", "from-the-flag-0123456789"]):
        result = CliRunner().invoke(
            app, ["checkpoint", command, str(directory), "--config", str(config), *extra], env=env
        )
        assert result.exit_code == 0, result.output
    assert sent == ["from-the-file-0123456789", "from-the-flag-0123456789"]


def test_a_bad_admin_token_in_a_checkpoint_config_file_names_the_file(tmp_path):
    config = tmp_path / "server.toml"
    config.write_text('admin_token = " padded "\n')
    result = CliRunner().invoke(
        app, ["checkpoint", "save", str(tmp_path / "ck"), "--config", str(config)]
    )
    assert result.exit_code == 2
    assert f"admin_token (from file {config}) begins or ends with whitespace" in " ".join(
        result.output.split()
    )


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("wrkers = 3\n", "unknown settings 'wrkers' (did you mean workers?)"),
        ("[sever]\nworkers = 3\n", "unknown settings 'sever' (did you mean server?)"),
        ("[server]\nwrkers = 3\n", "unknown [server] settings 'wrkers' (did you mean workers?)"),
        ("qqq = 3\n", "unknown settings 'qqq'"),
    ],
)
def test_an_unknown_config_file_key_names_the_closest_one(tmp_path, text, said):
    path = tmp_path / "server.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_settings({}, path, {})
    assert str(err.value) == f"config file {path}: {said}"


def test_many_or_huge_unknown_config_file_keys_are_named_within_bounds(tmp_path):
    path = tmp_path / "server.toml"
    path.write_text("a" * 300_000 + " = 1\n" + "".join(f"k{i} = 1\n" for i in range(5_000)))
    with pytest.raises(ConfigError) as err:
        load_settings({}, path, {})
    said = str(err.value)
    assert len(said) < 1_000 and "...(300000 characters)..." in said
    assert said.endswith("and 4,996 more")


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["serve", "--workers", "abc"], "'abc' is not an integer"),
        (["serve", "--workers", "1e3"], "'1e3' is not an integer"),
        (["serve", "--workers", "\u0663"], "'\u0663' is not an integer"),  # Arabic-Indic 3
        (["serve", "--grace-s", "\u0661.5"], "'\u0661.5' is not a number"),
        (["serve", "--grace-s", "soon"], "'soon' is not a number"),
        (["serve", "--idle-ttl-s", "inf"], "'inf' is not a finite number"),
        (["gateway", "--max-verify-calls", "3.0"], "'3.0' is not an integer"),
    ],
)
def test_a_number_option_that_is_no_number_echoes_the_value(args, said):
    result = CliRunner().invoke(app, [*args, "--print-config"] if args[0] == "serve" else args)
    assert result.exit_code == 2
    assert said in result.output and f"'{args[1]}'" in result.output


def test_admin_open_beside_admin_token_is_said_to_have_no_effect():
    settings, _ = load_settings({"admin_open": True, "admin_token": "t" * 32}, None, {})
    [line] = setting_warnings(settings, "serve")
    assert line.startswith("admin_open has no effect beside admin_token")
    result = CliRunner().invoke(
        app, ["serve", "--admin-open", "--admin-token", "t" * 32, "--print-config"]
    )
    assert result.exit_code == 0 and "admin_open has no effect" in result.output


def test_every_workplace_env_variable_the_repo_reads_is_a_setting_or_a_known_other():
    """The scripts, docs and deploy files read no WORKPLACE_ENV_* variable the CLI would warn
    is 'not a setting' (the tests' typos are not looked at)."""
    seen = set()
    for folder in ("docs", "deploy", "bench", "e2e", "service", "client", "resources_servers"):
        for path in (REPO / folder).rglob("*"):
            if path.is_file() and path.suffix in (".py", ".sh", ".md", ".yaml", ".yml", ".toml"):
                seen |= set(re.findall(r"WORKPLACE_ENV_[A-Z][A-Z_]*[A-Z]", path.read_text()))
    assert "WORKPLACE_ENV_ROOT" in seen
    typo = "WORKPLACE_ENV_ADMIN_TOKN"  # unknown_env_vars's own example of a typo
    assert unknown_env_vars(dict.fromkeys(seen - {typo}, "1")) == []
