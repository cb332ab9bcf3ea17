"""A NeMo Gym responses-API agent that runs its episodes' tool calls over MCP.

NeMo Gym's launcher starts this file in a venv with ``nemo-gym`` (``requirements.txt``). The
agent plays agent sessions (``single_agent_turn`` with ``resources_tool_transports: [mcp]``):
the seed hands it the resources server's MCP endpoint (``MCPToolAccess``: URL and headers,
e.g. ``X-NeMo-Gym-Session-Token``); ``/v1/responses`` then asks the policy model for the next
turn, runs each ``function_call`` as an MCP ``tools/call`` on that session, appends its
``function_call_output`` (the result's text) and asks again, until a turn has no calls, the
model's answer is cut off, or ``max_steps`` turns were played. Each call is reported at close
as a ``tool_call`` observation (``source``: ``workplace_env_mcp``).

Seeding raises ``ValueError`` (the episode fails at its agent stage) on a sandbox access, a
required direct HTTP access, no MCP access, or a required MCP server whose ``tools/list`` fails.
``/v1/responses`` without an agent session is 409, the legacy ``/run`` 400: the agent serves
sessions only.
"""

from __future__ import annotations

import json
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from time import perf_counter, time
from typing import Any

from fastapi import HTTPException, Request
from mcp import ClientSession, McpError
from mcp.client.streamable_http import streamablehttp_client
from nemo_gym.base_resources_server import BaseRunRequest, BaseVerifyResponse
from nemo_gym.base_responses_api_agent import (
    AgentCloseSessionResponse,
    AgentSeedSessionRequest,
    AgentSessionState,
    BaseResponsesAPIAgentConfig,
    SimpleResponsesAPIAgent,
)
from nemo_gym.config_types import ModelServerRef
from nemo_gym.openai_utils import (
    NeMoGymEasyInputMessage,
    NeMoGymFunctionCallOutput,
    NeMoGymResponse,
    NeMoGymResponseCreateParamsNonStreaming,
    accumulate_response_usage,
)
from nemo_gym.rollout_observability import AgentObservationBundle, ToolCallObservation
from nemo_gym.server_utils import get_response_json, raise_for_status
from nemo_gym.tool_access import DirectHTTPToolAccess, MCPToolAccess

#: The observation source of this agent's tool calls.
SOURCE = "workplace_env_mcp"


class MCPAgentConfig(BaseResponsesAPIAgentConfig):
    """The agent's config block: its policy model and the turn bound (None: unbounded)."""

    model_server: ModelServerRef
    max_steps: int | None = None


@dataclass
class MCPAgentSession(AgentSessionState):
    """One episode's MCP servers: ``routes`` maps a listed tool name to its server, ``fallback``
    takes the names none lists (its server answers them as unknown tools)."""

    routes: dict[str, MCPToolAccess]
    fallback: MCPToolAccess
    calls: list[ToolCallObservation] = field(default_factory=list)


class MCPClients:
    """The MCP client sessions of one ``/v1/responses`` request, one per server, opened on
    first use and closed with the request (``async with``)."""

    def __init__(self) -> None:
        self._stack = AsyncExitStack()
        self._open: dict[str, ClientSession] = {}

    async def __aenter__(self) -> MCPClients:
        await self._stack.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> bool | None:
        return await self._stack.__aexit__(*exc)

    async def get(self, access: MCPToolAccess) -> ClientSession:
        """The initialized client of ``access``'s server; transport errors propagate."""
        client = self._open.get(access.name)
        if client is None:
            connection = access.connection
            read, write, _ = await self._stack.enter_async_context(
                streamablehttp_client(str(connection.url), headers=dict(connection.headers))
            )
            client = await self._stack.enter_async_context(ClientSession(read, write))
            await client.initialize()
            self._open[access.name] = client
        return client


def _result_text(result: Any) -> str:
    """The model-visible output of an MCP ``CallToolResult``: its text parts joined, else its
    structured content as JSON."""
    texts = [part.text for part in result.content if getattr(part, "type", None) == "text"]
    if texts:
        return "".join(texts)
    return json.dumps(result.structuredContent)


class WorkplaceMCPAgent(SimpleResponsesAPIAgent):
    """The agent server (see the module docstring)."""

    ray_enabled = False  # no Ray tasks: the server joins no cluster
    config: MCPAgentConfig

    async def _seed_agent_session_state(self, body: AgentSeedSessionRequest) -> MCPAgentSession:
        """Check the grants and list each MCP server's tools; ValueError when unplayable."""
        if body.sandbox_access is not None:
            raise ValueError(f"{SOURCE} takes no sandbox access")
        accesses = self.effective_tool_accesses(body)
        direct = [a.name for a in accesses if isinstance(a, DirectHTTPToolAccess) and a.required]
        if direct:
            raise ValueError(f"{SOURCE} plays tools over MCP only; required: {', '.join(direct)}")
        servers = [a for a in accesses if isinstance(a, MCPToolAccess)]
        routes: dict[str, MCPToolAccess] = {}
        reached: list[MCPToolAccess] = []
        for access in servers:
            try:
                async with MCPClients() as clients:
                    listed = await (await clients.get(access)).list_tools()
            except Exception as error:
                if access.required:
                    raise ValueError(f"MCP server {access.name}: {error!r}") from error
                continue
            reached.append(access)
            for tool in listed.tools:
                routes.setdefault(tool.name, access)
        if not reached:
            raise ValueError(f"{SOURCE} needs an MCP tool access; the session grants none")
        return MCPAgentSession(request=body, routes=routes, fallback=reached[0])

    async def _close_agent_session_state(
        self, state: AgentSessionState
    ) -> AgentCloseSessionResponse:
        """The session's tool-call observations (no resources cookies: MCP carries none)."""
        assert isinstance(state, MCPAgentSession)
        bundle = AgentObservationBundle(source=SOURCE, records=list(state.calls))
        return AgentCloseSessionResponse(
            agent_session_id=state.request.agent_session_id, agent_observations=bundle
        )

    async def responses(
        self, request: Request, body: NeMoGymResponseCreateParamsNonStreaming
    ) -> NeMoGymResponse:
        """One episode played on the request's agent session (409 without one)."""
        session_id = self._agent_session_id_from_request(request)
        if session_id is None:
            raise HTTPException(409, f"{SOURCE} plays agent sessions only: seed one first")
        state = self._require_agent_session(session_id)
        assert isinstance(state, MCPAgentSession)
        model_path = self.url_path_for_request("/v1/responses", request)
        async with MCPClients() as clients:
            return await self._play(body, state, clients, model_path)

    async def _play(
        self,
        body: NeMoGymResponseCreateParamsNonStreaming,
        state: MCPAgentSession,
        clients: MCPClients,
        model_path: str,
    ) -> NeMoGymResponse:
        """The model/tool loop; the last model response with every turn's items as output and
        the summed usage."""
        given = body.input
        history = (
            [NeMoGymEasyInputMessage(role="user", content=given)]
            if isinstance(given, str)
            else list(given)
        )
        played: list[Any] = []
        usage = None
        steps = 0
        while True:
            steps += 1
            turn_body = body.model_copy(update={"input": history + played})
            answer = await self.server_client.post(
                server_name=self.config.model_server.name, url_path=model_path, json=turn_body
            )
            await raise_for_status(answer)
            turn = NeMoGymResponse.model_validate(await get_response_json(answer))
            usage = accumulate_response_usage(usage, turn.usage)
            played.extend(turn.output)
            calls = [item for item in turn.output if item.type == "function_call"]
            if turn.incomplete_details or not calls:
                break
            for call in calls:
                output = await self._call_tool(call, state, clients)
                played.append(
                    NeMoGymFunctionCallOutput(
                        type="function_call_output", call_id=call.call_id, output=output
                    )
                )
            if self.config.max_steps and steps >= self.config.max_steps:
                break
        return turn.model_copy(update={"output": played, "usage": usage})

    async def _call_tool(self, call: Any, state: MCPAgentSession, clients: MCPClients) -> str:
        """``call`` run as ``tools/call`` on its server, its output text; arguments that are
        not a JSON object and MCP errors are model-visible outputs, recorded as failed."""
        started, clock = time(), perf_counter()
        error_type = None
        try:
            arguments = json.loads(call.arguments)
        except (json.JSONDecodeError, TypeError) as error:
            output = json.dumps({"error": f"Invalid tool call arguments: {error!r}"})
            error_type = type(error).__name__
        else:
            if not isinstance(arguments, dict):
                output = json.dumps({"error": "Tool call arguments must be a JSON object"})
                error_type = "arguments_not_object"
            else:
                access = state.routes.get(call.name, state.fallback)
                client = await clients.get(access)
                try:
                    result = await client.call_tool(call.name, arguments)
                except McpError as error:
                    output = json.dumps({"error": error.error.message})
                    error_type = f"mcp_{error.error.code}"
                else:
                    output = _result_text(result)
                    error_type = "tool_error" if result.isError else None
        state.calls.append(
            ToolCallObservation(
                invocation_id="root",
                tool_call_id=call.call_id,
                tool_name=call.name,
                started_at=started,
                completed_at=max(started, time()),
                duration_ms=(perf_counter() - clock) * 1000,
                timing_source="harness",
                status="failed" if error_type else "completed",
                error_type=error_type,
            )
        )
        return output

    async def run(self, body: BaseRunRequest) -> BaseVerifyResponse:
        """The legacy ``/run``: 400, the agent serves agent sessions only."""
        raise HTTPException(
            400, f"{SOURCE} plays agent sessions (single_agent_turn) only, not the legacy /run"
        )


if __name__ == "__main__":
    WorkplaceMCPAgent.run_webserver()
