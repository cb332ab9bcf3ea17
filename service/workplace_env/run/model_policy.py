"""``workplace-env run --policy model``: collect model rollouts into a file, resumably.

Each (task, rollout index) pair is one episode played by :func:`workplace_env_client.run_rollout`
(the SDK's model loop) with ``concurrency`` episodes in flight. Lines are appended to the
rollouts JSONL as episodes finish, next to NeMo Gym's materialized inputs
(:mod:`workplace_env.run.rollout_files`), so NeMo Gym can train on the file or re-verify it.

Resume: a rerun of the same plan (:mod:`workplace_env.run.plan`) with the same output file keeps
the lines of finished episodes (:func:`~workplace_env.run.rollout_files.is_finished`) and plays
only the others; every line records the plan, the sandbox and the endpoint under
``workplace_env`` (a rerun through another ``--base-url`` is the same plan). A line
that cannot be strict JSON is replaced by the model's failure (``agent_run_error``). An
endpoint that refuses a request for its configuration
(:data:`~workplace_env_client.rollouts.MODEL_CONFIG_ERROR`) stops the collection: no episode
starts after it.

Rows are kept as sent, their values' JSON types included (an ``id`` of ``0`` stays ``0``); the
case id (``case_id``, else ``id``, else ``line-<n>``) only names the episode's rollout and task
ids.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workplace_env.interrupts import StopRequest
from workplace_env.run.plan import check_plan, input_digest, run_plan
from workplace_env.run.rollout_files import (
    json_line,
    materialized_inputs_path,
    output_files,
    read_finished,
    rollout_key,
    write_lines,
)
from workplace_env.run.scripted import case_id_of
from workplace_env_client import (
    EnvironmentClient,
    ModelCallsStopped,
    ModelPolicy,
    Rollout,
    WorkplaceEnvError,
    create_params_for,
    run_rollout,
)
from workplace_env_client.rollouts import (
    ENVIRONMENT_ERROR,
    MODEL_CONFIG_ERROR,
    episode_for,
    failed_rollout,
)


@dataclass
class CollectResult:
    """What a collection did: episodes played now, skipped as already finished, interrupted by
    a stop (started, their next model request refused, unwritten), in total (the others were
    not started: a stop, a configuration error); ``keys`` identify this run's episodes among
    the file's lines (:func:`~workplace_env.run.rollout_files.read_rollouts`)."""

    played: int
    skipped: int
    total: int
    keys: frozenset[tuple[int, int, str]]
    #: Why the endpoint refused a model request for its configuration (the first such
    #: episode's reason); no episode started after it. None when none was refused so.
    config_error: str | None = None
    #: Episodes started, then left by a stop before their end (no line written; a resume
    #: plays them).
    interrupted: int = 0

    @property
    def not_started(self) -> int:
        """Episodes of the plan neither played now, kept nor interrupted (a stop, a
        configuration error)."""
        return self.total - self.played - self.skipped - self.interrupted


def collect_rollouts(
    client: EnvironmentClient,
    model_client: Any,
    rows: Sequence[Mapping[str, Any]],
    policy: ModelPolicy,
    out: Path,
    *,
    repeats: int = 1,
    concurrency: int = 1,
    overwrite: bool = False,
    sampling: Mapping[str, Any] | None = None,
    base_url: str | None = None,
    sandbox: Mapping[str, Any] | None = None,
    on_start: Callable[[int], None] | None = None,
    on_done: Callable[[dict[str, Any]], None] | None = None,
    stop: Callable[[], bool] | None = None,
) -> CollectResult:
    """Play every (row, rollout index < ``repeats``) not finished in ``out``; append each line.

    ``sampling`` (temperature, top_p, max_output_tokens, seed) overrides each row's
    ``responses_create_params`` as NeMo Gym's ``responses_create_params`` overrides do;
    ``sandbox`` (``{"digest", "origin"}``, None: unknown) goes into the plan
    (:func:`~workplace_env.run.plan.run_plan`) with the policy and the server's tools; every
    line records the plan, the sandbox and ``base_url`` (the endpoint, no part of the plan)
    under ``workplace_env``. ``on_start(n)`` gets the
    number of episodes to play, ``on_done(line)`` each written line; once ``stop()`` is true no
    further episode starts (those in flight end and are written, but for one whose next model
    request a stoppable client refuses: :class:`ModelCallsStopped`, counted ``interrupted`` and
    left to a resume). A
    :class:`~workplace_env.interrupts.StopRequest` ``stop`` is also raised when an episode is
    masked ``workplace_env:environment_error`` and the server does not answer a health check
    (:meth:`~workplace_env.interrupts.StopRequest.check_server`). Raises
    :class:`~workplace_env.run.plan.PlanMismatch` (nothing played or written) when the existing
    files hold another plan (:func:`~workplace_env.run.plan.check_plan`), unless ``overwrite``
    deletes them (:func:`~workplace_env.run.rollout_files.output_files`); :class:`OSError` when
    a file cannot be written.
    """
    tools = client.list_tools()
    overrides = dict(sampling or {})
    plan = run_plan(policy, tools, overrides, sandbox=sandbox)
    pairs = [
        (task_index, rollout_index, dict(row))
        for task_index, row in enumerate(rows)
        for rollout_index in range(repeats)
    ]
    inputs = []
    for task_index, rollout_index, row in pairs:
        inputs.append(
            {
                **row,
                "responses_create_params": create_params_for(row, tools) | overrides,
                "_ng_task_index": task_index,
                "_ng_rollout_index": rollout_index,
            }
        )
    digests = {(i["_ng_task_index"], i["_ng_rollout_index"]): input_digest(i) for i in inputs}
    if overwrite:
        for path in output_files(out):
            path.unlink(missing_ok=True)
    else:
        check_plan(out, inputs, plan)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_lines(materialized_inputs_path(out), inputs)
    finished = read_finished(out)
    done_keys = {rollout_key(line) for line in finished}
    todo = [i for i in inputs if rollout_key(i) not in done_keys]
    write_lines(out, finished)  # drops the lines about to be played again
    if on_start is not None:
        on_start(len(todo))
    lock = threading.Lock()

    played: list[int] = []
    interrupted: list[int] = []
    config_errors: list[str] = []  # the first; no episode starts after it

    def one(item: dict[str, Any]) -> None:
        if config_errors or (stop is not None and stop()):
            return
        row = {
            k: v
            for k, v in item.items()
            if k not in ("responses_create_params", "_ng_task_index", "_ng_rollout_index")
        }
        task_index, rollout_index = item["_ng_task_index"], item["_ng_rollout_index"]
        params = item["responses_create_params"]
        case = case_id_of(row, task_index + 1)
        try:
            rollout = run_rollout(
                client,
                model_client,
                {**row, "responses_create_params": params},
                policy,
                tools=tools,
                episode=episode_for({"id": case}, rollout_index),
                task_id=("model", case),
            )
        except ModelCallsStopped:  # a stop refused its next model request: played on resume
            with lock:
                interrupted.append(1)
            return
        except WorkplaceEnvError as exc:  # seed or close refused: masked, played again on resume
            rollout = failed_rollout(
                {**row, "responses_create_params": params},
                params,
                policy,
                ENVIRONMENT_ERROR,
                f"{type(exc).__name__}: {exc}",
            )
        line = _stamped(rollout, task_index, rollout_index)
        try:
            text = json_line(line)
        except ValueError as exc:  # not strict JSON: the model's failure, its answer left out
            why = f"the rollout line cannot be written as strict JSON: {exc}"
            rollout = failed_rollout(rollout.row, params, policy, "agent_run_error", why)
            line = _stamped(rollout, task_index, rollout_index)
            text = json_line(line)
        with lock:
            with out.open("a", encoding="utf-8") as fh:
                fh.write(text)
            played.append(1)
            if rollout.failure_kind == MODEL_CONFIG_ERROR and not config_errors:
                config_errors.append(str(rollout.failure_reason))
        if rollout.failure_kind == ENVIRONMENT_ERROR and isinstance(stop, StopRequest):
            stop.check_server(client.channel)
        if on_done is not None:
            on_done(line)

    def _stamped(rollout: Rollout, task_index: int, rollout_index: int) -> dict[str, Any]:
        line = rollout.to_json(task_index, rollout_index)
        line["workplace_env"]["input_sha256"] = digests[(task_index, rollout_index)]
        line["workplace_env"]["plan"] = plan
        line["workplace_env"]["sandbox"] = sandbox
        line["workplace_env"]["base_url"] = base_url
        return line

    with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
        for future in [pool.submit(one, item) for item in todo]:
            future.result()
    return CollectResult(
        played=len(played),
        skipped=len(inputs) - len(todo),
        total=len(inputs),
        keys=frozenset(rollout_key(i) for i in inputs),
        config_error=config_errors[0] if config_errors else None,
        interrupted=len(interrupted),
    )
