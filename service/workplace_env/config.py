"""Server settings: flags over environment over a config file over defaults.

Every setting is one field of :class:`Settings`, declared with :func:`setting`: its default,
help, range, secret-ness and the commands taking it as an option. From that declaration come
the range checks (:data:`RANGES`), :data:`SECRETS`, the commands' options
(:mod:`workplace_env.setting_options`), the store's :class:`SessionConfig`
(:meth:`Settings.session_config`), the gateway's ``GatewaySettings.of`` and the configuration
reference (docs/gen.py). A setting can be given, from strongest to weakest:

1. a command-line flag (``--max-sessions 1000``);
2. an environment variable ``WORKPLACE_ENV_<NAME>`` (``WORKPLACE_ENV_MAX_SESSIONS=1000``);
3. a TOML or YAML file (``--config FILE`` or ``WORKPLACE_ENV_CONFIG``), top level or under a
   ``[server]`` table, keys as the field names (``max_sessions = 1000``); a file that sets
   settings both at its top level and under ``[server]`` is refused (which would win is a guess);
4. the default below.

A command reads and checks only the settings it uses (:func:`used_by`); one given to it that
it does not use is warned about and left at its default. ``workplace-env config`` prints the
effective settings and where each came from. Secrets (``cookie_secret``, ``admin_token``) are
printed masked.
"""

from __future__ import annotations

import dataclasses
import math
import os
import tomllib
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import grpc

from workplace_env.errors import clip_inline, closest
from workplace_env.sandbox.source import NEMO_VENV_ENV, SOURCE_ENV, missing_csvs
from workplace_env.server.guard import MAX_HEALTH_STREAMS
from workplace_env.sessions import SessionConfig
from workplace_env.terminal import blank_problem, path_problem
from workplace_env_client import tls_credentials

ENV_PREFIX = "WORKPLACE_ENV_"
#: The admin token the client commands (``run --target``, ``checkpoint``) send when no
#: ``--token`` is given (the same variable as the server's ``admin_token`` setting).
ADMIN_TOKEN_ENV = f"{ENV_PREFIX}ADMIN_TOKEN"
#: ``WORKPLACE_ENV_*`` variables that are not settings: the config file, and those of the tests
#: and tools (reference data, the NeMo Gym and verifiers venvs, fuzzing and differential runs),
#: ``data fetch``'s source and the checkout the NeMo launcher example runs from.
OTHER_ENV_VARS = frozenset(
    {
        *(
            f"{ENV_PREFIX}{name}"
            for name in (
                "CONFIG",
                "SHARED",
                "TEST_DATA_DIR",
                "FUZZ_REPORT",
                "FUZZ_EXAMPLES",
                "DIFF_SEQUENCES",
                "VERIFIERS_VENV",
                "ROOT",
            )
        ),
        NEMO_VENV_ENV,
        SOURCE_ENV,
    }
)


class ConfigError(ValueError):
    """A setting that cannot be read: names the setting and where it came from."""


#: The largest duration a setting may take, in seconds (about 31.7 years: "never" for any
#: TTL or delay, and well inside what the runtime's timers take, ``threading.TIMEOUT_MAX`` and
#: ``time.sleep``, even added to a clock reading).
MAX_DURATION_S = 1e9
#: The largest size or count a setting may take: a C int, as gRPC's channel options and the
#: thread pools take them.
MAX_COUNT = 2**31 - 1
#: The commands taking settings as options (:mod:`workplace_env.setting_options` makes them).
COMMANDS = ("serve", "gateway", "run", "checkpoint")


class _Shown:
    """A default as a setting's help shows it: ``{default:MiB}`` is bytes in MiB (``64
    MiB``), any other format spec is Python's (``{default:,}``: 50,000, ``{default:g}``:
    3600)."""

    def __init__(self, value: object) -> None:
        self.value = value

    def __format__(self, spec: str) -> str:
        if spec == "MiB":
            return f"{self.value / 2**20:g} MiB"  # type: ignore[operator]
        return format(self.value, spec)


@dataclass(frozen=True)
class SettingSpec:
    """What one :class:`Settings` field declares besides its type and default.

    ``help``: its option's help, ``{default}`` replaced by the default (:class:`_Shown`);
    ``help_in``: another help for some commands. ``low``/``strict``/``high``: its range (at
    least ``low``, above it when ``strict``, at most ``high``; numbers only). ``secret``:
    printed masked. ``commands``: the commands of :data:`COMMANDS` taking it as an option.
    ``read_by``: other commands using it, from the environment or the config file only (the
    gateway's log level; the admin token ``run`` and ``checkpoint`` send, their ``--token``
    winning).
    ``session`` / ``gateway``: the field of :class:`SessionConfig` / ``GatewaySettings`` it
    sets (``session_unit``: that field's units in one of the setting's, e.g. bytes in a MiB).
    ``may_be_empty``: a text setting for which ``""`` is a value (else a blank one is refused:
    unset, it takes its default)."""

    help: str
    low: float | None = None
    strict: bool = False
    high: float | None = None
    secret: bool = False
    commands: tuple[str, ...] = ("serve",)
    help_in: Mapping[str, str] = dataclasses.field(default_factory=dict)
    session: str | None = None
    session_unit: int = 1
    gateway: str | None = None
    may_be_empty: bool = False
    read_by: tuple[str, ...] = ()

    def help_for(self, command: str, default: object) -> str:
        """The help of this setting's option in ``command``."""
        return self.help_in.get(command, self.help).format(default=_Shown(default))


def setting(
    default: Any,
    help: str,
    *,
    at_least: float | None = None,
    above: float | None = None,
    at_most: float | None = None,
    secret: bool = False,
    commands: tuple[str, ...] = ("serve",),
    help_in: Mapping[str, str] | None = None,
    session: str | None = None,
    session_unit: int = 1,
    gateway: str | None = None,
    may_be_empty: bool = False,
    read_by: tuple[str, ...] = (),
) -> Any:
    """A :class:`Settings` field: its ``default`` and its :class:`SettingSpec` (``at_least``
    or ``above`` with ``at_most``: the range of a number; ``at_most`` defaults to
    :data:`MAX_DURATION_S` for a duration, a name ending in ``_s`` or ``_seconds``, else to
    :data:`MAX_COUNT`)."""
    unknown = set(commands + read_by) - set(COMMANDS)
    if unknown:
        raise ValueError(f"not commands taking settings: {sorted(unknown)}")
    spec = SettingSpec(
        help=help,
        low=above if above is not None else at_least,
        strict=above is not None,
        high=at_most,
        secret=secret,
        commands=commands,
        help_in=dict(help_in or {}),
        session=session,
        session_unit=session_unit,
        gateway=gateway,
        may_be_empty=may_be_empty,
        read_by=read_by,
    )
    return dataclasses.field(default=default, metadata={"setting": spec})


def session_setting(name: str, help: str, *, unit: int = 1, **options: Any) -> Any:
    """A :func:`setting` of the store's bound :class:`SessionConfig` ``.name``, its default
    that bound's (in units of ``unit`` of it, e.g. ``2**20``: MiB of a bound in bytes)."""
    default = getattr(SessionConfig, name) / unit if unit != 1 else getattr(SessionConfig, name)
    return setting(default, help, session=name, session_unit=unit, **options)


#: The commands connecting to a server over TLS (``gateway``, ``run --target``, ``checkpoint``).
_CLIENTS = ("gateway", "run", "checkpoint")
_HTTP_MAX_CONNECTIONS_HELP = (
    "HTTP gateway: connections open at once, then 503 [{default}: (open-file limit - 256) "
    "// 2, also the most it may be]."
)


@dataclass(frozen=True)
class Settings:
    """Everything a server process can be configured with (units in the names); each field's
    help, range and commands are in its :class:`SettingSpec` (:func:`setting`)."""

    # Transport
    address: str = setting("127.0.0.1:50051", "HOST:PORT to listen on [{default}].")
    #: the co-hosted legacy HTTP gateway, off when unset
    http_address: str | None = setting(None, "Also serve the legacy HTTP gateway here.")
    #: Prometheus text on /metrics, off when unset
    metrics_address: str | None = setting(None, "Serve Prometheus /metrics here.")
    #: WorkBench CSVs, or a source fetched first; unset: the embedded generated sandbox
    data_dir: str | None = setting(
        None,
        "WorkBench CSV directory, or a source as for 'data fetch --from' (nemo-gym, a NeMo Gym "
        "venv, an archive or its URL), fetched and verified into the cache first; default: the "
        "embedded generated sandbox (seed 0).",
    )
    #: RPC worker threads (more only add GIL contention: docs/benchmarks.md)
    workers: int = setting(4, "RPCs running at once [{default}].", at_least=1)
    #: RPCs admitted at once (X3); beyond: RESOURCE_EXHAUSTED
    max_concurrent_rpcs: int = setting(
        256, "RPCs admitted at once, then RESOURCE_EXHAUSTED [{default}].", at_least=1
    )
    #: of them admin RPCs (export/restore streams hold theirs)
    max_admin_rpcs: int = setting(16, "Admin RPCs admitted at once [{default}].", at_least=1)
    #: Health Watch and reflection streams open at once (Health/Check is never limited)
    max_health_streams: int = setting(
        MAX_HEALTH_STREAMS,
        "Health Watch and reflection streams open at once [{default}].",
        at_least=1,
    )
    #: drain time for in-flight calls on shutdown
    grace_s: float = setting(
        5.0,
        "Seconds in-flight calls get on shutdown [{default:g}].",
        at_least=0,
        read_by=("gateway",),
    )
    #: On SIGTERM, seconds of X2 (NOT_SERVING, seeds refused, all else served) before
    #: stopping: long enough for a proxy's health checks to take the replica out.
    drain_delay_s: float = setting(
        0.0,
        "On SIGTERM, seconds to keep serving while health says NOT_SERVING and /ready 503, "
        "before the listeners close [{default:g}]. 0: they close as soon as in-flight calls "
        "finish, so no client sees the 503 (right when clients connect directly). Behind a "
        "load balancer, set it above the balancer's time to notice (HAProxy recipe: 1; "
        "Kubernetes: the readiness probe's period x failure threshold).",
        at_least=0,
    )
    max_message_bytes: int = setting(
        64 * 1024 * 1024, "Largest request/response [{default:MiB}].", at_least=1024
    )
    # Session bounds (docs/contract.md; see SessionConfig)
    max_sessions: int = session_setting(
        "max_sessions",
        "Live sessions before RESOURCE_EXHAUSTED [{default:,}].",
        at_least=1,
    )
    idle_ttl_s: float = session_setting(
        "idle_ttl_s",
        "Idle seconds before a session is evicted [{default:g}].",
        above=0,
    )
    evict_interval_s: float = setting(
        30.0,
        "Seconds between eviction sweeps [{default:g}].",
        at_least=0.01,
    )
    max_fences: int = session_setting(
        "max_fences",
        "Closed ids remembered at most [{default:,}].",
        at_least=1,
    )
    fence_ttl_s: float = session_setting(
        "fence_ttl_s",
        "Seconds a closed id is remembered [{default:g}].",
        above=0,
    )
    max_call_ids: int = session_setting(
        "max_call_ids",
        "call_id records kept per session [{default}].",
        at_least=1,
    )
    session_close_retry_window_seconds: float = session_setting(
        "retry_window_s",
        "Seconds a verified legacy session's reward is remembered [{default:g}].",
        at_least=0,
    )
    max_markers: int = session_setting(
        "max_markers",
        "Verified legacy ids remembered at most [{default:,}].",
        at_least=1,
    )
    #: the verifier's memo, estimated MiB
    verify_cache_mb: float = session_setting(
        "verify_cache_bytes",
        "MiB (estimated) of verified end states memoised [{default:g}]; 0: none.",
        unit=2**20,
        at_least=0,
    )
    #: Calls a verify replays per side at most (0: no bound, as the reference); beyond it
    #: INVALID_ARGUMENT. Bounds the CPU one request can take (replay cost grows ~ count
    #: squared).
    max_verify_calls: int = setting(
        2_000,
        "Calls a verify replays per side at most [{default:,}]; 0: no bound.",
        at_least=0,
        commands=("serve", "gateway"),
        help_in={"gateway": "Calls a /verify body may carry per side [{default:,}]; 0: no bound."},
        gateway="max_verify_calls",
    )
    #: Entries of a verify's Responses-API output at most (0: no bound, as the reference): its
    #: items, each part of a message's content and of a reasoning summary counting as one
    #: more; beyond it INVALID_ARGUMENT (HTTP 422) before any item is looked at. Bounds the
    #: work one untrusted body can cause; real rollouts have at most ~10 items.
    max_verify_output_items: int = setting(
        10_000,
        "Entries of a verify's response output at most [{default:,}] (items; each part of a "
        "message's content or a reasoning summary counts as one); 0: no bound.",
        at_least=0,
        commands=("serve", "gateway"),
        gateway="max_verify_output_items",
    )
    #: UTF-8 bytes of arguments text one session's write-tool calls may add (0: no bound); a
    #: call beyond it is RESOURCE_EXHAUSTED SESSION_TOO_LARGE. Bounds the memory one runaway
    #: rollout can take; real tasks write at most ~25 KB (docs/benchmarks.md).
    max_session_write_bytes: int = session_setting(
        "max_session_write_bytes",
        "Bytes of write-call arguments one session may add [{default:MiB}]; 0: no bound.",
        at_least=0,
    )
    # Security
    #: PEM server certificate chain; TLS when set with tls_key
    tls_cert: str | None = setting(None, "PEM certificate chain: serve TLS.")
    tls_key: str | None = setting(None, "PEM private key of --tls-cert.")
    #: PEM CA bundle; when set, clients must present a certificate
    tls_client_ca: str | None = setting(None, "PEM CA: require client certificates (mTLS).")
    #: bearer token of the admin RPCs (checkpoint, restore, retire)
    admin_token: str | None = setting(
        None,
        "Bearer token of the admin RPCs; without one they are off.",
        secret=True,
        read_by=("run", "checkpoint"),
    )
    #: admin RPCs without a token (loopback addresses only); else off
    admin_open: bool = setting(False, "Admin RPCs without a token (loopback only).")
    #: the HTTP gateway's cookie signing key; unset: random per process
    cookie_secret: str | None = setting(
        None,
        "HTTP gateway cookie signing key.",
        secret=True,
        commands=("serve", "gateway"),
        help_in={"gateway": "Cookie signing key [random per process]."},
        gateway="secret_key",
    )
    #: HTTP gateway: where MCP (streamable HTTP) is served; "" turns MCP off (the legacy seed
    #: then answers {} and mcp__workplace_assistant__ names score as sent, as the reference's
    #: default)
    mcp_path: str = setting(
        "/mcp",
        "HTTP path of the gateway's MCP endpoint [{default}]; '' turns MCP off.",
        commands=("serve", "gateway"),
        gateway="mcp_path",
        may_be_empty=True,
    )
    #: HTTP gateway: seconds a request's headers may take to arrive (from the connection
    #: opening, or the previous response), then its body; beyond, 408 and the connection closes
    http_header_timeout_s: float = setting(
        10.0,
        "HTTP gateway: seconds a request's headers may take to arrive (from connecting, or the "
        "previous response), then 408 and the connection closes [{default:g}].",
        above=0,
        commands=("serve", "gateway"),
        gateway="header_timeout_s",
    )
    http_body_timeout_s: float = setting(
        60.0,
        "HTTP gateway: seconds a request's body may take once its headers are in [{default:g}].",
        above=0,
        commands=("serve", "gateway"),
        gateway="body_timeout_s",
    )
    #: HTTP gateway: connections open at once at most, beyond them 503 (0: derived from the
    #: open-file limit, RLIMIT_NOFILE, which also bounds a given one: gateway.limits)
    http_max_connections: int = setting(
        0,
        _HTTP_MAX_CONNECTIONS_HELP,
        at_least=0,
        commands=("serve", "gateway"),
        gateway="max_connections",
    )
    # Logging
    log_level: str = setting("INFO", "DEBUG logs every RPC [{default}].", read_by=("gateway",))
    # A command connecting to a server (the gateway, run --target, checkpoint): the CA bundle
    # it trusts (TLS when set; else plaintext), and its own certificate and key for a server
    # requiring them (mTLS)
    tls_ca: str | None = setting(
        None, "PEM CA bundle trusted for a TLS gRPC server: connect over TLS.", commands=_CLIENTS
    )
    tls_client_cert: str | None = setting(
        None, "PEM client certificate, for a server requiring one (mTLS).", commands=_CLIENTS
    )
    tls_client_key: str | None = setting(
        None, "PEM private key of --tls-client-cert.", commands=_CLIENTS
    )

    def session_config(self) -> SessionConfig:
        """The store's bounds from these settings (those whose spec names a ``session`` field)."""
        bounds = {}
        for name, spec in SPECS.items():
            if spec.session is not None:
                value = getattr(self, name)
                unit = spec.session_unit
                bounds[spec.session] = value if unit == 1 else int(value * unit)
        return SessionConfig(**bounds)


#: Each setting's :class:`SettingSpec`, in declaration order.
SPECS: dict[str, SettingSpec] = {f.name: f.metadata["setting"] for f in fields(Settings)}
SECRETS = frozenset(name for name, spec in SPECS.items() if spec.secret)


_FIELDS = {f.name: f for f in fields(Settings)}


def used_by(command: str) -> frozenset[str]:
    """The settings ``command`` (one of :data:`COMMANDS`) uses: those it takes as options and
    those it reads from the environment or config file only (:class:`SettingSpec`
    ``commands`` and ``read_by``)."""
    return frozenset(
        name for name, spec in SPECS.items() if command in spec.commands + spec.read_by
    )


#: What a value of each setting type must be, as a config error names it.
_EXPECTED = {
    "int": "an integer",
    "float": "a number",
    "bool": "a boolean (true/false, yes/no, on/off, 1/0)",
}


def origin(name: str, kind: str, config_file: str | Path | None = None) -> str:
    """Where setting ``name`` came from, as a user fixes it there: its flag (``--max-sessions``)
    for ``kind`` "flag", its variable (``WORKPLACE_ENV_MAX_SESSIONS``) for "env", ``file
    PATH`` for "file", ``default`` for "default"."""
    if kind == "flag":
        return f"--{name.replace('_', '-')}"
    if kind == "env":
        return f"{ENV_PREFIX}{name.upper()}"
    return f"file {config_file}" if kind == "file" else kind


#: How a user takes back a value, by where it came from (:func:`origin`'s ``kind``; "key": a
#: key of another program's config, as NeMo Gym's).
_TAKE_BACK = {
    "flag": "omit the flag",
    "env": "unset it",
    "file": "remove the line",
    "key": "remove the key",
}


def take_back(kind: str) -> str:
    """How to take back a value given as ``kind`` ("flag", "env", "file", "key"): ``omit the
    flag``, ``unset it``, ``remove the line``, ``remove the key``; else ``leave it out``."""
    return _TAKE_BACK.get(kind, "leave it out")


def parse_value(name: str, value: Any) -> Any:
    """``value`` as setting ``name``'s type (a string is parsed; an integer must be spelled as
    one, in ASCII digits: ``3.0``, ``1e3`` and ``'٣'`` are not; a number likewise). Raises
    ValueError saying what it is not, with the value (``'abc' is not an integer``)."""
    field_type = str(_FIELDS[name].type)
    try:
        if field_type.startswith("int"):
            # an integer spelled as one, from every source alike: 3.0 and 1e3 are refused
            # whether a file's float, an env string or a flag
            if isinstance(value, bool | float) or (isinstance(value, str) and not value.isascii()):
                raise ValueError("not an integer")
            return int(value)
        if field_type.startswith("bool"):
            if isinstance(value, bool):
                return value
            text = str(value).strip().lower()
            if text in ("1", "true", "yes", "on"):
                return True
            if text in ("0", "false", "no", "off", ""):
                return False
            raise ValueError("not a boolean")
        if field_type.startswith("float"):
            if isinstance(value, bool) or (isinstance(value, str) and not value.isascii()):
                raise ValueError("not a number")
            number = float(value)
    except (TypeError, ValueError) as exc:
        expected = _EXPECTED[field_type.split()[0]]
        raise ValueError(f"{value!r} is not {expected}") from exc
    if field_type.startswith("float"):
        if not math.isfinite(number):  # NaN passes every range check; inf never elapses
            raise ValueError(f"{value!r} is not a finite number")
        return number
    return str(value)


def _coerce(name: str, value: Any, kind: str, source: str) -> Any:
    """``value`` of setting ``name`` given as ``kind`` (:func:`origin`'s) at ``source`` (its
    :func:`origin`) as the setting's type (:func:`parse_value`). Raises ConfigError naming the
    setting and its source, and for a value with nothing in it, how to take it back there."""
    default = _FIELDS[name].default
    instead = "" if default is None else f" for the default {default!r}"
    if value is None:
        if "None" in str(_FIELDS[name].type):
            return None
        raise ConfigError(f"{name} (from {source}) cannot be empty: {take_back(kind)}{instead}")
    blank = blank_problem(value) if isinstance(value, str) else None
    if blank and not SPECS[name].may_be_empty:
        # a blank secret or path would show as set and act as unset (or as nothing): refused
        fix = f"give one, or {take_back(kind)}{instead}"
        raise ConfigError(f"{name} (from {source}): {blank}; {fix}")
    try:
        return parse_value(name, value)
    except ValueError as exc:
        raise ConfigError(f"{name} (from {source}): {exc}") from exc


def _load_yaml(text: str) -> Any:
    """YAML's safe subset, refusing a key given twice in one mapping (PyYAML keeps the last
    silently; TOML refuses it, so both formats agree)."""
    import yaml

    class UniqueKeys(yaml.SafeLoader):
        pass

    def mapping(loader: yaml.SafeLoader, node: yaml.MappingNode) -> dict[Any, Any]:
        seen = set()
        for key_node, _ in node.value:
            key = loader.construct_object(key_node)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r}", key_node.start_mark
                )
            seen.add(key)
        return loader.construct_mapping(node)

    UniqueKeys.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
    return yaml.load(text, Loader=UniqueKeys)  # a SafeLoader: no arbitrary objects


def read_file(path: str | Path, argument: str = "--config") -> dict[str, Any]:
    """The settings in a TOML or YAML file (by extension; ``.yml``/``.yaml`` is YAML).

    Raises ConfigError naming ``argument`` when the path is empty, missing or a directory,
    and the file when it cannot be read, is not UTF-8 text, does not parse or holds anything
    but known settings."""
    if (problem := path_problem(path, "file")) is not None:
        raise ConfigError(f"{argument}: {problem}")
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"config file {path} is not UTF-8 text: {exc}") from exc
    try:
        yaml = path.suffix in (".yml", ".yaml")
        data = (_load_yaml(text) or {}) if yaml else tomllib.loads(text)
    except Exception as exc:  # a parse error of either format
        raise ConfigError(f"config file {path} does not parse: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path} must hold a table of settings")
    _refuse_unknown_keys(path, data, [*_FIELDS, "server"])
    section = data.get("server", data)
    if section is not data:
        both = sorted(set(data) & set(_FIELDS))
        if both:
            named = "; ".join(
                f"top-level {n} and [server] {n} both set"
                if isinstance(section, dict) and n in section
                else f"top-level {n} beside a [server] table"
                for n in both
            )
            raise ConfigError(f"config file {path}: {named}; put every setting in one place")
    if not isinstance(section, dict):
        raise ConfigError(f"config file {path}: [server] must be a table of settings")
    if section is not data:
        _refuse_unknown_keys(path, section, _FIELDS, "[server] ")
    return dict(section)


def _refuse_unknown_keys(
    path: Path, table: Mapping[Any, Any], known: Iterable[str], where: str = ""
) -> None:
    """Raise ConfigError naming the keys of ``table`` (at ``where`` in config file ``path``)
    that are not one of ``known``, each with the closest known one (:func:`closest`): the first
    :data:`_NAMED_KEYS` of them, each cut as an echoed value is (:func:`clip_inline`), then how
    many more."""
    known = list(known)
    unknown = sorted(str(key) for key in table if key not in known)
    if unknown:
        named = []
        for key in unknown[:_NAMED_KEYS]:
            close = closest(key, known)
            named.append(f"{clip_inline(key)!r}" + (f" (did you mean {close}?)" if close else ""))
        if len(unknown) > _NAMED_KEYS:
            named.append(f"and {len(unknown) - _NAMED_KEYS:,} more")
        raise ConfigError(f"config file {path}: unknown {where}settings {', '.join(named)}")


#: How many unknown keys of a config file a refusal names.
_NAMED_KEYS = 5


def load_settings(
    flags: Mapping[str, Any] | None = None,
    config_file: str | Path | None = None,
    environ: Mapping[str, str] | None = None,
    *,
    command: str | None = None,
    uses: Collection[str] | None = None,
    warn: Callable[[str], None] | None = None,
) -> tuple[Settings, dict[str, str]]:
    """The effective settings and the source of each (``flag``, ``env``, ``file``, ``default``).

    ``flags`` holds only the flags given (None values are ignored). ``config_file`` defaults to
    ``WORKPLACE_ENV_CONFIG``. ``command``: the running command, as a warning names it (e.g.
    ``run``); ``uses``: the settings it uses (default: :func:`used_by` it; no command: all).
    Only those are read and checked; every other one given is left at its default and said to
    ``warn`` (``max_sessions (from FILE) is not used by run and is ignored``). Raises
    ConfigError naming the bad setting and its source.
    """
    environ = os.environ if environ is None else environ
    argument = "--config"
    if config_file is None and f"{ENV_PREFIX}CONFIG" in environ:
        config_file, argument = environ[f"{ENV_PREFIX}CONFIG"], f"{ENV_PREFIX}CONFIG"
    given: list[tuple[str, str, Any]] = []  # (name, kind, value), weakest first
    if config_file is not None:
        given += [(n, "file", v) for n, v in read_file(config_file, argument).items()]
    for name in _FIELDS:
        raw = environ.get(f"{ENV_PREFIX}{name.upper()}")
        if raw is not None:
            given.append((name, "env", raw))
    given += [(n, "flag", v) for n, v in (flags or {}).items() if v is not None]
    origins = {name: origin(name, kind, config_file) for name, kind, _ in given}
    return _settle(given, origins, command, uses, warn)


def settings_at(values: Mapping[str, Any], where: str, command: str) -> Settings:
    """The settings ``values`` (setting name to value, a mapping at path ``where`` of another
    program's config, as NeMo Gym's ``<instance>.resources_servers.workplace_env.server``)
    give ``command``, checked as :func:`load_settings` checks them. Raises ConfigError naming
    the setting as ``WHERE.NAME``, or a setting ``command`` does not use."""
    given = [(name, "key", value) for name, value in values.items() if value is not None]
    origins = {name: f"{where}.{name}" for name, _, _ in given}

    def refuse(line: str) -> None:
        raise ConfigError(line)

    return _settle(given, origins, command, None, refuse)[0]


def _settle(
    given: list[tuple[str, str, Any]],
    origins: Mapping[str, str],
    command: str | None,
    uses: Collection[str] | None,
    warn: Callable[[str], None] | None,
) -> tuple[Settings, dict[str, str]]:
    """:func:`load_settings` of the values ``given`` as ``(name, kind, value)``, weakest first,
    each from ``origins[name]``."""
    if uses is None:
        uses = _FIELDS if command is None else used_by(command)
    values: dict[str, Any] = {}
    sources = {name: "default" for name in _FIELDS}
    ignored = {}
    for name, kind, value in given:
        if name in uses:
            values[name], sources[name] = _coerce(name, value, kind, origins[name]), kind
        else:
            ignored[name] = f"{name} (from {origins[name]}) is not used by {command} and is ignored"
    for line in ignored.values() if warn is not None else ():
        warn(line)
    settings = Settings(**values)
    _check_settings(
        settings, {n: origins[n] if k != "default" else k for n, k in sources.items()}, sources
    )
    return settings, sources


def _check_settings(
    settings: Settings, origins: Mapping[str, str], sources: Mapping[str, str]
) -> None:
    """Raise ConfigError naming the first setting that cannot serve and its source: out of its
    range, or in conflict with another (each setting not given is at its default, which
    passes every check)."""
    _check_ranges(settings, origins, sources)
    # TLS with http_address is fine: the co-hosted gateway calls the servicer in-process.
    for cert, key in _TLS_PAIRS:
        if (getattr(settings, cert) is None) != (getattr(settings, key) is None):
            given, missing = (cert, key) if getattr(settings, key) is None else (key, cert)
            raise ConfigError(
                f"{given} (from {origins[given]}) needs {missing} "
                f"(--{missing.replace('_', '-')}): {cert} and {key} must be given together"
            )
    if settings.admin_open and not settings.admin_token:
        host = settings.address.rpartition(":")[0].strip("[]")
        if host not in _LOOPBACK_HOSTS:
            raise ConfigError(
                f"admin_open (from {origins['admin_open']}) serves checkpoints and retire to "
                f"anyone who reaches {settings.address}: only on a loopback address "
                "(127.0.0.1, ::1, localhost); elsewhere set admin_token"
            )
    if settings.tls_client_ca and not settings.tls_cert:
        raise ConfigError("tls_client_ca (mTLS) needs tls_cert and tls_key (--tls-cert, --tls-key)")
    if settings.data_dir is not None and (
        problem := path_problem(settings.data_dir, "directory") or missing_csvs(settings.data_dir)
    ):
        raise ConfigError(f"data_dir (from {origins['data_dir']}): {problem}")
    _check_tls_files(settings, origins)


#: The TLS settings naming certificates (or CA bundles), and the certificate-key pairs.
_TLS_CERTS = ("tls_cert", "tls_client_ca", "tls_ca", "tls_client_cert")
_TLS_PAIRS = (("tls_cert", "tls_key"), ("tls_client_cert", "tls_client_key"))


def _check_tls_files(settings: Settings, origins: Mapping[str, str]) -> None:
    """Raise ConfigError naming the TLS file that cannot serve and why (unreadable, not PEM,
    a key that is encrypted or does not match its certificate), before anything binds: gRPC
    only says ``Failed to bind to address`` for any of them. Read with Python's ``ssl``."""
    import ssl

    def refuse(name: str, why: object) -> ConfigError:
        return ConfigError(f"{name} (from {origins[name]}) {getattr(settings, name)}: {why}")

    def encrypted() -> bytes:
        raise ConfigError("the key is encrypted; give an unencrypted PEM key")

    for name in _TLS_CERTS:
        path = getattr(settings, name)
        if path is None:
            continue
        try:
            ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_verify_locations(cafile=path)
        except ssl.SSLError as exc:
            raise refuse(name, f"not a PEM certificate ({exc.reason or exc})") from exc
        except OSError as exc:
            raise refuse(name, f"cannot read: {exc.strerror or exc}") from exc
    for cert, key in _TLS_PAIRS:
        if getattr(settings, key) is None:
            continue
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        try:
            context.load_cert_chain(getattr(settings, cert), getattr(settings, key), encrypted)
        except ConfigError as exc:
            raise refuse(key, exc) from exc
        except ssl.SSLError as exc:
            if exc.reason == "KEY_VALUES_MISMATCH":
                why = f"does not match the certificate of {cert} {getattr(settings, cert)}"
            else:
                why = "not a PEM private key (of a type OpenSSL reads)"
            raise refuse(key, why) from exc
        except OSError as exc:
            raise refuse(key, f"cannot read: {exc.strerror or exc}") from exc


def unknown_env_vars(environ: Mapping[str, str] | None = None) -> list[str]:
    """One warning line per ``WORKPLACE_ENV_*`` variable in ``environ`` (default: the process
    environment) that is neither a setting nor one of :data:`OTHER_ENV_VARS`, naming the
    closest setting's variable (a typo such as ``WORKPLACE_ENV_ADMIN_TOKN`` would otherwise go
    unnoticed). Warned about, not refused: other tools may share the prefix."""
    environ = os.environ if environ is None else environ
    known = [f"{ENV_PREFIX}{name.upper()}" for name in _FIELDS]
    lines = []
    for variable in sorted(environ):
        if not variable.startswith(ENV_PREFIX) or variable in OTHER_ENV_VARS:
            continue
        if variable in known:
            continue
        # compared without the shared prefix, which would make every name look close
        names = {v.removeprefix(ENV_PREFIX): v for v in [*known, *sorted(OTHER_ENV_VARS)]}
        close = closest(variable.removeprefix(ENV_PREFIX), names)
        hint = f"; did you mean {names[close]}?" if close else ""
        lines.append(f"{variable} is not a setting and is ignored{hint}")
    return lines


def _most(name: str) -> float:
    """The largest value setting ``name`` may take when its spec gives none."""
    return MAX_DURATION_S if name.endswith(("_s", "_seconds")) else MAX_COUNT


#: The range of each numeric setting: ``(low, strict, high)``: at least ``low`` (above it when
#: ``strict``) and at most ``high``. Every int or float field of :class:`Settings` has one.
RANGES: dict[str, tuple[float, bool, float]] = {
    name: (spec.low, spec.strict, spec.high or _most(name))
    for name, spec in SPECS.items()
    if spec.low is not None
}
_LOOPBACK_HOSTS = frozenset({"127.0.0.1", "::1", "localhost"})
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


#: The HTTP gateway's fixed routes (gateway/routes/) and FastAPI's docs routes; the gateway's
#: tests check this list against the app's routes.
GATEWAY_ROUTES = (
    "/",
    "/health",
    "/ready",
    "/reverify_mode",
    "/aggregate_metrics",
    "/seed_session",
    "/verify",
    "/close_session",
    "/session_token",
    "/docs",
    "/docs/oauth2-redirect",
    "/redoc",
    "/openapi.json",
)


#: Admin tokens shorter than this are warned about (``openssl rand -hex 32`` gives 64).
MIN_ADMIN_TOKEN_CHARS = 16


def admin_token_problem(token: str, instead: str) -> str | None:
    """Why ``token`` cannot be an admin token, or None: it must be non-blank printable ASCII
    (what gRPC metadata and HTTP headers carry) without whitespace at either end (which
    metadata drops, so such a token would be blank, or never match). ``instead``: how the
    caller's user takes the value back (:func:`take_back`'s words), shown for a blank one."""
    if blank := blank_problem(token):
        return f"is a {blank}: give a token (e.g. openssl rand -hex 32), or {instead}"
    if token != token.strip():
        return "begins or ends with whitespace, which the authorization header cannot carry"
    if not all(" " <= c <= "~" for c in token):
        return "must be printable ASCII (it travels in the authorization header)"
    return None


def setting_warnings(settings: Settings, command: str | None = None) -> list[str]:
    """One line per setting that works but is weak: an admin token shorter than
    :data:`MIN_ADMIN_TOKEN_CHARS` characters (guessable; short ones remain usable in tests).
    With ``command`` (one of :data:`COMMANDS`), only of the settings that command takes (a
    client command sends a token, it serves none); None: of every setting (``config``). Also
    ``admin_open`` beside ``admin_token``, which it does not open."""
    token = settings.admin_token
    if command is not None and command not in SPECS["admin_token"].commands:
        return []
    lines = []
    if token and len(token) < MIN_ADMIN_TOKEN_CHARS:
        lines.append(
            f"admin_token has {len(token)} characters, fewer than {MIN_ADMIN_TOKEN_CHARS}: "
            "anyone who guesses it can dump every session and retire any (use e.g. "
            "openssl rand -hex 32)"
        )
    if token and settings.admin_open:
        lines.append(
            "admin_open has no effect beside admin_token: the admin RPCs still need the "
            "token; leave out admin_open (or admin_token, to serve them without one)"
        )
    return lines


def mcp_path_collision(path: str) -> str | None:
    """The gateway route an MCP endpoint at ``path`` would shadow or be shadowed by (a fixed
    route of :data:`GATEWAY_ROUTES`, or ``POST /<tool_name>`` of one of the 27 tools), or None
    (also for ``""``: MCP off). Routes match exactly, so ``/verify/mcp`` collides with none."""
    from workplace_env.sandbox.tools import TOOLS

    if path in GATEWAY_ROUTES:
        return path
    if path.removeprefix("/") in TOOLS:
        return f"{path} (the tool {path.removeprefix('/')})"
    return None


def range_problem(name: str, value: float) -> str | None:
    """Why ``value`` is outside setting ``name``'s range (:data:`RANGES`), e.g. ``must be >= 0,
    got -1``, or None (also for a setting without a range)."""
    if name not in RANGES:
        return None
    low, strict, high = RANGES[name]
    if not math.isfinite(value):  # a Settings built in code, not through _coerce
        return f"must be a finite number, got {value}"
    if value < low or (strict and value == low):
        return f"must be {'>' if strict else '>='} {low}, got {value}"
    if value > high:
        return f"must be <= {int(high) if float(high).is_integer() else high}, got {value}"
    return None


def _check_ranges(
    settings: Settings, origins: Mapping[str, str], sources: Mapping[str, str]
) -> None:
    """Raise ConfigError naming the first setting outside its range and where it came from
    (``origins``: :func:`origin` of each setting; ``sources``: its kind, as
    :func:`load_settings` returns them)."""
    for name in RANGES:
        problem = range_problem(name, getattr(settings, name))
        if problem is not None:
            raise ConfigError(f"{name} (from {origins[name]}) {problem}")
    if settings.log_level.upper() not in LOG_LEVELS:
        raise ConfigError(f"log_level (from {origins['log_level']}) must be one of {LOG_LEVELS}")
    mcp_path = settings.mcp_path
    if mcp_path and (not mcp_path.startswith("/") or mcp_path.endswith("/")):
        raise ConfigError(
            f"mcp_path (from {origins['mcp_path']}) must start with '/' and not end with '/', "
            f"or be empty (MCP off): {mcp_path!r}"
        )
    if origins["max_admin_rpcs"] != "default" and (
        settings.max_admin_rpcs > settings.max_concurrent_rpcs
    ):  # the default (16) is simply capped by a smaller total
        raise ConfigError(
            f"max_admin_rpcs (from {origins['max_admin_rpcs']}) {settings.max_admin_rpcs} is "
            f"more than max_concurrent_rpcs ({settings.max_concurrent_rpcs}): admin RPCs are "
            "admitted among those, so it could never be reached"
        )
    token = settings.admin_token
    if token is not None:
        problem = admin_token_problem(token, take_back(sources["admin_token"]))
        if problem:
            raise ConfigError(f"admin_token (from {origins['admin_token']}) {problem}")
    route = mcp_path_collision(mcp_path)
    if route is not None:
        raise ConfigError(
            f"mcp_path (from {origins['mcp_path']}) {mcp_path!r} collides with the HTTP "
            f"gateway's route {route}: choose another path, or '' to turn MCP off"
        )
    for name in ("address", "http_address", "metrics_address"):
        address = getattr(settings, name)
        if address is None:
            continue
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit() or not 0 <= int(port) <= 65535:
            raise ConfigError(
                f"{name} (from {origins[name]}) must be HOST:PORT, port 0-65535: {address!r}"
            )
    clash = own_port_clash(settings, origins)
    if clash is not None:
        raise ConfigError(clash)


#: The server's own listeners: the address setting of each, and what listens there.
_LISTENERS = {
    "address": "the gRPC server",
    "http_address": "the HTTP gateway",
    "metrics_address": "the metrics endpoint",
}
_WILDCARD_HOSTS = frozenset({"", "0.0.0.0", "::", "*"})


def own_port_clash(settings: Settings, origins: Mapping[str, str]) -> str | None:
    """Why two of the server's own listeners (:data:`_LISTENERS`) cannot both listen, naming
    both settings and where each came from: the same port (not 0) on hosts that overlap (the
    same host, a wildcard, or both loopback). None when they can."""
    bound = []
    for name, role in _LISTENERS.items():
        address = getattr(settings, name)
        if address is None:
            continue
        host, _, port = address.rpartition(":")
        if int(port):
            bound.append((name, role, host.strip("[]"), int(port), address))
    for i, (name, role, host, port, address) in enumerate(bound):
        for other, other_role, other_host, other_port, other_address in bound[:i]:
            overlap = (
                host == other_host
                or {host, other_host} & _WILDCARD_HOSTS
                or {host, other_host} <= _LOOPBACK_HOSTS
            )
            if port == other_port and overlap:
                return (
                    f"{name} (from {origins[name]}) {address} and {other} (from "
                    f"{origins[other]}) {other_address} are the same port {port}: "
                    f"{other_role} and {role} each need their own; choose another port for "
                    "one of them"
                )
    return None


def describe(settings: Settings, sources: Mapping[str, str]) -> list[tuple[str, str, str]]:
    """``(name, value, source)`` rows for printing; secrets are masked."""
    rows = []
    for name, value in dataclasses.asdict(settings).items():
        shown = "***" if name in SECRETS and value else ("" if value is None else str(value))
        rows.append((name, shown, sources.get(name, "default")))
    return rows


def print_settings(settings: Settings, sources: Mapping[str, str]) -> None:
    """The :func:`describe` rows as a table on stdout (``workplace-env config``, ``serve
    --print-config``)."""
    from rich.table import Table

    from workplace_env.terminal import plain, print_table

    table = Table(title="effective configuration")
    for col in ("setting", "value", "source"):
        table.add_column(col)
    for row in describe(settings, sources):
        table.add_row(*(plain(cell) for cell in row))  # a value's brackets are text
    print_table(table)


def client_credentials(settings: Settings) -> grpc.ChannelCredentials | None:
    """The channel credentials of a command that connects to a server (``gateway``, ``run
    --target``, ``checkpoint save/restore``): TLS trusting ``tls_ca`` (None: the system's
    roots) when ``tls_ca`` or ``tls_client_cert`` is set, with ``tls_client_cert`` and
    ``tls_client_key`` for a server that requires a client certificate (mTLS); None
    (plaintext) when neither is set. Raises OSError when a file cannot be read."""
    if not (settings.tls_ca or settings.tls_client_cert):
        return None
    return tls_credentials(settings.tls_ca, settings.tls_client_cert, settings.tls_client_key)
