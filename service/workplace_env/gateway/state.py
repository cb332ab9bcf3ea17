"""What the gateway's routes share: the SDK client, settings, token minter, MCP server and
draining flag of one app (:class:`GatewayState`), reached by a route through the
:data:`GatewayStateDep` dependency (the state is ``app.state.gateway``)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib import metadata
from typing import Annotated, Any

from fastapi import Depends, Request
from starlette.concurrency import run_in_threadpool

from workplace_env.gateway.cookies import SessionTokens
from workplace_env.gateway.mcp_tools import McpGateway
from workplace_env.gateway.readiness import health_probe
from workplace_env.gateway.settings import GatewaySettings
from workplace_env.gateway.translate import service_error
from workplace_env_client import EnvironmentClient, WorkplaceEnvError


def gateway_version() -> str:
    """The installed ``workplace-env`` version (``"0"`` from a bare checkout)."""
    try:
        return metadata.version("workplace-env")
    except metadata.PackageNotFoundError:  # pragma: no cover - running from a bare checkout
        return "0"


@dataclass(eq=False)
class GatewayState:
    """One gateway app's shared objects.

    ``client``: the SDK client (owned by the caller); ``tokens``: the MCP session-token
    minter; ``mcp``: the MCP server (None when ``settings.mcp_path`` is empty); ``probe``: the
    gRPC health probe behind ``/ready`` (None for an in-process client); ``draining``: set on a
    stop signal (CONTRACT X2, :func:`workplace_env.gateway.serve.mark_draining`).
    """

    client: EnvironmentClient
    settings: GatewaySettings
    tokens: SessionTokens
    mcp: McpGateway | None = None
    probe: Callable[[], str | None] | None = None
    draining: threading.Event = field(default_factory=threading.Event)
    #: whether the client's calls block (gRPC): they then run on a worker thread
    blocking: bool = field(init=False)

    def __post_init__(self) -> None:
        self.blocking = self.client.transport.blocking

    @classmethod
    def over(cls, client: EnvironmentClient, settings: GatewaySettings) -> GatewayState:
        """The state of an app over ``client`` with ``settings``: a token minter with its
        secret, MCP when ``settings.mcp_path`` is set, the client's health probe."""
        tokens = SessionTokens(settings.secret_key, settings.token_max_age_s)
        mcp = McpGateway(client, tokens, gateway_version()) if settings.mcp_path else None
        return cls(client, settings, tokens, mcp, health_probe(client))

    async def service_call(
        self,
        fn: Callable[..., Any],
        *args: Any,
        seeding: bool = False,
        sent_as: Mapping[str, str] | None = None,
        off_loop: bool = False,
        **kw: Any,
    ) -> Any:
        """``fn(*args, **kw)``, a call of the client: on a worker thread when its transport
        blocks (gRPC) or ``off_loop`` (a large body the service parses again). Raises its
        refusals as :class:`~workplace_env.gateway.translate.HttpProblem`."""
        try:
            if self.blocking or off_loop:
                return await run_in_threadpool(fn, *args, **kw)
            return fn(*args, **kw)  # in-process: sub-millisecond, no thread hop
        except WorkplaceEnvError as exc:
            raise service_error(exc, seeding=seeding, sent_as=sent_as) from exc


async def gateway_state(request: Request) -> GatewayState:
    """The :class:`GatewayState` of the request's app (``app.state.gateway``)."""
    state: GatewayState = request.app.state.gateway
    return state


#: A route's parameter type for its app's :class:`GatewayState`.
GatewayStateDep = Annotated[GatewayState, Depends(gateway_state)]
