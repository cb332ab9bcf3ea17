"""The gateway's route class: FastAPI's route, minus its request handler where that handler
would only call the endpoint."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from fastapi import Request
from fastapi.dependencies.models import Dependant
from fastapi.dependencies.utils import get_typed_return_annotation
from fastapi.responses import Response
from fastapi.routing import APIRoute
from starlette.routing import Match
from starlette.types import Scope


def _takes_request_only(dependant: Dependant) -> bool:
    """Whether ``dependant`` is an async callable of the ``Request`` alone: no parameter to
    read or validate, no sub-dependency, no special parameter but the request."""
    return (
        dependant.request_param_name is not None
        and inspect.iscoroutinefunction(dependant.call)
        and not (dependant.path_params or dependant.query_params or dependant.header_params)
        and not (dependant.cookie_params or dependant.body_params or dependant.dependencies)
        and dependant.response_param_name is None
        and dependant.background_tasks_param_name is None
        and dependant.http_connection_param_name is None
        and dependant.websocket_param_name is None
        and dependant.security_scopes_param_name is None
    )


class DirectRoute(APIRoute):
    """A FastAPI route that calls its endpoint itself when FastAPI has nothing to resolve.

    For an endpoint that takes the ``Request``, plain ``str`` path parameters and at most one
    dependency, an async function of the ``Request`` alone (the app's
    :class:`~workplace_env.gateway.state.GatewayState`), and returns a ``Response``, FastAPI's
    request handler does nothing but those calls (no body to read, no validation that can fail,
    no serialization), yet its dependency solving per request cost about a sixth of the
    gateway's CPU on the hot routes. Such an endpoint is called directly; any other gets
    FastAPI's handler. The route stays FastAPI's: its OpenAPI document, middleware and
    exception handlers are unchanged (only FastAPI's OpenTelemetry spans for the dependency and
    endpoint steps, emitted when a tracer is configured, are not made for such routes; the
    request's own span is). Such a route calls its dependencies as declared: an app's
    ``dependency_overrides`` do not reach it.
    """

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        """FastAPI's match, after a quick refusal of a path that cannot be this route's: a
        route without path parameters takes only a path ending with its own (a request's path
        holds the app's ``root_path`` before it), and the router tries every route before the
        one that matches."""
        if not self.param_convertors and not scope.get("path", "").endswith(self.path):
            return Match.NONE, {}
        return super().matches(scope)

    def get_route_handler(self) -> Callable[[Request], Any]:
        dependant = self.dependant
        params = dependant.path_params
        simple = (
            dependant.request_param_name is not None
            and not (dependant.query_params or dependant.header_params)
            and not (dependant.cookie_params or dependant.body_params)
            and len(dependant.dependencies) <= 1
            and all(_takes_request_only(d) and d.name for d in dependant.dependencies)
            and all(p.field_info.annotation is str and not p.field_info.metadata for p in params)
            and dependant.response_param_name is None
            and dependant.background_tasks_param_name is None
            and dependant.http_connection_param_name is None
            and dependant.security_scopes_param_name is None
            and get_typed_return_annotation(self.endpoint) is Response
            and inspect.iscoroutinefunction(self.endpoint)
        )
        if not simple:
            return super().get_route_handler()
        endpoint, request_name = self.endpoint, dependant.request_param_name
        if not dependant.dependencies:

            async def handler(request: Request) -> Response:
                return await endpoint(**{request_name: request}, **request.path_params)  # type: ignore[no-any-return]

            return handler
        dependency_name, dependency = dependant.dependencies[0].name, dependant.dependencies[0].call

        async def handler_with_dependency(request: Request) -> Response:
            named = {request_name: request, dependency_name: await dependency(request)}  # type: ignore[misc]
            return await endpoint(**named, **request.path_params)  # type: ignore[no-any-return]

        return handler_with_dependency
