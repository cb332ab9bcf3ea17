"""``run``'s scripted episodes: played through the gRPC API, checked against recordings.

One episode per JSONL line, all through the SDK: seed the line's task, make the policy's calls
with ``CallTool``, ``Verify`` those calls, ``CloseSession``. Accepts every file of the shared
data as it is:

* tasks (``tasks_public.jsonl``, ``workbench_original_tasks_public.jsonl``, generated tasks):
  ``id``, ``ground_truth``;
* rollouts and verify cases: ``function_calls``, ``ground_truth``, ``reward``;
* tool-call goldens: ``calls`` with each recorded ``output`` (``http_status`` marks a body the
  reference refused, which must get INVALID_ARGUMENT here; ``unstable_ties`` marks pages whose
  tied items may come in either order), and ``tables_after``: each table's rows and hash after
  the calls, compared (recorded policy) through the admin export of the session before it is
  verified (goldens README, :func:`workplace_env.parity.table_digest`).

Policies: ``recorded`` makes the line's recorded calls (:func:`recorded_source`:
``function_calls``, else ``calls``, else the top-level ``function_call`` items of a rollout's
``response.output``, in order, as Verify takes them); ``oracle`` makes its ``ground_truth``;
``perturbed`` drops or alters one ground-truth call (a policy that should score below 1.0).

An episode that cannot be played to the end is a *failure*, counted apart from the mismatches
by kind (:data:`FAILURE_KINDS`): the server unavailable (or past its deadline), at one of its
capacity limits, refusing the admin export a ``tables_after`` check needs (no or a wrong admin
token), the session lost under the episode (a call, the export or the verify found it gone), a
line that is not a valid episode (:class:`LineError`, named by line number and the file's own
field names), or another error. Only a comparison of what the server answered with what was
recorded is a mismatch: an infrastructure error never is.
"""

from __future__ import annotations

import json
import random
import re
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from workplace_env.errors import clip
from workplace_env.identity import task_violations, tool_name_problem
from workplace_env.interrupts import StopRequest
from workplace_env.jsonl import episode_problem
from workplace_env.parity import outputs_match, state_digests, state_mismatches
from workplace_env.sandbox.tables import TABLE_KEYS
from workplace_env.server import convert
from workplace_env_client import (
    ArgumentError,
    EnvironmentClient,
    InvalidRequestError,
    SessionHeaderMismatchError,
    UnauthenticatedError,
    WorkplaceEnvError,
    checks,
    reasons,
)
from workplace_env_client.errors import close_failed, may_have_run
from workplace_env_client.messages import task_from_row
from workplace_env_client.rows import RunTotals

POLICIES = ("recorded", "oracle", "perturbed")
#: Why an episode failed (the ``--json-out`` ``failed_episodes`` keys), and how it is shown.
FAILURE_KINDS = {
    reasons.RUN_SERVER_UNAVAILABLE: "server unavailable",
    reasons.RUN_SERVER_CAPACITY: "server at a capacity limit",
    reasons.RUN_ADMIN_UNAUTHENTICATED: "admin export refused: admin token missing or wrong",
    reasons.RUN_SESSION_LOST: "session lost",
    "invalid_input": "invalid input line",
    reasons.RUN_ERROR: "error",
}
_UNSAFE_ID_CHARS = re.compile(r"[^A-Za-z0-9._-]")
#: At most this many bytes of each value a mismatch line shows.
SHOWN_VALUE_BYTES = 120


@dataclass(frozen=True)
class Mismatch:
    """One disagreement with a recording: the line's case id, what, expected and actual."""

    case_id: str
    kind: str  # "output" | "state" | "reward", or a failure: a key of FAILURE_KINDS
    detail: str
    expected: Any = None
    actual: Any = None

    def text(self) -> str:
        """The detail and the values that disagree, as a run's or demo's line shows it:
        ``reward differs: recorded 1.0, replayed 0.0`` (a value that is None left out; each
        clipped to :data:`SHOWN_VALUE_BYTES`)."""
        shown = [
            f"{side} {clip(value if isinstance(value, str) else repr(value), SHOWN_VALUE_BYTES)}"
            for side, value in (("recorded", self.expected), ("replayed", self.actual))
            if value is not None
        ]
        return f"{self.detail}: {', '.join(shown)}" if shown else self.detail


@dataclass
class EpisodeResult:
    """What one episode gave: its reward, category, and any mismatches."""

    case_id: str
    category: str
    reward: float
    mismatches: list[Mismatch] = field(default_factory=list)
    output_mismatches: int = 0
    state_mismatches: int = 0
    reward_mismatch: bool = False
    failure: str | None = None  # a key of FAILURE_KINDS: the episode did not play to the end


@dataclass
class RunSummary:
    """Totals of a run (the ``--json-out`` document). ``episodes`` counts every line started:
    the ``played_episodes`` (played to the end and scored) and the failed ones (``failed``, by
    kind), apart from the ``not_started`` ones a stop left out; ``mean_reward`` is the mean
    over the played episodes only (None when none played: an episode that could not be
    played has no reward, so it is never counted as 0)."""

    episodes: int
    played_episodes: int
    mean_reward: float | None
    output_mismatches: int
    reward_mismatches: int
    episodes_per_s: float
    state_mismatches: int
    mismatches: list[Mismatch]
    #: Per category: its played episodes and their mean reward (None when none played).
    by_category: dict[str, tuple[int, float | None]]
    #: Episodes that did not play to the end, by kind (every key of FAILURE_KINDS).
    failed: dict[str, int] = field(default_factory=lambda: dict.fromkeys(FAILURE_KINDS, 0))
    #: Lines never started: the run was stopped (Ctrl-C, SIGTERM) before their turn.
    not_started: int = 0

    @property
    def failed_episodes(self) -> int:
        return sum(self.failed.values())

    def to_json(self) -> RunTotals:
        """The ``--json-out`` document: totals (``episodes`` = ``played_episodes`` + the
        ``failed_episodes`` of every kind; ``mean_reward`` over the played ones, null when
        none), failures by kind and the first 20 mismatches (failures included, their ``kind``
        the failure's): :class:`~workplace_env_client.rows.RunTotals` without its
        ``sandbox``."""
        return {
            "episodes": self.episodes,
            "played_episodes": self.played_episodes,
            "mean_reward": self.mean_reward,
            "output_mismatches": self.output_mismatches,
            "state_mismatches": self.state_mismatches,
            "reward_mismatches": self.reward_mismatches,
            "failed_episodes": dict(self.failed),
            "not_started": self.not_started,
            "episodes_per_s": self.episodes_per_s,
            "mismatches": [
                {
                    "case_id": m.case_id,
                    "kind": m.kind,
                    "detail": m.detail,
                    "expected": m.expected,
                    "actual": m.actual,
                }
                for m in self.mismatches[:20]
            ],
        }


def case_id_of(line: Mapping[str, Any], lineno: int) -> str:
    """The line's case id: ``case_id`` (as text), else ``id``
    (:func:`~workplace_env_client.checks.row_id`), else ``line-<n>`` (also for an ``id`` of
    another JSON type, which :func:`line_problem` refuses)."""
    if line.get("case_id") not in (None, ""):
        return str(line["case_id"])
    try:
        named = checks.row_id(line, "id")
    except ArgumentError:
        named = ""
    return named or f"line-{lineno}"


class RunFailure(Exception):
    """An episode that could not be played to the end for a reason the service gave that is not
    the line's: ``kind`` a key of :data:`FAILURE_KINDS`, the message saying why."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


#: Why a ``tables_after`` check needs the admin token (the message of its refusal).
ADMIN_TOKEN_NEEDED = (
    "the tables_after check reads the session's tables through the admin export "
    "(ExportSessions), which needs the server's admin token: pass it with --token, "
    "$WORKPLACE_ENV_ADMIN_TOKEN or the --config file's admin_token (a server started without "
    "--admin-token has its admin RPCs off)"
)


class LineError(ValueError):
    """A line of the input file that is not a valid episode; the message names the line
    number and the line's own fields (``ground_truth[0].name``, not the wire's names)."""


def line_problem(line: Mapping[str, Any], lineno: int) -> str | None:
    """Why ``line`` (line ``lineno`` of its file) is no episode ``run`` can play, naming the line
    and each field, or None: no ground_truth, function_calls or calls
    (:func:`~workplace_env.jsonl.episode_problem`); ``function_calls``/``calls`` not arrays of
    objects; ``ground_truth`` neither a JSON string nor an array of objects whose ``name`` is a
    tool; ``id`` neither a string nor an integer; ``reward`` not a number; ``tables_after`` no
    table state (:func:`_tables_after_problems`). A JSON-string ``ground_truth`` is an
    episode: Verify scores it as "change nothing" (REFERENCE.md (c) 2; :func:`run_episode`)."""
    if (problem := episode_problem(line, lineno)) is not None:
        return problem
    problems = []
    for key in ("ground_truth", "function_calls", "calls"):
        if key not in line or (key == "ground_truth" and isinstance(line[key], str)):
            continue
        value = line[key]
        if not isinstance(value, list):
            problems.append(f"{key}: must be an array of {{name, arguments}} objects")
            continue
        for i, call in enumerate(value):
            if not isinstance(call, dict):
                problems.append(f"{key}[{i}]: must be an object {{name, arguments}}")
            elif key == "ground_truth" and not isinstance(call.get("name"), str):
                problems.append(f"{key}[{i}].name: must be a string")
            elif key == "ground_truth" and (problem := tool_name_problem(call["name"])):
                problems.append(f"{key}[{i}].name: {problem}")
    try:
        checks.row_id(line, "id")
    except ArgumentError as exc:
        problems.append(exc.message)
    output = line["response"]["output"] if recorded_source(line) == RESPONSE_OUTPUT else []
    if not isinstance(output, list):
        problems.append(
            f"{RESPONSE_OUTPUT}: must be an array of output items (a Responses-API response), "
            f"not {type(output).__name__}"
        )
    if "reward" in line and not _is_number(line["reward"]):
        problems.append(f"reward: must be a number, not {type(line['reward']).__name__}")
    if "tables_after" in line:
        problems += _tables_after_problems(line["tables_after"])
    if problems:
        return f"line {lineno}: " + "; ".join(problems)
    try:  # what the SDK refuses of the row it seeds, then what the service would (S5)
        message = task_from_row(_seeded_row(line, case_id_of(line, lineno)))
    except ArgumentError as exc:
        return str(_renamed(exc.violations, lineno, {"task": ""}, exc.message))
    if violations := task_violations(convert.task(message)):
        return str(_renamed(violations, lineno, {"task": ""}))
    return None


def _seeded_row(line: Mapping[str, Any], case_id: str) -> dict[str, Any]:
    """The task row an episode of ``line`` seeds: the line, ``id`` its case id; a JSON-string
    ``ground_truth`` is left out (Verify scores it, never seeded as calls)."""
    row = {**line, "id": case_id}
    if isinstance(line.get("ground_truth"), str):
        row["ground_truth"] = []
    return row


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _tables_after_problems(value: Any) -> list[str]:
    """What makes a line's ``tables_after`` no table state: it must be an object mapping
    table keys (:data:`~workplace_env.sandbox.tables.TABLE_KEYS`) to ``{"rows": int,
    "sha256": str}`` objects."""
    if not isinstance(value, dict):
        return [f"tables_after: must be an object of tables, not {type(value).__name__}"]
    problems = []
    for key, table in value.items():
        where = f"tables_after.{key}"
        if key not in TABLE_KEYS:
            problems.append(f"{where}: not a table (one of {', '.join(TABLE_KEYS)})")
        elif not isinstance(table, dict):
            problems.append(f"{where}: must be an object {{rows, sha256}}")
        elif not (isinstance(table.get("rows"), int) and not isinstance(table["rows"], bool)):
            problems.append(f"{where}.rows: must be an integer")
        elif not isinstance(table.get("sha256"), str):
            problems.append(f"{where}.sha256: must be a string")
    return problems


def _renamed(
    violations: Iterable[Any], lineno: int, names: Mapping[str, str], message: str = ""
) -> LineError:
    """A refusal of a line's episode (``violations``: the SDK's or the service's, each with a
    ``field`` and ``description``) as a :class:`LineError`: each field renamed from the
    request's name to the line's (``names``: request field -> line field, ``""`` for the line
    itself); ``message`` when there is no violation."""
    parts = []
    for violation in violations:
        where = violation.field
        for sent, own in names.items():
            if where == sent or where.startswith((sent + ".", sent + "[")):
                rest = where[len(sent) :]
                where = own + rest if own else rest.removeprefix(".")
                break
        parts.append(f"{where}: {violation.description}" if where else violation.description)
    return LineError(f"line {lineno}: " + ("; ".join(parts) if parts else message))


def _calls_of(raw: Any) -> list[dict[str, Any]]:
    return [c for c in raw if isinstance(c, dict)] if isinstance(raw, list) else []


#: Where a line's response output is, as its field is named in messages.
RESPONSE_OUTPUT = "response.output"


def recorded_source(line: Mapping[str, Any]) -> str | None:
    """The field holding a line's recorded calls: ``function_calls``, else ``calls``, else
    ``response.output`` (a rollout line: NeMo Gym's or ``run --policy model``'s); None when it
    has none of them."""
    for key in ("function_calls", "calls"):
        if key in line:
            return key
    response = line.get("response")
    return RESPONSE_OUTPUT if isinstance(response, Mapping) and "output" in response else None


def response_calls(line: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The top-level items of ``response.output`` whose ``type`` is ``function_call``, in
    order (REFERENCE.md (c).1: the calls Verify scores); [] when there is no such array."""
    response = line.get("response")
    output = response.get("output") if isinstance(response, Mapping) else None
    return [c for c in _calls_of(output) if c.get("type") == "function_call"]


def is_masked_line(line: Mapping[str, Any]) -> bool:
    """True for a rollout line marked ``mask_sample``: its ``reward`` is no score (0.0 by
    convention), so a replay's reward is not compared with it."""
    return line.get("mask_sample") is True


def perturb(calls: list[dict[str, Any]], rng: random.Random) -> list[dict[str, Any]]:
    """One call dropped, or (for a task with no calls) a spurious write added."""
    if not calls:
        return [
            {
                "name": "email_send_email",
                "arguments": json.dumps(
                    {"recipient": "someone@example.com", "subject": "Hi", "body": "Hello"}
                ),
            }
        ]
    out = list(calls)
    del out[rng.randrange(len(out))]
    return out


def policy_calls(line: Mapping[str, Any], policy: str, rng: random.Random) -> list[dict[str, Any]]:
    """The calls the ``policy`` makes for this line (see the module docstring)."""
    if policy == "oracle":
        return _calls_of(line.get("ground_truth"))
    if policy == "perturbed":
        return perturb(_calls_of(line.get("ground_truth")), rng)
    source = recorded_source(line)
    if source == RESPONSE_OUTPUT:
        return response_calls(line)
    return _calls_of(line.get(source)) if source else []


def _call_mismatch(
    client: EnvironmentClient, session_id: str, i: int, call: Mapping[str, Any], check: bool
) -> tuple[str, Any, Any] | None:
    """Make one call; return ``(detail, expected, actual)`` if it disagrees with its recording.

    A call the reference refused (``http_status``) must get INVALID_ARGUMENT; other calls with a
    recorded ``output`` must reproduce it when ``check`` is set.
    """
    arguments = call.get("arguments")
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    name = str(call.get("name", ""))
    refused = bool(call.get("http_status"))
    try:
        output = client.call_tool(session_id, name, text)
    except SessionHeaderMismatchError:
        raise  # routing, not the call's answer: a failure of the episode
    except InvalidRequestError as exc:
        if check and "output" in call and not refused:
            return f"call {i} {name}: {exc}", call["output"], None
        return None
    if refused:
        return f"call {i} {name}: expected INVALID_ARGUMENT", None, output
    unstable = bool(call.get("unstable_ties"))
    if check and "output" in call and not outputs_match(call["output"], output, unstable):
        return f"call {i} {name}", call["output"], output
    return None


def _state_problems(
    client: EnvironmentClient, session_id: str, expected: Any, admin_token: str | None
) -> list[str]:
    """The tables of the session that differ from ``expected`` (a line's ``tables_after``),
    read through the admin export. An export that fails is no difference but a failure of the
    episode: :class:`RunFailure` ``admin_unauthenticated`` (UNAUTHENTICATED: no or a
    wrong token), ``session_lost`` (the server does not hold the session), ``error`` (it cannot
    encode it); the SDK's errors (UNAVAILABLE, RESOURCE_EXHAUSTED, ...) are raised as they are
    (:func:`failure_kind`)."""
    try:
        with client.admin(admin_token) as admin:
            result = admin.export_sessions([session_id])
    except UnauthenticatedError as exc:
        raise RunFailure("admin_unauthenticated", f"{ADMIN_TOKEN_NEEDED} ({exc})") from exc
    if not result.snapshots:
        if session_id in result.failures:
            why = result.failures[session_id]
            raise RunFailure("error", f"cannot export the session's tables: {why}")
        raise RunFailure("session_lost", "the admin export does not hold the session")
    return state_mismatches(expected, state_digests(result.snapshots[0].state_json))


def run_episode(
    client: EnvironmentClient,
    line: Mapping[str, Any],
    lineno: int,
    policy: str,
    seed: int = 0,
    admin_token: str | None = None,
) -> EpisodeResult:
    """Run one line as one episode through the gRPC API; compare with its recordings.

    Outputs and ``tables_after`` are compared under the recorded policy (the latter through
    the admin service, with ``admin_token`` when the server wants one), rewards when the line
    has one.
    """
    case_id = case_id_of(line, lineno)
    if (problem := line_problem(line, lineno)) is not None:
        raise LineError(problem)
    rng = random.Random(f"{seed}:{case_id}")
    calls = policy_calls(line, policy, rng)
    task_row = _seeded_row(line, case_id)
    truth = line.get("ground_truth")
    truth_json = json.dumps(truth) if isinstance(truth, str) else None
    rollout_id = "r" + _UNSAFE_ID_CHARS.sub("-", case_id)[:200]
    episode = (rollout_id, 0)
    session_id = f"run-{uuid.uuid4().hex}"
    result = EpisodeResult(case_id, str(line.get("category") or "uncategorised"), 0.0)
    try:
        client.seed(session_id, episode, ("run", case_id), task_row)
    except SessionHeaderMismatchError:
        raise  # routing, not the line: a failure of the episode
    except InvalidRequestError as exc:  # the task row is the line (its id: case_id or id)
        raise _renamed(exc.violations, lineno, {"task": ""}, exc.message) from exc
    except BaseException as exc:
        if may_have_run(exc):  # the session may exist: close it, or say it may stay open
            _close(client, session_id, episode, exc)
        raise
    in_flight: BaseException | None = None
    try:
        for i, call in enumerate(calls):
            problem = _call_mismatch(client, session_id, i, call, check=policy == "recorded")
            if problem is not None:
                result.mismatches.append(Mismatch(case_id, "output", *problem))
                result.output_mismatches += 1
        if policy == "recorded" and "tables_after" in line:
            problems = _state_problems(client, session_id, line["tables_after"], admin_token)
            for problem in problems:
                result.mismatches.append(Mismatch(case_id, "state", problem))
            result.state_mismatches = len(problems)
        try:
            verified = client.verify(session_id, calls, ground_truth_json=truth_json)
        except SessionHeaderMismatchError:
            raise  # routing, not the line
        except InvalidRequestError as exc:
            made = "ground_truth" if policy != "recorded" else recorded_source(line)
            made = made or "function_calls"
            names = {"function_calls": made, "ground_truth_json": "ground_truth"}
            raise _renamed(exc.violations, lineno, names, exc.message) from exc
        if verified.mask_sample:  # V4: the server lost the session; the reward is no score
            why = verified.failure_reason or verified.failure_kind
            raise RunFailure("session_lost", f"verify answered a masked sample: {why}")
        result.reward = verified.reward
        compared = "reward" in line and not is_masked_line(line)
        if policy == "recorded" and compared and verified.reward != line["reward"]:
            result.reward_mismatch = True
            result.mismatches.append(
                Mismatch(case_id, "reward", "reward differs", line["reward"], verified.reward)
            )
    except BaseException as exc:
        in_flight = exc
        raise
    finally:
        _close(client, session_id, episode, in_flight)
    return result


def _close(
    client: EnvironmentClient,
    session_id: str,
    episode: tuple[str, int],
    in_flight: BaseException | None,
) -> None:
    """Close an episode's session; a close that fails is the SDK's
    :class:`~workplace_env_client.SessionLeftOpenWarning` naming the session and how long it
    may stay open (which ``run`` prints), a note on ``in_flight`` (the episode's own error,
    which goes on), and after a completed episode that error raised unless the server is out
    of reach (:func:`~workplace_env_client.errors.close_failed`)."""
    try:
        client.close_session(session_id, episode)
    except WorkplaceEnvError as closing:
        close_failed(session_id, closing, in_flight)


def admin_refusal(client: EnvironmentClient, admin_token: str | None) -> str | None:
    """Why the server refuses the admin export the ``tables_after`` checks need (its
    UNAUTHENTICATED answer: ``ADMIN_DISABLED``, ``ADMIN_TOKEN_REQUIRED``,
    ``ADMIN_TOKEN_INVALID``, CONTRACT A1), or None when it takes ``admin_token``. Asks for one
    id that no session has, so nothing is read; any other error is left to the episodes, which
    report it by kind."""
    try:
        with client.admin(admin_token) as admin:
            admin.export_sessions([f"run-token-check-{uuid.uuid4().hex}"])
    except UnauthenticatedError as exc:
        return str(exc)
    except WorkplaceEnvError:
        return None
    return None


def run_lines(
    client: EnvironmentClient,
    lines: Iterable[Mapping[str, Any]],
    policy: str = "recorded",
    concurrency: int = 1,
    seed: int = 0,
    on_done: Callable[[EpisodeResult], None] | None = None,
    admin_token: str | None = None,
    line_numbers: Sequence[int] | None = None,
    stop: Callable[[], bool] | None = None,
) -> RunSummary:
    """Run every line as an episode with ``concurrency`` in flight; summarise.

    Once ``stop()`` is true no further line starts (those in flight end); the lines never
    started are counted in ``not_started``, the others summarised as usual. A
    :class:`~workplace_env.interrupts.StopRequest` ``stop`` is also raised when an episode
    failed ``server_unavailable`` and the server does not answer a health check
    (:meth:`~workplace_env.interrupts.StopRequest.check_server`).

    ``on_done`` is called once per finished episode (progress bars); ``admin_token`` is sent
    with the exports that check ``tables_after``. ``line_numbers`` are the lines' physical
    line numbers in their file (1-based, blank lines counted:
    :func:`~workplace_env.jsonl.read_jsonl`), used in every message naming a line; None
    numbers them 1, 2, ...
    """
    items = list(lines)
    numbers = list(range(1, len(items) + 1)) if line_numbers is None else list(line_numbers)
    if len(numbers) != len(items):
        raise ValueError(f"{len(numbers)} line numbers for {len(items)} lines")
    started = time.perf_counter()
    results: list[EpisodeResult] = []

    def one(pair: tuple[int, Mapping[str, Any]]) -> EpisodeResult | None:
        if stop is not None and stop():
            return None
        lineno, line = pair
        try:
            res = run_episode(client, line, lineno, policy, seed, admin_token)
        except Exception as exc:  # one broken episode is a reported failure, not a crash
            case_id = case_id_of(line, lineno)
            res = EpisodeResult(case_id, str(line.get("category") or "uncategorised"), 0.0)
            res.failure = failure_kind(exc)
            own = isinstance(exc, LineError | RunFailure)
            detail = str(exc) if own else f"{type(exc).__name__}: {exc}"
            res.mismatches.append(Mismatch(case_id, res.failure, detail))
            if res.failure == "server_unavailable" and isinstance(stop, StopRequest):
                stop.check_server(client.channel)
        if on_done is not None:
            on_done(res)
        return res

    with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
        ended = list(pool.map(one, zip(numbers, items, strict=True)))
    results = [r for r in ended if r is not None]
    elapsed = time.perf_counter() - started
    by_category: dict[str, list[float]] = {}
    failed = dict.fromkeys(FAILURE_KINDS, 0)
    for r in results:
        rewards = by_category.setdefault(r.category, [])
        if r.failure is None:
            rewards.append(r.reward)
        else:
            failed[r.failure] += 1
    played = [r.reward for r in results if r.failure is None]
    return RunSummary(
        episodes=len(results),
        played_episodes=len(played),
        mean_reward=_mean(played),
        output_mismatches=sum(r.output_mismatches for r in results),
        reward_mismatches=sum(1 for r in results if r.reward_mismatch),
        episodes_per_s=len(results) / elapsed if elapsed > 0 else 0.0,
        state_mismatches=sum(r.state_mismatches for r in results),
        mismatches=[m for r in results for m in r.mismatches],
        by_category={k: (len(v), _mean(v)) for k, v in sorted(by_category.items())},
        failed=failed,
        not_started=len(ended) - len(results),
    )


def _mean(rewards: list[float]) -> float | None:
    """The mean of ``rewards``; None for none (no episode played: no mean, not 0)."""
    return sum(rewards) / len(rewards) if rewards else None


def failure_kind(exc: BaseException) -> str:
    """The :data:`FAILURE_KINDS` key of an episode's exception: an :class:`RunFailure`'s
    own kind; an SDK error's ``run_kind`` in the error registry
    (:func:`workplace_env_client.reasons.lookup`: the server unavailable, UNAVAILABLE or
    DEADLINE_EXCEEDED; at a capacity limit, RESOURCE_EXHAUSTED; refusing the admin token,
    UNAUTHENTICATED; the session lost, NOT_FOUND SESSION_LOST / SESSION_EXPIRED); an invalid
    line; or another error."""
    if isinstance(exc, RunFailure):
        return exc.kind
    if isinstance(exc, WorkplaceEnvError):
        return reasons.lookup(exc.code, exc.reason).run_kind
    if isinstance(exc, LineError):
        return "invalid_input"
    return reasons.RUN_ERROR
