"""Settings of the HTTP gateway (the legacy cookie path and MCP), with their defaults."""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass, field

from workplace_env.config import (
    SPECS,
    Settings,
    load_settings,
    mcp_path_collision,
    origin,
    range_problem,
)

#: The reference's session cookie name (NeMo Gym names it ``<ServerClass>___<server name>``).
COOKIE_NAME = "WorkbenchResourcesServer___workplace_assistant"
#: The reference's cookie lifetime: 14 days, in seconds (Starlette's SessionMiddleware default).
COOKIE_MAX_AGE_S = 14 * 24 * 60 * 60
#: Environment variable :meth:`GatewaySettings.from_env` reads the signing secret from (the
#: server settings' ``cookie_secret``, workplace_env.config).
SECRET_ENV = origin("cookie_secret", "env")


#: Each field of :class:`GatewaySettings` set from a server setting, and that setting's name.
FROM_SETTINGS = {spec.gateway: name for name, spec in SPECS.items() if spec.gateway is not None}


def _random_secret() -> str:
    return secrets.token_urlsafe(32)


@dataclass(frozen=True)
class GatewaySettings:
    """How the gateway signs and scopes sessions.

    ``secret_key`` signs the session cookie and the MCP session tokens. The default is a random
    secret per process, so cookies die with the process and nobody can forge one; pass the
    reference's key only for drop-in compatibility with cookies it issued (that key is public,
    so anyone can then forge a cookie naming any session id).
    ``cookie_name`` / ``cookie_max_age_s`` / ``https_only`` shape the ``Set-Cookie`` header
    (defaults: the reference's name, 1,209,600 s, no ``secure`` flag).
    ``token_max_age_s``: seconds an MCP session token stays valid.
    ``mcp_path``: where the MCP streamable-HTTP endpoint is mounted; ``""`` turns MCP off;
    a path of another gateway route (``/verify``, ``/<tool_name>``, ...) is a ValueError.
    ``max_verify_output_items`` / ``max_verify_calls``: the server settings' bounds on a
    ``/verify`` body (0: none), checked at the gateway's edge right after the body is parsed,
    before any entry is looked at: ``response.output`` longer than the first (its
    entries counted by :func:`workplace_env.responses.output_entries`), or a ``ground_truth``
    list longer than the second, is a 422 naming the field and the bound.
    ``header_timeout_s`` / ``body_timeout_s`` / ``max_connections``: the server settings'
    ``http_*`` limits of :mod:`workplace_env.gateway.limits` (``max_connections`` 0: derived
    from the open-file limit when the gateway starts).
    """

    secret_key: str = field(default_factory=_random_secret, repr=False)
    cookie_name: str = COOKIE_NAME
    cookie_max_age_s: int = COOKIE_MAX_AGE_S
    https_only: bool = False
    token_max_age_s: int = COOKIE_MAX_AGE_S
    mcp_path: str = Settings.mcp_path
    max_verify_output_items: int = Settings.max_verify_output_items
    max_verify_calls: int = Settings.max_verify_calls
    header_timeout_s: float = Settings.http_header_timeout_s
    body_timeout_s: float = Settings.http_body_timeout_s
    max_connections: int = Settings.http_max_connections

    def __post_init__(self) -> None:
        if not self.secret_key:
            raise ValueError("secret_key must be non-empty")
        if self.cookie_max_age_s <= 0 or self.token_max_age_s <= 0:
            raise ValueError("cookie_max_age_s and token_max_age_s must be positive")
        for name, setting in FROM_SETTINGS.items():
            problem = range_problem(setting, getattr(self, name))
            if problem is not None:
                raise ValueError(f"{name} (the setting {setting}) {problem}")
        if self.mcp_path and (not self.mcp_path.startswith("/") or self.mcp_path.endswith("/")):
            raise ValueError("mcp_path must start with '/' and not end with '/' (or be '')")
        route = mcp_path_collision(self.mcp_path)
        if route is not None:
            raise ValueError(
                f"mcp_path {self.mcp_path!r} collides with the gateway's route {route}"
            )

    @classmethod
    def of(cls, settings: Settings) -> GatewaySettings:
        """The gateway's settings from the server settings: those whose spec names a
        ``gateway`` field (the cookie secret, random per process when unset; the MCP path,
        the verify bounds and the HTTP limits)."""
        given = {name: getattr(settings, setting) for name, setting in FROM_SETTINGS.items()}
        if not given.get("secret_key"):
            given.pop("secret_key", None)
        return cls(**given)

    @classmethod
    def from_env(cls, **overrides: object) -> GatewaySettings:
        """Settings whose secret is ``$WORKPLACE_ENV_COOKIE_SECRET`` when set (the server
        settings' ``cookie_secret``), else random per process; ``overrides`` pass through.
        Raises ConfigError for a blank one."""
        secret = os.environ.get(SECRET_ENV)
        if secret is not None and "secret_key" not in overrides:
            settings, _ = load_settings({}, None, {SECRET_ENV: secret})  # a blank one: refused
            overrides["secret_key"] = settings.cookie_secret
        return cls(**overrides)  # type: ignore[arg-type]
