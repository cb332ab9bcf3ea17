"""OpenEnv's ``ResourceSessionFactory`` over the SDK: one typed session per rollout.

>>> factory = WorkplaceSessionFactory(EnvironmentClient("localhost:50051"))
>>> CollectRunner(session_factory=factory, harness_adapter=MCPHarnessAdapter(), ...)

OpenEnv's harnesses (``CollectRunner``, ``build_harness_rollout_func``, ``SessionMCPBridge``)
call ``factory.create(task=row, episode_id=...)`` with a dataset row (tasks JSONL: ``id,
ground_truth, prompt, ...``), then the session's ``initial_messages()``, ``list_tools()`` and
``call_tool(name, arguments)`` as the model asks, ``verify(transcript)`` for the reward, and
``close()``. Needs the ``openenv`` extra (``openenv`` 0.10).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

try:
    from openenv.core.env_server.mcp_types import Tool
    from openenv.core.harness import (
        RESERVED_TOOL_NAMES,
        ResourceSession,
        ResourceSessionFactory,
        ToolResult,
    )
    from openenv.core.harness import VerifyResult as RolloutVerifyResult
except ImportError as missing:
    raise ImportError(
        "workplace_env_client.openenv needs OpenEnv 0.10: install the SDK's openenv extra"
        " (workplace-env-client[openenv])"
    ) from missing

from workplace_env_client.client import EnvironmentClient
from workplace_env_client.episodes import RowEpisode
from workplace_env_client.errors import ArgumentError
from workplace_env_client.rollouts import create_params_for


def openenv_tools(tools: Sequence[Mapping[str, Any]]) -> list[Tool]:
    """ListTools schemas as OpenEnv's MCP tool specs (``input_schema``: the parameters).
    Raises ValueError for a tool named like one of OpenEnv's controls (``reset``, ``step``,
    ``state``, ``close``)."""
    reserved = sorted({t["name"] for t in tools} & RESERVED_TOOL_NAMES)
    if reserved:
        raise ValueError(f"tool names {reserved} are OpenEnv's orchestration controls")
    return [
        Tool(name=t["name"], description=t["description"], input_schema=t["parameters"])
        for t in tools
    ]


class WorkplaceResourceSession(ResourceSession):
    """One rollout on a typed session seeded for a dataset row; closing it closes the
    session. Dropped unclosed, it closes the session itself with a
    :class:`~workplace_env_client.errors.SessionLeftOpenWarning` (:class:`RowEpisode`). Made by
    :class:`WorkplaceSessionFactory`."""

    def __init__(
        self,
        client: EnvironmentClient,
        row: Mapping[str, Any],
        tools: list[Tool],
        episode: tuple[str, int] | None = None,
    ) -> None:
        """Seed the session. Raises ArgumentError (nothing sent) for a malformed row or
        episode (``responses_create_params`` without its ``input``: the field named), and the
        seed's errors (nothing left open). The row is read whole before the seed."""
        self._messages: list[dict[str, Any]] = []
        self._tools = tools

        def read_messages() -> None:
            messages = create_params_for(row, ()).get("input")
            if isinstance(messages, str):  # a Responses-API input given as plain text
                messages = [{"role": "user", "content": messages}]
            if not isinstance(messages, list):
                why = "must hold the input: a list of messages or a text"
                raise ArgumentError("task.responses_create_params.input", why)
            self._messages = messages

        self.episode = RowEpisode.start(client, row, episode, before_seed=read_messages)

    def initial_messages(self) -> list[dict[str, Any]]:
        """The row's ``responses_create_params`` input, else its system message (when it has
        one) and its prompt as the user message."""
        return [dict(m) for m in self._messages]

    def list_tools(self) -> list[Tool]:
        """The server's tools, as ListTools lists them."""
        return list(self._tools)

    def call_tool(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        """Call tool ``name``: ``data`` is its output as the JSON text the reference answers (a
        bad call answers the tool's error text). Raises RuntimeError once closed, ArgumentError
        for arguments that are not a JSON object, and the RPC's errors."""
        return ToolResult(data=self.episode.call(name, arguments))

    def verify(
        self, transcript: list[dict[str, Any]], final_state: Any | None = None
    ) -> RolloutVerifyResult:
        """Score the calls made (``env_reward`` 0.0 or 1.0; a masked ``session_lost`` sample is
        0.0 with ``metrics["mask_sample"]`` True), the session left open until :meth:`close`.
        ``metrics`` has ``mask_sample``, ``failure_kind`` and ``tool_calls``; ``artifacts`` the
        ``failure_reason`` and the compared ``tables``. Raises RuntimeError once closed."""
        result = self.episode.verify()
        return RolloutVerifyResult(
            env_reward=result.reward,
            done=True,
            metrics={
                "mask_sample": result.mask_sample,
                "failure_kind": result.failure_kind,
                "tool_calls": len(self.episode.calls),
            },
            artifacts={
                "failure_reason": result.failure_reason,
                "tables": [asdict(t) for t in result.tables],
            },
        )

    def close(self) -> None:
        """Close the session (a second close does nothing)."""
        self.episode.close()


class WorkplaceSessionFactory(ResourceSessionFactory[WorkplaceResourceSession]):
    """OpenEnv's session factory for ``client``'s server; its sessions share ``client``."""

    def __init__(
        self, client: EnvironmentClient, tools: Sequence[Mapping[str, Any]] | None = None
    ) -> None:
        """``tools``: ListTools schemas (default: ``client.list_tools()``, asked once). Raises
        ValueError as :func:`openenv_tools`, and the RPC's errors."""
        self.client = client
        self.tools = openenv_tools(client.list_tools() if tools is None else tools)

    def create(
        self, task: Any, seed: int | None = None, episode_id: str | None = None
    ) -> WorkplaceResourceSession:
        """A session for the dataset row ``task``. ``episode_id`` becomes the rollout id
        (attempt 0; default a fresh one); ``seed`` is not used (the server's sandbox is
        fixed). Raises as :class:`WorkplaceResourceSession`."""
        episode = None if episode_id is None else (episode_id, 0)
        return WorkplaceResourceSession(self.client, task, self.tools, episode)
