"""The plan of a model run: what makes two collections into one ``--out`` the same experiment.

The plan is the list of materialized inputs (each row as sent with its request, the sampling
overrides merged into its ``responses_create_params`` as NeMo Gym merges them, and its task and
rollout indices) and the run's own settings (:func:`run_plan`: model, API, sampling, max turns,
the sandbox's digest and the server's tools); each rollout line records the SHA-256 of its
input's canonical JSON (``workplace_env.input_sha256``) and the settings
(``workplace_env.plan``). How the model and the server are reached (``--base-url``, the key,
``--timeout``, ``--max-retries``, ``--concurrency``, ``--target``) is no part of the plan: a
rerun through another endpoint resumes the same experiment. When the existing files describe
another plan (another setting, other rows at the same indices, other ``repeats``, another
count, or lines without that digest), :func:`check_plan` raises :class:`PlanMismatch` naming
what changed: the rollouts, materialized inputs, summary and plot always describe the same
episodes.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from workplace_env.plurals import counted, some_of
from workplace_env.run.rollout_files import (
    json_values,
    materialized_inputs_path,
    output_files,
    own_rollout_lines,
)
from workplace_env_client import ModelPolicy
from workplace_env_client.rows import RunPlan


class PlanMismatch(ValueError):
    """The output files hold rollouts of another plan; the message names the file, how many
    lines differ and the way out (a new ``--out`` or ``--overwrite``)."""


def input_digest(item: Mapping[str, Any]) -> str:
    """SHA-256 (hex) of a materialized input's canonical JSON (sorted keys, no spaces): the row
    as sent, its ``responses_create_params`` and its ``_ng_task_index``/``_ng_rollout_index``."""
    text = json.dumps(item, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _line_digest(line: Mapping[str, Any]) -> Any:
    diagnostics = line.get("workplace_env")
    return diagnostics.get("input_sha256") if isinstance(diagnostics, Mapping) else None


#: Keys a recorded plan may hold that say how the model was reached, not what was measured:
#: never compared, so lines that record them resume under any endpoint.
TRANSPORT_KEYS = frozenset({"base_url"})


def plan_changes(recorded: Any, plan: Mapping[str, Any]) -> list[str]:
    """What differs between a rollout line's recorded plan and ``plan``: ``"key: old -> new"``
    per differing key, :data:`TRANSPORT_KEYS` left out (a line that records no plan:
    ``"plan: none recorded"``)."""
    if not isinstance(recorded, Mapping):
        return ["plan: none recorded"]
    keys = [*plan, *(k for k in recorded if k not in plan and k not in TRANSPORT_KEYS)]
    return [
        f"{key}: {json.dumps(recorded.get(key))} -> {json.dumps(plan.get(key))}"
        for key in keys
        if recorded.get(key) != plan.get(key)
    ]


def check_plan(
    out: Path, inputs: Sequence[Mapping[str, Any]], plan: Mapping[str, Any] | None = None
) -> None:
    """Raise :class:`PlanMismatch` unless every existing line of ``out`` and of its materialized
    inputs belongs to the plan ``inputs``: the inputs file identical line for line, each rollout
    line carrying the digest of the input at its (task, rollout) indices and (when given) the
    run-level ``plan`` (:func:`run_plan`). The message names what changed. Raises
    :class:`~workplace_env.run.rollout_files.NotRolloutsFile` first when ``out`` is no rollouts
    file."""
    digests = [input_digest(i) for i in inputs]
    changes: dict[str, None] = {}
    want = {
        (i["_ng_task_index"], i["_ng_rollout_index"]): d
        for i, d in zip(inputs, digests, strict=True)
    }
    found: list[str] = []
    materialized = materialized_inputs_path(out)
    if materialized.exists():
        old = json_values(materialized)
        differing = [
            (number, line)
            for number, (line, digest) in enumerate(zip(old, digests, strict=False), 1)
            if not isinstance(line, dict) or input_digest(line) != digest  # the common lines
        ]
        common = min(len(old), len(digests))
        if len(old) != len(digests):
            found.append(
                f"{materialized.name} records {counted(len(old), 'line')}, this run has"
                f" {counted(len(digests), 'episode')} ("
                f"{some_of(len(differing), common, 'common line', 'differs', 'differ')}"
                f"{_named_lines(differing)})"
            )
        elif differing:
            found.append(
                f"{some_of(len(differing), len(old), 'line', 'differs', 'differ')} in "
                f"{materialized.name}{_named_lines(differing)}"
            )
    if out.exists():
        lines = own_rollout_lines(out)
        differing = [
            (number, line)
            for number, line in enumerate(lines, 1)
            # the plan first: every line's changes are named
            if (plan is not None and bool(_note_changes(line, plan, changes)))
            or want.get((line.get("_ng_task_index"), line.get("_ng_rollout_index")))
            != _line_digest(line)
            or _line_digest(line) is None
        ]
        if differing:
            found.append(
                f"{some_of(len(differing), len(lines), 'line', 'differs', 'differ')} in "
                f"{out.name}{_named_lines(differing)}"
            )
    if found:
        changed = f" (changed: {'; '.join(list(changes)[:6])})" if changes else ""
        where = "./" if out.parent == Path() else f"{out.parent}/"
        raise PlanMismatch(
            f"{out} holds rollouts of another plan (another model, API, sampling, "
            f"--max-turns, sandbox or tool set, other rows at the same indices, other --repeats "
            f"or another count){changed}: {'; '.join(found)}; nothing played. Use a new --out, "
            f"or --overwrite to delete this --out's files in {where} "
            f"({', '.join(p.name for p in output_files(out))}) and start again."
        )


#: How many differing lines a refused plan names.
NAMED_LINES = 5


def _named_lines(differing: Sequence[tuple[int, Any]]) -> str:
    """``": line 2 (id "b"), line 4"``: the first :data:`NAMED_LINES` of ``differing``
    (``(non-blank line number, its JSON value)``), each with its ``id`` when it has one, and
    how many more; ``""`` for none."""
    if not differing:
        return ""
    named = []
    for number, line in differing[:NAMED_LINES]:
        case = line.get("id") if isinstance(line, Mapping) else None
        named.append(f"line {number}" + (f" (id {json.dumps(case)})" if case is not None else ""))
    more = len(differing) - NAMED_LINES
    return ": " + ", ".join(named) + (f" and {more} more" if more > 0 else "")


def _note_changes(line: Any, plan: Mapping[str, Any], changes: dict[str, None]) -> list[str]:
    diagnostics = line.get("workplace_env") if isinstance(line, Mapping) else None
    recorded = diagnostics.get("plan") if isinstance(diagnostics, Mapping) else None
    found = plan_changes(recorded, plan)
    changes.update(dict.fromkeys(found))
    return found


def run_plan(
    policy: ModelPolicy,
    tools: Sequence[Mapping[str, Any]],
    sampling: Mapping[str, Any],
    *,
    sandbox: Mapping[str, Any] | None,
) -> RunPlan:
    """What makes two collections the same experiment beyond their rows (each rollout line
    records it as ``workplace_env.plan``): ``model``, ``api``, ``sampling`` (the
    ``responses_create_params`` overrides given: temperature, top_p, max_output_tokens, seed),
    ``max_turns``, the ``sandbox`` digest (None: unknown) and ``tools_sha256`` (SHA-256 of the
    server's tool schemas' canonical JSON). The endpoint is not in it (each line records its
    own as ``workplace_env.base_url``)."""
    tools_text = json.dumps(list(tools), sort_keys=True, separators=(",", ":"))
    return {
        "model": policy.model,
        "api": policy.api,
        "sampling": dict(sampling),
        "max_turns": policy.max_turns,
        "sandbox": sandbox.get("digest") if sandbox else None,
        "tools_sha256": hashlib.sha256(tools_text.encode("utf-8")).hexdigest(),
    }
