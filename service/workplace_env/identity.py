"""Identities and task data of the domain, and their validation (docs/contract.md "Identities", S5).

Plain frozen dataclasses; the gRPC layer converts messages into these and the session store
works only with them.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from functools import cached_property

from workplace_env.errors import FieldViolation, InvalidRequest, closest
from workplace_env.sandbox.tools import TOOLS
from workplace_env.wire import is_json_text
from workplace_env_client.id_bounds import MAX_ID_CHARS, id_length_problem

SESSION_ID_RE = re.compile(rf"[A-Za-z0-9._:-]{{1,{MAX_ID_CHARS}}}")
#: A rollout id's characters; its length is bounded apart (:func:`episode_violations`).
ROLLOUT_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
ENVIRONMENT_NAME = "workplace_assistant"


@dataclass(frozen=True)
class EpisodeId:
    """One attempt of one rollout: ``rollout_id`` (ROLLOUT_ID_RE) and ``attempt >= 0``."""

    rollout_id: str
    attempt: int


@dataclass(frozen=True)
class TaskId:
    """One task of one task set; both parts non-empty."""

    taskset: str
    task_id: str


@dataclass(frozen=True)
class FunctionCall:
    """A tool name and its arguments as JSON text (as the model produced them)."""

    name: str
    arguments: str


@dataclass(frozen=True)
class Task:
    """A workplace task: dataset id, category, ground-truth calls (``()``: change nothing)."""

    id: str
    category: str = ""
    environment_name: str = ENVIRONMENT_NAME
    ground_truth: tuple[FunctionCall, ...] = ()
    prompt: str = field(default="", compare=False)
    system: str = field(default="", compare=False)
    data_digest: str = ""  # of the dataset row (the proto's WorkplaceTask.data_digest)

    @cached_property
    def violations(self) -> tuple[FieldViolation, ...]:
        """Violations of the task data, each field named from the task (``environment_name``,
        ``ground_truth[0].name``). Worked out on first use and kept, as the task is immutable:
        a remembered task seeded again is not checked again. Not a field: equality, hashing and
        ``asdict`` ignore it."""
        found: list[FieldViolation] = []
        if self.environment_name and self.environment_name != ENVIRONMENT_NAME:
            found.append(
                FieldViolation("environment_name", f"must be {ENVIRONMENT_NAME!r} when set")
            )
        found.extend(calls_violations(self.ground_truth, "ground_truth"))
        return tuple(found)

    @cached_property
    def digest(self) -> bytes:
        """BLAKE2b (16 bytes) of the task's canonical JSON: the fields a verify scores and a
        checkpoint keeps (id, category, environment name, ground-truth calls, the row's
        digest when set), not the prompt. S2/S3, K4: a seed is a retry only when it carries
        the same task. Worked out once and kept (a remembered task is seeded again and
        again); not a field: equality, hashing and ``asdict`` ignore it."""
        canonical = [
            self.id,
            self.category,
            self.environment_name,
            [[call.name, call.arguments] for call in self.ground_truth],
        ]
        if self.data_digest:  # the whole row's (S3: the same identity with another row conflicts)
            canonical.append(self.data_digest)
        return hashlib.blake2b(json.dumps(canonical).encode(), digest_size=16).digest()


def session_id_violations(
    session_id: str, path: str = "resources_session_id"
) -> list[FieldViolation]:
    """Violations of the session-id rule: 1..256 characters of ``[A-Za-z0-9._:-]``."""
    if not session_id:
        return [FieldViolation(path, "required")]
    if not SESSION_ID_RE.fullmatch(session_id):
        return [FieldViolation(path, f"must be 1..{MAX_ID_CHARS} characters of [A-Za-z0-9._:-]")]
    return []


def call_id_violations(call_id: str, path: str = "call_id") -> list[FieldViolation]:
    """Violations of the call_id bound: at most
    :data:`~workplace_env_client.id_bounds.MAX_ID_CHARS` characters, the problem text of
    :func:`~workplace_env_client.id_bounds.id_length_problem` (empty means "no call_id" on
    CallTool; a caller checks presence where it is required)."""
    if (too_long := id_length_problem(call_id)) is not None:
        return [FieldViolation(path, too_long)]
    return []


def episode_violations(episode: EpisodeId | None, path: str = "episode_id") -> list[FieldViolation]:
    """Violations of the episode rule (CONTRACT "Identities"): ``rollout_id`` of at most
    :data:`~workplace_env_client.id_bounds.MAX_ID_CHARS` characters matching
    :data:`ROLLOUT_ID_RE`, ``attempt >= 0``."""
    if episode is None:
        return [FieldViolation(path, "required")]
    out = []
    rollout_id = episode.rollout_id
    if (too_long := id_length_problem(rollout_id)) is not None:
        out.append(FieldViolation(f"{path}.rollout_id", too_long))
    elif not ROLLOUT_ID_RE.fullmatch(rollout_id):
        out.append(FieldViolation(f"{path}.rollout_id", "must match ^[A-Za-z0-9][A-Za-z0-9._-]*$"))
    if episode.attempt < 0:
        out.append(FieldViolation(f"{path}.attempt", "must be >= 0"))
    return out


def task_id_violations(task_id: TaskId | None, path: str = "task_id") -> list[FieldViolation]:
    """Violations of the task-id rule: ``taskset`` and ``task_id`` non-empty."""
    if task_id is None:
        return [FieldViolation(path, "required")]
    out = []
    if not task_id.taskset:
        out.append(FieldViolation(f"{path}.taskset", "required"))
    if not task_id.task_id:
        out.append(FieldViolation(f"{path}.task_id", "required"))
    return out


def calls_violations(calls: tuple[FunctionCall, ...], path: str) -> list[FieldViolation]:
    """Violations in a seeded task's calls: each needs the name of one of the environment's
    tools (:func:`tool_name_problem`) and JSON-text arguments."""
    out = []
    for i, call in enumerate(calls):
        if not call.name:
            out.append(FieldViolation(f"{path}[{i}].name", "required"))
        elif problem := tool_name_problem(call.name):
            out.append(FieldViolation(f"{path}[{i}].name", problem))
        # JSON by the reference's parser's grammar: an integer over Python's digit limit is
        # accepted here and skipped when scoring, as the reference skips that call.
        if not is_json_text(call.arguments):
            out.append(FieldViolation(f"{path}[{i}].arguments", "must be JSON text"))
    return out


def tool_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a seeded task's ground-truth call (None when it is one of the
    environment's tools): ``'x' is not a tool of this environment``, naming the closest tool
    when one is close. Seeds only: a verify's ground-truth override is scored as given."""
    if name in TOOLS:
        return None
    close = closest(name, TOOLS)
    hint = f"; did you mean {close!r}?" if close else ""
    return f"{name!r} is not a tool of this environment{hint}"


def task_violations(task: Task | None, path: str = "task") -> list[FieldViolation]:
    """Violations of the task data under ``path``: present, for this environment, with
    well-formed calls (:attr:`Task.violations`)."""
    if task is None:
        return [FieldViolation(path, "required")]
    found = task.violations
    if not found:
        return []
    return [FieldViolation(f"{path}.{v.field}", v.description) for v in found]


def check_seed(
    session_id: str, episode: EpisodeId | None, task_id: TaskId | None, task: Task | None
) -> None:
    """Raise :class:`InvalidRequest` with every violation of a seed request (CONTRACT S5)."""
    violations = [
        *session_id_violations(session_id),
        *episode_violations(episode),
        *task_id_violations(task_id),
        *task_violations(task),
    ]
    if violations:
        raise InvalidRequest(violations, session_id)
