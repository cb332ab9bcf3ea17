"""The JSON rows a user reads, typed: rollout lines, run summaries and their parts.

* :class:`RolloutLine`: what :meth:`~workplace_env_client.rollouts.Rollout.to_json` adds to a
  task row (NeMo Gym's rollout fields and our ``workplace_env`` diagnostics): a line of the
  rollouts JSONL that ``workplace-env run --policy model`` writes;
* :class:`ModelRunSummary`: the summary JSON next to those rollouts, a
  :class:`CategoryFigures` per category then ``all``;
* :class:`RunTotals`: the ``--json-out`` document of ``run`` with a scripted policy.

Each field is ``Annotated`` with what it holds; ``docs/reference/rows.md`` is generated from
them (:data:`ROWS`, in that page's order). The module keeps its annotations evaluated (no
``from __future__ import annotations``) so that ``NotRequired`` fields are known as such.
"""

from typing import Annotated, Any, NotRequired, TypedDict


class SandboxIdentity(TypedDict):
    """The sandbox the episodes were played on."""

    digest: Annotated[str, "`sha256:<hex>` of the sandbox's base tables"]
    origin: Annotated[
        str, "a data directory, or `generated:seed=<seed>,scale=<scale>` for a generated one"
    ]


class TableResult(TypedDict):
    """One table compared by Verify."""

    table: Annotated[str, "the table's key (`email._emails`, ...)"]
    equal: Annotated[bool, "whether the episode's end state equals the expected one"]
    predicted_rows: Annotated[int, "rows at the episode's end"]
    expected_rows: Annotated[int, "rows after the ground-truth calls"]


class RunPlan(TypedDict):
    """What makes two collections the same experiment beyond their rows; a rerun into the same
    `--out` with another plan is refused (the endpoint, key, timeouts, retries and concurrency
    are not in it: a rerun with other ones resumes)."""

    model: Annotated[str, "the model name sent to the endpoint"]
    api: Annotated[str, "`responses` or `chat`"]
    sampling: Annotated[
        dict[str, Any], "the sampling overrides given: temperature, top_p, max_output_tokens, seed"
    ]
    max_turns: Annotated[int, "model calls per episode at most"]
    sandbox: Annotated[str | None, "the sandbox's digest (null: the server does not say)"]
    tools_sha256: Annotated[str, "SHA-256 of the server's tool schemas' canonical JSON"]


class RolloutDiagnostics(TypedDict):
    """A rollout line's `workplace_env` object: what the episode did."""

    turns: Annotated[int, "model calls made"]
    tool_calls: Annotated[int, "function calls the model made"]
    invalid_tool_calls: Annotated[
        int, "of them, those refused by the environment or never run (arguments not JSON, cut off)"
    ]
    tables: Annotated[list[TableResult], "Verify's comparison per table (empty: no Verify)"]
    seconds: Annotated[float, "wall time of the episode, 4 decimals"]
    input_sha256: NotRequired[
        Annotated[str, "`run` only: SHA-256 of the episode's materialized input line"]
    ]
    plan: NotRequired[Annotated[RunPlan, "`run` only: the collection's plan"]]
    sandbox: NotRequired[
        Annotated[SandboxIdentity | None, "`run` only: the sandbox (null: unknown)"]
    ]
    base_url: NotRequired[
        Annotated[str | None, "`run` only: the model endpoint's OpenAI-compatible root"]
    ]


class RolloutLine(TypedDict):
    """The fields a rollout adds to its task row (the row's own fields, `id`, `category`,
    `ground_truth`, ..., come first): NeMo Gym's rollout line and `workplace_env`."""

    responses_create_params: Annotated[
        dict[str, Any], "the request sent to the model: input, tools and sampling parameters"
    ]
    response: Annotated[dict[str, Any], "the Responses-API response: the accumulated output"]
    reward: Annotated[float, "Verify's reward, 0.0 when masked"]
    mask_sample: Annotated[bool, "true: no score (left out of every rate)"]
    failure_kind: Annotated[str | None, "why the episode is masked or failed (null: it was not)"]
    failure_reason: Annotated[str | None, "the failure in words"]
    _ng_task_index: Annotated[int, "the task's index in the input file, from 0"]
    _ng_rollout_index: Annotated[int, "the rollout's index among the task's repeats, from 0"]
    workplace_env: Annotated[RolloutDiagnostics, "our diagnostics"]


class CategoryFigures(TypedDict):
    """One category's figures in a model run's summary (a rate over none is null)."""

    category: Annotated[str, "the category without `workplace_assistant_`, or `all`"]
    episodes: Annotated[int, "episodes in all"]
    masked: Annotated[int, "masked by the endpoint or the environment: left out of every rate"]
    model_failures: Annotated[int, "the model's own failures (`agent_run_error`): failed"]
    passed: Annotated[int, "episodes with reward 1.0"]
    pass_rate: Annotated[float | None, "passed / (episodes - masked)"]
    mean_turns: Annotated[float, "model calls per episode"]
    tool_calls: Annotated[int, "function calls the model made"]
    tool_call_validity: Annotated[float | None, "share of those calls that ran"]
    side_effect_rate: Annotated[
        float | None, "share of scored episodes ending with a table no ground-truth call writes"
    ]


class ModelRunSummary(TypedDict):
    """The summary JSON of `run --policy model`, next to its rollouts."""

    sandbox: Annotated[SandboxIdentity | None, "the sandbox played on (null: unknown)"]
    categories: Annotated[list[CategoryFigures], "each category's figures, then `all`"]


class MismatchRow(TypedDict):
    """One disagreement with a recording, or one episode that failed."""

    case_id: Annotated[str, "the line's `case_id`, else `id`, else `line-<n>`"]
    kind: Annotated[str, "`output`, `state`, `reward`, or the failure's kind"]
    detail: Annotated[str, "what differs or why the episode failed"]
    expected: Annotated[Any, "the recorded value (null for a failure)"]
    actual: Annotated[Any, "the value the server answered (null for a failure)"]


class RunTotals(TypedDict):
    """The `--json-out` document of `run` with a scripted policy."""

    episodes: Annotated[int, "lines started: played_episodes plus every failed one"]
    played_episodes: Annotated[int, "played to the end and scored"]
    mean_reward: Annotated[float | None, "over the played episodes (null: none played)"]
    output_mismatches: Annotated[int, "tool outputs differing from the recording"]
    state_mismatches: Annotated[int, "tables differing from the recorded `tables_after`"]
    reward_mismatches: Annotated[int, "rewards differing from the recorded one"]
    failed_episodes: Annotated[dict[str, int], "episodes not played to the end, by failure kind"]
    not_started: Annotated[int, "lines never started: the run was stopped before their turn"]
    episodes_per_s: Annotated[float, "episodes started per second of the run"]
    mismatches: Annotated[list[MismatchRow], "the first 20 mismatches and failures"]
    sandbox: NotRequired[Annotated[SandboxIdentity | None, "the sandbox (null: unknown)"]]


#: The typed rows, in the order of the generated reference page.
ROWS: tuple[type, ...] = (
    RolloutLine,
    RolloutDiagnostics,
    TableResult,
    RunPlan,
    SandboxIdentity,
    ModelRunSummary,
    CategoryFigures,
    RunTotals,
    MismatchRow,
)
