"""``workplace-env run``: play a JSONL file's episodes through a server and report them.

* :func:`read_episodes`: the file's lines, refused (exit 2) when unreadable or empty;
* :func:`run_scripted`: the scripted policies (``recorded``, ``oracle``, ``perturbed``)
  through :func:`~workplace_env.run.scripted.run_lines`, a summary table and ``--json-out``;
  exit status 1 on any mismatch with the recordings;
* :func:`run_model_policy`: ``--policy model``, rollouts of an OpenAI-compatible model
  collected by :mod:`workplace_env.run.model_policy` (resumed on a rerun), a table by
  category, the summary JSON and the pass-rate plot; exit status 1 when an episode is left
  unfinished (masked by the endpoint or the environment), not for the model's own failures
  unless ``--fail-on-masked``.

Both play against the ``--target`` server or an in-process one
(:func:`workplace_env.server.serve.connect`), name its sandbox in their summaries, and refuse
(exit 2) a file written for another sandbox unless ``--any-sandbox``
(:mod:`workplace_env.run.sandbox_check`).
"""

from __future__ import annotations

import contextlib
import json
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import grpc

from workplace_env.interrupts import StopRequest, rerun_command, stop_on_signals
from workplace_env.jsonl import read_jsonl
from workplace_env.locks import WriterBusy
from workplace_env.plurals import counted, some_of
from workplace_env.run.model_policy import collect_rollouts
from workplace_env.run.options import ModelRunOptions
from workplace_env.run.plan import PlanMismatch
from workplace_env.run.report import (
    print_masked,
    print_model_summary,
    print_summary,
    summarise,
    write_plot,
    write_summary,
)
from workplace_env.run.rollout_files import (
    NotRolloutsFile,
    is_finished,
    lock_path,
    materialized_inputs_path,
    only_run_into,
    output_files,
    read_rollouts,
)
from workplace_env.run.sandbox_check import check_run_sandbox, sandbox_json, sandbox_text
from workplace_env.run.scripted import (
    ADMIN_TOKEN_NEEDED,
    admin_refusal,
    case_id_of,
    is_masked_line,
    line_problem,
    recorded_source,
    run_lines,
)
from workplace_env.server.serve import connect
from workplace_env.terminal import (
    CommandError,
    console,
    episode_progress,
    path_problem,
    plain,
)
from workplace_env_client import (
    EnvironmentClient,
    ModelPolicy,
    ServerSandbox,
    SessionLeftOpenWarning,
    checks,
    openai_client,
)
from workplace_env_client.rollouts import MODEL_APIS, MODEL_CONFIG_ERROR, endpoint_unanswered
from workplace_env_client.rows import SandboxIdentity

#: The ``--base-url`` of the command printed for a rerun through a corrected endpoint.
_CORRECTED_ENDPOINT = {"--base-url": "http://HOST:PORT/v1"}
#: What a rerun through another endpoint does with the ``--out`` (the endpoint is no part of
#: the plan: :mod:`workplace_env.run.plan`).
_RESUMED_ELSEWHERE = "the same --out resumes, its finished episodes kept"


@dataclass(frozen=True)
class EpisodeFile:
    """A JSONL file's objects and the physical line number of each (1-based, blank lines
    counted), so every message naming a line names the line an editor shows."""

    lines: list[dict[str, Any]]
    line_numbers: list[int]


@contextlib.contextmanager
def session_warnings_printed() -> Iterator[None]:
    """Within the block, a :class:`~workplace_env_client.SessionLeftOpenWarning` (from any
    thread: an episode's session left open or closed unscored) is printed on stderr as the
    run's other messages are (``warning: session '...' was not closed (...)``), not as a
    Python warning naming the SDK's source line; other warnings are shown as before."""
    shown = warnings.showwarning

    def show(message: Warning | str, category: type[Warning], *rest: Any, **named: Any) -> None:
        if issubclass(category, SessionLeftOpenWarning):
            console.print(f"[yellow]warning:[/yellow] {plain(message)}")
        else:
            shown(message, category, *rest, **named)

    with warnings.catch_warnings():
        warnings.showwarning = show
        yield


def read_episodes(file: Path) -> EpisodeFile:
    """The JSON objects of ``file`` with their line numbers. Raises :class:`CommandError`
    (exit 2) when it cannot be read or holds no line."""
    try:
        numbered = read_jsonl(str(file))
    except ValueError as exc:
        raise CommandError(str(exc)) from exc
    if not numbered:
        raise CommandError(f"{file} holds no episodes")
    return EpisodeFile([line for _, line in numbered], [n for n, _ in numbered])


def _line_ranges(numbers: Sequence[int]) -> str:
    """Ascending line numbers as ranges: ``[1, 2, 3, 7]`` -> ``"1-3, 7"``."""
    spans: list[list[int]] = []
    for number in numbers:
        if spans and number == spans[-1][1] + 1:
            spans[-1][1] = number
        else:
            spans.append([number, number])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)


def refuse_malformed_lines(lines: Sequence[Mapping[str, Any]], numbers: Sequence[int]) -> None:
    """Raise :class:`CommandError` (exit 2, nothing played) naming each line that is no episode
    (:func:`~workplace_env.run.scripted.line_problem`: the line and each field); lines with the
    same problem are named once together (``lines 1-5: <why>``), the first five problems in
    full and how many more."""
    by_why: dict[str, tuple[str, list[int]]] = {}  # why -> (the first line's text, lines)
    for number, line in zip(numbers, lines, strict=True):
        if problem := line_problem(line, number):
            why = problem.removeprefix(f"line {number}").removeprefix(":").removeprefix(" is")
            by_why.setdefault(why.strip(), (problem, []))[1].append(number)
    if by_why:
        named = [
            first if len(where) == 1 else f"lines {_line_ranges(where)}: {why}"
            for why, (first, where) in by_why.items()
        ]
        bad = sum(len(where) for _, where in by_why.values())
        more = f"; and {len(named) - 5} more" if len(named) > 5 else ""
        raise CommandError(
            f"{some_of(bad, len(lines), 'line', 'is', 'are')} no episode; nothing was played:",
            "; ".join(named[:5]) + more,
        )


def warn_string_truths(lines: Sequence[Mapping[str, Any]]) -> None:
    """Warn (stderr) when lines have a ``ground_truth`` written as a JSON string: Verify scores
    it as "change nothing" (the reference's rule), never as the calls the text may spell."""
    strings = sum(1 for line in lines if isinstance(line.get("ground_truth"), str))
    if strings:
        console.print(
            f"[yellow]{some_of(strings, len(lines), 'line', 'has', 'have')} a ground_truth "
            "written as a string[/yellow]: Verify scores it as 'change nothing', as the "
            "reference does (a JSON string is not decoded). To score calls, write them as a "
            "JSON array."
        )


def warn_unrecorded(lines: Sequence[Mapping[str, Any]]) -> None:
    """Warn (stderr) about what the ``recorded`` policy cannot replay as recorded: lines with
    no recorded calls (no ``function_calls``, ``calls`` or ``response.output``:
    :func:`~workplace_env.run.scripted.recorded_source`), played as episodes that make no call
    (naming ``--policy oracle`` and ``--policy model``); and masked rollout lines
    (``mask_sample``), whose reward is no score and is not compared."""
    bare = sum(1 for line in lines if recorded_source(line) is None)
    if bare:
        console.print(
            f"[yellow]{some_of(bare, len(lines), 'line', 'has', 'have')} no recorded "
            "calls[/yellow] "
            "(function_calls, calls or a rollout's response.output): --policy recorded plays "
            "them as episodes that make no call. To play their ground truth, use --policy "
            "oracle; to have a model play them, --policy model."
        )
    masked = sum(1 for line in lines if is_masked_line(line) and "reward" in line)
    if masked:
        console.print(
            f"[yellow]{some_of(masked, len(lines), 'line', 'is', 'are')} "
            f"{'a masked rollout' if masked == 1 else 'masked rollouts'}[/yellow] "
            "(mask_sample true): their recorded reward is no score, so theirs is not compared; "
            "their calls are replayed and scored as the others'."
        )


def warn_duplicate_ids(lines: Sequence[Mapping[str, Any]], numbers: Sequence[int]) -> None:
    """Warn (stderr) when lines share a case id (``case_id``, else ``id``:
    :func:`~workplace_env.run.scripted.case_id_of`, the ids the episodes are played under),
    naming the first five ids (each cut to 80 characters) with their first five line numbers and
    how many lines share one: every line is played (rows are told apart by their
    index), but whatever names a result by its id (mismatches, rollout ids, results by task)
    mixes them up."""
    by_id: dict[str, list[int]] = {}
    for number, line in zip(numbers, lines, strict=True):
        by_id.setdefault(case_id_of(line, number), []).append(number)
    shared = {case: where for case, where in by_id.items() if len(where) > 1}
    if shared:
        named = "; ".join(
            f"{case[:80]!r} (lines {', '.join(map(str, where[:5]))}"
            + (f" and {len(where) - 5:,} more)" if len(where) > 5 else ")")
            for case, where in list(shared.items())[:5]
        )
        more = f"; and {len(shared) - 5} more" if len(shared) > 5 else ""
        console.print(
            f"[yellow]{counted(len(shared), 'id')} on more than one line[/yellow] "
            + plain(
                f"({sum(map(len, shared.values())):,} of the {counted(len(lines), 'line')}): "
                f"{named}{more}. "
                "Every line is played, but results named by id (mismatches, rollout ids, "
                "results by task) mix those lines up; give each line its own id to tell them "
                "apart."
            )
        )


def warn_unchecked_tables(lines: Sequence[Mapping[str, Any]], policy: str) -> None:
    """Warn (stderr, once) when lines have ``tables_after`` that ``policy`` does not check:
    only ``--policy recorded`` compares the session's tables with them."""
    checked = sum(1 for line in lines if "tables_after" in line)
    if checked and policy != "recorded":
        console.print(
            f"[yellow]{some_of(checked, len(lines), 'line', 'has', 'have')} "
            "tables_after[/yellow], which "
            f"--policy {policy} does not check: only --policy recorded compares the session's "
            "tables with them."
        )


def refuse_data_dir_with_target(target: str | None, data_dir: Path | None) -> None:
    """Raise :class:`CommandError` (exit 2) when both are given: the ``--target`` server plays
    every episode on the sandbox it was started with, so ``--data-dir`` would be ignored and a
    run against other tables than the user meant would report their differences as
    mismatches."""
    if target is not None and data_dir is not None:
        raise CommandError(
            f"--data-dir {data_dir} has no effect with --target {target}: the server there plays "
            "every episode on the sandbox it was started with (serve --data-dir). Drop "
            "--data-dir, or drop --target to play on an in-process server over that directory."
        )


def run_scripted(
    lines: Sequence[Mapping[str, Any]],
    policy: str,
    *,
    title: str,
    target: str | None = None,
    data_dir: Path | None = None,
    concurrency: int = 1,
    token: str | None = None,
    json_out: Path | None = None,
    line_numbers: Sequence[int] | None = None,
    credentials: grpc.ChannelCredentials | None = None,
    any_sandbox: bool = False,
) -> int:
    """Play ``lines`` with a scripted ``policy`` (one of
    :data:`~workplace_env.run.scripted.POLICIES`) against ``target`` (None: an in-process server
    over ``data_dir``), ``concurrency`` in flight, with a progress bar; print the summary titled
    ``title`` and write it as JSON to ``json_out``. ``token`` is the target's admin token for
    ``tables_after`` checks: when the policy is ``recorded``, some line has one and the server
    refuses the token (or its absence), the run stops before playing anything
    (:class:`CommandError`, exit 2, saying the token is needed and why); ``data_dir`` with
    ``target`` is refused the same way (:func:`refuse_data_dir_with_target`); ``line_numbers``
    the lines' physical numbers in their file (:class:`EpisodeFile`); ``credentials`` make the
    connection to ``target`` TLS (None: plaintext). Lines written for another sandbox than the
    server's are refused before anything is played unless ``any_sandbox``
    (:func:`~workplace_env.run.sandbox_check.check_run_sandbox`); under the ``recorded`` policy,
    lines with no recorded calls are warned about. The summary names the sandbox (``sandbox`` in
    ``json_out``). Returns the exit status: 1 when an output, state or reward differs from the
    recording or an episode failed (any of :data:`~workplace_env.run.scripted.FAILURE_KINDS`),
    else 0; after a stop (a signal, or the server found gone:
    :class:`~workplace_env.interrupts.StopRequest`) the summary and the command that plays the
    file again are printed and the status is the stop's."""
    refuse_data_dir_with_target(target, data_dir)
    numbers = list(line_numbers or range(1, len(lines) + 1))
    refuse_malformed_lines(lines, numbers)
    warn_duplicate_ids(lines, numbers)
    warn_string_truths(lines)
    if policy == "recorded":
        warn_unrecorded(lines)
    warn_unchecked_tables(lines, policy)
    with connect(target, data_dir, token, credentials) as (client, admin_token):
        sandbox = check_run_sandbox(client, lines, numbers, target=target, any_sandbox=any_sandbox)
        if policy == "recorded" and (checked := sum("tables_after" in line for line in lines)):
            refusal = admin_refusal(client, admin_token)
            if refusal is not None:
                raise CommandError(
                    f"{some_of(checked, len(lines), 'line', 'has', 'have')} tables_after, and "
                    f"{ADMIN_TOKEN_NEEDED}; nothing was played. The server at {target} answered:",
                    refusal,
                )
        # drawn once nothing is left to refuse
        with episode_progress() as bars, stop_on_signals() as stop:
            bar = bars.add_task(f"{policy} episodes", total=len(lines))
            summary = run_lines(
                client,
                lines,
                policy,
                concurrency,
                on_done=lambda _r: bars.advance(bar),
                admin_token=admin_token,
                line_numbers=line_numbers,
                stop=stop,
            )
    print_summary(summary, title)
    console.print(plain(f"sandbox: {sandbox_text(sandbox)}"), soft_wrap=True)
    if json_out is not None:
        document = summary.to_json()
        document["sandbox"] = cast("SandboxIdentity | None", sandbox_json(sandbox))
        try:
            json_out.write_text(json.dumps(document, indent=2, default=str) + "\n")
        except BrokenPipeError:
            raise  # a reader gone (--json-out /dev/stdout | head): exits as any closed output
        except OSError as exc:
            raise CommandError(
                f"cannot write {json_out}: {exc}; the totals above are the run's", exit_code=1
            ) from exc
    if stop():
        console.print(
            f"{stop.stopped_text()} "
            + plain(
                f"after {summary.episodes} of {counted(len(lines), 'episode')},"
                f" {summary.not_started} not started; to play every line again: "
                # the summary just written is replaced by the next run's
                + rerun_command(add=("--overwrite",) if json_out is not None else ())
            )
        )
        return stop.exit_status
    if (
        summary.output_mismatches
        or summary.state_mismatches
        or summary.reward_mismatches
        or summary.failed_episodes
    ):
        return 1
    return 0


def run_model_policy(
    lines: Sequence[Mapping[str, Any]],
    options: ModelRunOptions,
    *,
    target: str | None = None,
    data_dir: Path | None = None,
    model_client: Any = None,
    credentials: grpc.ChannelCredentials | None = None,
    line_numbers: Sequence[int] | None = None,
) -> int:
    """Collect the rollouts of ``lines`` into ``options.out`` against ``target`` (None: an
    in-process server over ``data_dir``; TLS with ``credentials``), then summarise all of the
    file's lines.

    Returns the exit status: 0 when every episode of the file is finished, scored or masked
    for the model's own failure (``agent_run_error``: the model's output cannot be run or
    scored, a failure of the model that its pass rate counts); 1 when an episode is masked
    for the endpoint or the environment (``provider_*``, ``session_*``,
    ``workplace_env:environment_error``: not a score of the model, played again by a rerun
    with the same ``--out``), or, with ``options.fail_on_masked``, when any episode is masked;
    after a stop (a signal, or the server found gone:
    :class:`~workplace_env.interrupts.StopRequest`), the stop's, with the resume command.
    Raises :class:`CommandError` (exit 2) on a missing option, a missing ``openai`` package,
    ``data_dir`` with ``target``, an unwritable output, an ``out`` another run is writing
    (:func:`~workplace_env.run.rollout_files.only_run_into`, naming its pid), or an ``out``
    holding rollouts of another plan or no rollouts at all without ``options.overwrite``
    (:class:`~workplace_env.run.plan.PlanMismatch`,
    :class:`~workplace_env.run.rollout_files.NotRolloutsFile`, before any episode is played); the
    model's or endpoint's failures are masked episodes, never an error of the run.
    """
    if not options.base_url and model_client is None:
        raise CommandError("--policy model needs --base-url (an OpenAI-compatible endpoint)")
    if not options.model:
        raise CommandError("--policy model needs --model (the model name the endpoint serves)")
    if options.api not in MODEL_APIS:
        raise CommandError(f"--api must be one of {', '.join(MODEL_APIS)}")
    refuse_data_dir_with_target(target, data_dir)
    stop = StopRequest()  # set by a signal; from then on the client sends no model request
    if model_client is None:
        try:
            model_client = openai_client(
                str(options.base_url),
                api_key_env=options.api_key_env,
                timeout_s=options.timeout_s,
                max_retries=options.max_retries,
                stop=stop,
            )
        except (ImportError, ValueError) as exc:  # ValueError: --timeout or --max-retries
            raise CommandError(str(exc)) from exc
    for path in (*output_files(options.out), lock_path(options.out)):
        if problem := path_problem(path, "file", output=True):
            raise CommandError(f"cannot write {path}: {problem}; nothing was played.")
    numbers = list(line_numbers or range(1, len(lines) + 1))
    for number, line in zip(numbers, lines, strict=True):
        problem = checks.json_problem(line, f"line {number}", strict=True)
        if problem is not None:  # its rollout line could not be strict JSON
            raise CommandError(f"{problem[0]}: {problem[1]}; nothing was played.")
    refuse_malformed_lines(lines, numbers)
    warn_duplicate_ids(lines, numbers)
    warn_string_truths(lines)
    with contextlib.ExitStack() as held:
        try:
            held.enter_context(only_run_into(options.out))
        except WriterBusy as exc:
            raise CommandError(
                f"{exc}; nothing was played. Wait for that run to end, or use another --out."
            ) from exc
        except OSError as exc:
            raise CommandError(f"cannot write {options.out}: {exc}") from exc
        with connect(target, data_dir, credentials=credentials) as (client, _):
            sandbox = check_run_sandbox(
                client, lines, numbers, target=target, any_sandbox=options.any_sandbox
            )
            return _collect_and_report(client, model_client, lines, options, sandbox, stop)


def _collect_and_report(
    client: EnvironmentClient,
    model_client: Any,
    lines: Sequence[Mapping[str, Any]],
    options: ModelRunOptions,
    sandbox: ServerSandbox,
    stop: StopRequest,
) -> int:
    policy = ModelPolicy(
        model=str(options.model),
        api=options.api,  # type: ignore[arg-type]
        max_turns=options.max_turns,
    )
    with contextlib.ExitStack() as shown:
        # the model request in flight ends by its answer or its timeout; no retry follows it
        wait = f"at most {options.timeout_s:g} s for a model request in flight (--timeout)"
        shown.enter_context(stop_on_signals(stop=stop, wait=wait))
        advance: list[Callable[[], None]] = []  # the bar's, once drawn

        def start(total: int) -> None:  # after the plan was checked: nothing left to refuse
            bars = shown.enter_context(episode_progress())
            bar = bars.add_task(f"{options.model} episodes", total=total)
            advance.append(lambda: bars.advance(bar))

        try:
            result = collect_rollouts(
                client,
                model_client,
                lines,
                policy,
                options.out,
                repeats=options.repeats,
                concurrency=options.concurrency,
                overwrite=options.overwrite,
                sampling=options.sampling(),
                base_url=options.base_url,
                sandbox=sandbox_json(sandbox),
                on_start=start,
                on_done=lambda _line: advance[0](),
                stop=stop,
            )
        except (PlanMismatch, NotRolloutsFile) as exc:
            raise CommandError(str(exc)) from exc
        except OSError as exc:
            raise CommandError(f"cannot write {options.out}: {exc}") from exc
    rollouts = read_rollouts(options.out, result.keys)
    summary = summarise(rollouts)
    print_model_summary(
        summary, f"{options.model} ({options.api}) on {counted(len(rollouts), 'episode')}"
    )
    console.print(plain(f"sandbox: {sandbox_text(sandbox)}"))
    masked = [line for line in rollouts if line.get("mask_sample")]
    print_masked(masked, summary[-1], options.fail_on_masked)
    # every episode masked by the endpoint, its configuration or the environment is played
    # again; those of a configuration error get the configuration's message below instead
    to_play_again = [line for line in masked if not is_finished(line)]
    unfinished = [line for line in to_play_again if line.get("failure_kind") != MODEL_CONFIG_ERROR]
    resume = rerun_command(drop=("--overwrite",))
    if unfinished:
        console.print(
            f"[red]{len(unfinished)} not finished[/red] (masked by the endpoint or the "
            "environment, no score of the model, left out of the pass rate): exit 1; "
            + plain(f"to play them again: {resume}")
        )
        if unanswered := sum(endpoint_unanswered(line) for line in unfinished):
            console.print(
                plain(
                    f"{unanswered} of them got no answer from the endpoint at "
                    f"{options.base_url} (a refused connection, an unknown host or a timeout); "
                    "if that address is wrong, rerun with a corrected --base-url "
                    f"({_RESUMED_ELSEWHERE}): "
                    f"{rerun_command(drop=('--overwrite',), replace=_CORRECTED_ENDPOINT)}"
                )
            )
    written = [f"rollouts {options.out}", f"inputs {materialized_inputs_path(options.out)}"]
    unwritten = []
    try:
        written.append(f"summary {write_summary(summary, options.out, sandbox_json(sandbox))}")
        plot = write_plot(summary, options.out, f"{options.model}: pass rate by category")
        written.append(f"plot {plot}" if plot else "no plot (pip install 'workplace-env[model]')")
    except OSError as exc:  # the rollouts are written: say it, keep the totals
        unwritten.append(
            f"cannot write {exc.filename or options.out.parent}: {exc.strerror or exc}"
        )
    console.print(
        plain(
            f"episodes: {result.total}; played now {result.played} "
            f"({result.played - len(to_play_again)} finished, {len(to_play_again)} to play "
            "again); "
            f"kept from an earlier run {result.skipped} (finished); "
            + (f"interrupted {result.interrupted}; " if result.interrupted else "")
            + f"not started {result.not_started}; {', '.join(written)}"
        )
    )
    if unwritten:
        raise CommandError(
            f"{unwritten[0]}; the rollouts and the totals above are kept", exit_code=1
        )
    if stop():
        left = [
            *([f"{counted(result.interrupted, 'episode')} interrupted"] * bool(result.interrupted)),
            f"{counted(result.not_started, 'episode')} not started",
        ]
        console.print(f"{stop.stopped_text()}: " + plain(f"{', '.join(left)}; to resume: {resume}"))
        return stop.exit_status
    if result.config_error is not None:
        not_started = result.not_started
        raise CommandError(
            f"the model endpoint refused a request for its configuration; {not_started} "
            "episodes were not started. Check --base-url (the OpenAI-compatible root, e.g. "
            "http://host:8000/v1), --api (responses | chat), --model, the key in "
            f"${options.api_key_env} (--api-key-env) and the sampling flags (--temperature, "
            "--top-p, --max-output-tokens, --model-seed). With a corrected --base-url or key, "
            f"{_RESUMED_ELSEWHERE}: "
            f"{rerun_command(drop=('--overwrite',), replace=_CORRECTED_ENDPOINT)}; another "
            "--api, --model or sampling flag is another plan (a new --out, or --overwrite). "
            "The endpoint answered:",
            result.config_error,
        )
    return 1 if unfinished or (masked and options.fail_on_masked) else 0
