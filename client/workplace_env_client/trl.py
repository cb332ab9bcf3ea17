"""TRL's GRPO ``environment_factory`` over the SDK: one typed session per rollout slot.

>>> Env = trl_environment(EnvironmentClient("localhost:50051"))
>>> trainer = GRPOTrainer(..., train_dataset=rows, environment_factory=Env)

TRL makes one instance per rollout slot and, per rollout, calls ``reset(**row)`` with the
dataset row, then the instance's public methods as the model's tool calls, then
``get_reward()``. The class :func:`trl_environment` builds has, besides those two, exactly one
public method per tool of the server's ListTools, named after it, whose signature and Google
docstring make ``transformers.utils.get_json_schema`` answer the tool's schema (name,
description, parameter types and descriptions, required ones). Optional parameters default to
:data:`UNSET` and only the arguments given are sent. A method returns the tool's output as the
JSON text the reference answers (a bad call answers the tool's error text, not an exception).
Needs only this SDK; ``transformers`` (the ``trl`` extra) is what reads the schemas.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from workplace_env_client.client import EnvironmentClient
from workplace_env_client.contexts import SyncOnly
from workplace_env_client.episodes import RowEpisode
from workplace_env_client.messages import VerifyResult

#: The Python type of each JSON Schema parameter type the tools use.
PARAMETER_TYPES: dict[str, type] = {
    "string": str,
    "integer": int,
    "number": float,
    "boolean": bool,
    "array": list,
    "object": dict,
}
#: Methods of the environment that are not tools (TRL's episode hooks).
EPISODE_METHODS = ("reset", "get_reward")


class _Unset:
    """The default of an optional tool parameter: the argument is not sent."""

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()


class WorkplaceEnvironment(SyncOnly):
    """One rollout slot: ``reset(**row)`` seeds a typed session for the row's task, the tool
    methods call it, ``get_reward()`` verifies the calls made and closes it. Built with its
    tools by :func:`trl_environment`.

    An episode left before ``get_reward()`` (the slot reset to a new one, its ``with`` block
    ended, the slot dropped) has its session closed unscored, best effort, with a
    :class:`~workplace_env_client.errors.SessionLeftOpenWarning` saying so
    (:meth:`RowEpisode.abandon`)."""

    client: EnvironmentClient

    def __init__(self) -> None:
        self._episode: RowEpisode | None = None
        #: The last ``get_reward()``'s verify answer (None before the first).
        self.verify_result: VerifyResult | None = None

    def reset(self, **row: Any) -> None:
        """Start an episode on the dataset row (``id, ground_truth, prompt, ...``; TRL passes
        every column), after closing an episode still open (a SessionLeftOpenWarning). Returns
        None: the row's prompt already holds the task. Raises ArgumentError for a malformed
        row before anything else (an open episode stays open, as it was), and the seed's
        errors (nothing left open)."""
        why = "reset to a new episode before get_reward()"
        # the warning points at the user's reset(): past start() and reset()
        replacing = partial(self._abandon, why, stacklevel=4)
        self._episode = RowEpisode.start(self.client, row, before_seed=replacing)

    def get_reward(self) -> float:
        """Verify the episode's calls (0.0 or 1.0; a masked ``session_lost`` sample is 0.0),
        keep the answer in :attr:`verify_result`, close the session (a server out of reach at
        the close is a SessionLeftOpenWarning, never hiding the reward). Raises RuntimeError
        when no episode is open (``reset`` first)."""
        episode, self._episode = self._open_episode(), None
        self.verify_result = episode.verify_and_close()
        return self.verify_result.reward

    _usage = "with WorkplaceEnvironment(...) as environment:"
    _counterpart = "it has no asyncio form: call it through asyncio.to_thread"

    def __enter__(self) -> WorkplaceEnvironment:
        return self

    def __exit__(self, _type: object, in_flight: BaseException | None, _tb: object) -> None:
        self._abandon("its environment's with block ended before get_reward()", in_flight)

    def _open_episode(self) -> RowEpisode:
        if self._episode is None:
            raise RuntimeError("no episode is open on this environment: call reset(**row) first")
        return self._episode

    def _call(self, name: str, arguments: Mapping[str, Any]) -> str:
        """Call ``name`` on the open episode; return its JSON output text."""
        return self._open_episode().call(name, arguments)

    def _abandon(
        self, why: str, in_flight: BaseException | None = None, stacklevel: int = 3
    ) -> None:
        """Close the open episode, if any, as left unfinished (``why``); the slot then holds
        none, whatever the close did (:meth:`RowEpisode.abandon`). ``stacklevel``: the
        warning's frame counted from here (3: the caller's caller, the user's ``with``)."""
        episode, self._episode = self._episode, None
        if episode is not None:
            episode.abandon(why, in_flight, stacklevel=stacklevel)


def tool_docstring(tool: Mapping[str, Any]) -> str:
    """The Google docstring ``get_json_schema`` reads ``tool``'s descriptions from."""
    lines = [tool["description"]]
    properties = tool["parameters"]["properties"]
    if properties:
        lines += ["", "Args:"]
        lines += [f"    {name}: {spec['description']}" for name, spec in properties.items()]
    return "\n".join(lines)


def tool_method(tool: Mapping[str, Any]) -> Callable[..., str]:
    """The method calling ``tool`` (a ListTools schema): keyword parameters typed and
    documented as the schema says, optional ones defaulting to :data:`UNSET`."""
    name = tool["name"]
    schema = tool["parameters"]
    required = set(schema.get("required", ()))

    def method(self: WorkplaceEnvironment, **arguments: Any) -> str:
        return self._call(name, {k: v for k, v in arguments.items() if v is not UNSET})

    parameters = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    annotations: dict[str, Any] = {}
    for parameter, spec in schema["properties"].items():
        annotations[parameter] = PARAMETER_TYPES[spec["type"]]
        default = inspect.Parameter.empty if parameter in required else UNSET
        parameters.append(
            inspect.Parameter(
                parameter,
                inspect.Parameter.KEYWORD_ONLY,
                default=default,
                annotation=annotations[parameter],
            )
        )
    method.__name__ = method.__qualname__ = name
    method.__doc__ = tool_docstring(tool)
    method.__annotations__ = annotations
    method.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    return method


def trl_environment(
    client: EnvironmentClient, tools: list[dict[str, Any]] | None = None
) -> type[WorkplaceEnvironment]:
    """The ``environment_factory`` class for ``client``'s server: a
    :class:`WorkplaceEnvironment` whose instances share ``client`` and carry one method per
    tool of ``tools`` (default: ``client.list_tools()``, one ListTools). Raises ValueError for
    a tool named like an episode method; the RPC's errors."""
    tools = client.list_tools() if tools is None else tools
    methods: dict[str, Any] = {"client": client}
    for tool in tools:
        if tool["name"] in EPISODE_METHODS or tool["name"].startswith("_"):
            raise ValueError(f"tool name {tool['name']!r} collides with the environment's own")
        methods[tool["name"]] = tool_method(tool)
    return type("WorkplaceEnvironment", (WorkplaceEnvironment,), methods)
