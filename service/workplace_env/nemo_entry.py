"""NeMo Gym's launcher starting ``workplace-env serve`` (``resources_servers/workplace_env``).

NeMo Gym (``ng_run``, ``gym env start``) starts a resources server by running its ``app.py``
with the run's resolved config in ``NEMO_GYM_CONFIG_DICT`` (YAML) and the instance's top-level
name in ``NEMO_GYM_CONFIG_PATH``. :func:`main` reads the instance's block::

    <instance>:
      resources_servers:
        workplace_env:
          host: 127.0.0.1          # filled in by NeMo when absent
          port: 8000               # filled in by NeMo when absent
          server:                  # settings of `workplace-env serve` (field names), optional
            address: 127.0.0.1:50051
            max_sessions: 50000

and replaces the process with ``workplace-env serve --http-address HOST:PORT``, each ``server``
setting passed as its ``WORKPLACE_ENV_<NAME>`` variable (so a null leaves the default and an
exported variable). NeMo's readiness probe (any HTTP answer on the port) sees the gateway once
the server is up; NeMo's SIGINT drains it, and on Linux so does the death of NeMo's launcher
shell (parent-death signal SIGTERM).
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from workplace_env.config import ENV_PREFIX, ConfigError, settings_at, used_by
from workplace_env.errors import closest

CONFIG_DICT_ENV = "NEMO_GYM_CONFIG_DICT"
CONFIG_PATH_ENV = "NEMO_GYM_CONFIG_PATH"
#: The server-type and implementation keys of this entry in a NeMo Gym config.
SERVER_TYPE = "resources_servers"
IMPLEMENTATION = "workplace_env"
#: Settings the instance's own keys decide (``host`` and ``port``).
_OWNED = frozenset({"http_address"})
#: The settings ``serve`` uses, those a ``server`` mapping may hold.
_SETTINGS = sorted(used_by("serve"))
_PR_SET_PDEATHSIG = 1


class EntryError(ValueError):
    """A NeMo Gym config this entry cannot start from (names the key)."""


def instance_block(config: Mapping[str, Any], instance: str) -> Mapping[str, Any]:
    """The ``<instance>.resources_servers.workplace_env`` block of a resolved NeMo config.

    Raises EntryError naming the missing key."""
    block: Any = config.get(instance)
    for key in (SERVER_TYPE, IMPLEMENTATION):
        if not isinstance(block, Mapping) or key not in block:
            raise EntryError(f"NeMo config has no {instance}.{SERVER_TYPE}.{IMPLEMENTATION}")
        block = block[key]
    if not isinstance(block, Mapping):
        raise EntryError(f"{instance}.{SERVER_TYPE}.{IMPLEMENTATION} is not a mapping")
    return block


def http_address(block: Mapping[str, Any]) -> str:
    """``HOST:PORT`` of the instance (``[HOST]:PORT`` for IPv6). Raises EntryError."""
    host, port = block.get("host"), block.get("port")
    if not host or not isinstance(port, int) or isinstance(port, bool):
        raise EntryError(f"host and port must be set (got host={host!r}, port={port!r})")
    host = str(host)
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def settings_env(block: Mapping[str, Any], instance: str) -> dict[str, str]:
    """``WORKPLACE_ENV_<NAME>`` variables of the block's ``server`` settings (nulls left out).

    Raises EntryError naming, by its config path: an unknown setting (with the closest one),
    one NeMo owns, or a value ``serve`` would refuse (checked as it checks them,
    :func:`~workplace_env.config.settings_at`), before anything starts."""
    server = block.get("server") or {}
    where = f"{instance}.{SERVER_TYPE}.{IMPLEMENTATION}.server"
    if not isinstance(server, Mapping):
        raise EntryError(f"{where} must be a mapping of workplace-env serve settings")
    env: dict[str, str] = {}
    for name in server:
        if name in _OWNED:
            raise EntryError(f"{where}.{name}: set by the instance's host and port")
        if name not in _SETTINGS:
            close = closest(str(name), _SETTINGS)
            hint = f" (did you mean {close}?)" if close else ""
            raise EntryError(f"{where}.{name}: not a workplace-env serve setting{hint}")
    try:
        settings_at(server, where, "serve")
    except ConfigError as exc:
        raise EntryError(f"configuration error: {exc}") from exc
    for name, value in server.items():
        if value is None:
            continue
        if isinstance(value, bool):
            value = "true" if value else "false"
        env[f"{ENV_PREFIX}{name.upper()}"] = str(value)
    return env


def serve_command(environ: Mapping[str, str]) -> tuple[list[str], dict[str, str]]:
    """The ``workplace-env serve`` argv and environment for NeMo's ``environ``. Raises
    EntryError when the config variables are missing or the instance's block is wrong."""
    text, instance = environ.get(CONFIG_DICT_ENV), environ.get(CONFIG_PATH_ENV)
    if not text or not instance:
        raise EntryError(f"{CONFIG_DICT_ENV} and {CONFIG_PATH_ENV} must be set (by NeMo Gym)")
    config = yaml.safe_load(text)
    if not isinstance(config, Mapping):
        raise EntryError(f"{CONFIG_DICT_ENV} is not a YAML mapping")
    block = instance_block(config, instance)
    executable = Path(sys.executable).with_name("workplace-env")
    argv = [str(executable), "serve", "--http-address", http_address(block)]
    return argv, {**environ, **settings_env(block, instance)}


def _die_with_parent() -> None:
    """Ask Linux for SIGTERM (a drain) when the launching process dies; elsewhere nothing."""
    if sys.platform == "linux":
        ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def main() -> None:
    """Replace this process with ``workplace-env serve`` (see the module docstring); exit 2
    with the reason on a config it cannot start from."""
    try:
        argv, env = serve_command(os.environ)
    except (EntryError, yaml.YAMLError) as exc:
        print(f"workplace_env NeMo Gym entry: {exc}", file=sys.stderr)
        raise SystemExit(2) from exc
    _die_with_parent()
    os.execve(argv[0], argv, env)
