"""``workplace-env``: serve the environment, run episodes through it, and the tools around them.

This module only declares the commands and their arguments; each command calls one function
that lives with the code it runs:

=========================  ===============================================================
``serve``                  :func:`workplace_env.server.serve.serve_until_signalled`
``serve --print-config``,  :func:`workplace_env.config.print_settings`
``config``
``gateway``                :func:`workplace_env.gateway.serve.serve_gateway_until_signalled`
``run``                    :func:`workplace_env.run.command.run_scripted`,
                           :func:`workplace_env.run.command.run_model_policy` (``--policy model``)
``generate-tasks``         :func:`workplace_env.taskgen.generate_to`
``demo``                   :func:`workplace_env.demo.run_demo`
``checkpoint save``,       :func:`workplace_env.checkpoint.remote.save_checkpoint`,
``checkpoint restore``     :func:`workplace_env.checkpoint.remote.restore_checkpoint`
``data fetch``,            :func:`workplace_env.sandbox.source.fetch_data`,
``data verify``            :func:`workplace_env.sandbox.source.verify_directory`
=========================  ===============================================================

Those functions raise :class:`~workplace_env.terminal.CommandError` for what stops a command
(printed here, with its exit status) and return the exit status of what completes.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import logging
import signal
import sys
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, Optional

import grpc
import typer
from pydantic import Field, TypeAdapter, ValidationError

from workplace_env.checkpoint.remote import (
    CHECKPOINT_TIMEOUT_S,
    restore_checkpoint,
    save_checkpoint,
)
from workplace_env.command_errors import RUN_WORDS, server_errors
from workplace_env.config import (
    ConfigError,
    Settings,
    admin_token_problem,
    client_credentials,
    load_settings,
    origin,
    print_settings,
    setting_warnings,
    take_back,
    unknown_env_vars,
)
from workplace_env.demo import run_demo
from workplace_env.run.command import (
    read_episodes,
    run_model_policy,
    run_scripted,
    session_warnings_printed,
)
from workplace_env.run.options import ModelRunOptions
from workplace_env.run.rollout_files import run_outputs
from workplace_env.run.scripted import POLICIES
from workplace_env.sandbox.source import (
    NEMO_GYM,
    SOURCE_ENV,
    data_dir_of,
    fetch_data,
    verify_directory,
)
from workplace_env.server.observability import configure_logging
from workplace_env.server.serve import serve_until_signalled
from workplace_env.setting_options import setting_options
from workplace_env.taskgen import MAX_TASK_COUNT, generate_to
from workplace_env.terminal import (
    CommandError,
    HelpGroup,
    PathKind,
    console,
    path_problem,
    plain,
    refuse_existing_outputs,
    refuse_output_over_input,
    writing_alone,
)
from workplace_env_client.checks import MAX_SECONDS
from workplace_env_client.routing import target_problem

#: Help is click's plain layout (Typer's ``rich_markup_mode=None``): it wraps the help text
#: and never cuts an option's name, where rich's table cut ``--session-close-retry-window-
#: seconds`` to ``--session-close-retry…`` at 80 columns.
HELP_MARKUP = None
#: The logger of what ``serve`` and ``gateway`` say before they serve (settings, start errors).
_log = logging.getLogger("workplace_env.cli")
app = typer.Typer(
    help="gRPC environment server for the workplace assistant (WorkBench) benchmark.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=HELP_MARKUP,
    cls=HelpGroup,
)


def _print_version(value: bool) -> None:
    if value:
        from importlib import metadata

        try:
            version = metadata.version("workplace-env")
        except metadata.PackageNotFoundError:  # pragma: no cover - a bare checkout
            version = "unknown"
        print(f"workplace-env {version}")
        raise typer.Exit()


@app.callback()
def _main(
    ctx: typer.Context,
    version: Annotated[
        bool,
        typer.Option("--version", help="Print the version and exit.", callback=_print_version),
    ] = False,
) -> None:
    """gRPC environment server for the workplace assistant (WorkBench) benchmark."""
    global _json_notes
    _json_notes = ctx.invoked_subcommand in _LOGGING_COMMANDS
    if not _json_notes:
        _warn_unknown_env_vars()
    else:
        configure_logging()  # JSON from the first line: its options' notes too


@contextmanager
def _reported(log: logging.Logger | None = None) -> Iterator[None]:
    """A :class:`CommandError` becomes its message on stderr (a JSON log record with ``log``)
    and its exit status."""
    try:
        yield
    except CommandError as exc:
        if log is not None:
            log.error(str(exc))
        else:
            console.print(exc.markup())
        raise typer.Exit(exc.exit_code) from exc


def _exit_promptly() -> None:
    """After a server has drained and stopped: exempt the heap from the interpreter's last
    garbage collections, which walk every object (sandbox tables, caches, the gateway's
    modules) and took 1-3 s after ``drain: stopped`` on a busy machine.
    Everything was already released; objects are still freed as the interpreter ends.
    Stop signals arriving from then on are ignored: the interpreter's finalization puts back
    the default handlers, so a late SIGINT would end a drained server with -2 instead of 0."""
    gc.freeze()
    atexit.register(_ignore_stop_signals)


def _ignore_stop_signals() -> None:
    for number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(number, signal.SIG_IGN)


def _exit(status: int) -> None:
    if status:
        raise typer.Exit(status)


def _path_param(kind: PathKind, *, output: bool = False) -> dict[str, object]:
    """The ``metavar`` (``FILE``, ``DIRECTORY``) and ``callback`` of a path argument: its value
    as typed (an empty one stays empty) when :func:`path_problem` finds nothing (``output``:
    a path written), else a usage error (exit 2) naming the argument and the problem."""

    def check(value: str | None) -> str | None:
        if value is not None and (problem := path_problem(value, kind, output=output)):
            raise typer.BadParameter(problem)
        return value

    return {"metavar": "PATH" if kind == "any" else kind.upper(), "callback": check}


def _path(value: str | None) -> Path | None:
    """A checked path argument (:func:`_path_param`) as a path."""
    return None if value is None else Path(value).expanduser()


def _named(option: str, value: str | None) -> list[tuple[str, Path]]:
    """A path option given as ``[("OPTION VALUE", path)]`` for
    :func:`~workplace_env.terminal.refuse_output_over_input`; not given: ``[]``."""
    return [] if value is None else [(f"{option} {value}", Path(value).expanduser())]


def _data_dir_files(data_dir: Path | None) -> list[tuple[str, Path]]:
    """The CSV files of ``--data-dir`` (a command's inputs), each as ``("--data-dir", path)``."""
    if data_dir is None:
        return []
    return [("--data-dir", csv) for csv in sorted(Path(data_dir).glob("*.csv"))]


#: Whether this invocation's notes are JSON log records (``serve``, ``gateway``): set by the
#: app's callback, before the command's options are parsed.
_json_notes = False


def _note(message: str) -> None:
    """Tell the user ``message`` on stderr: a JSON log record (WARNING) under a command that
    logs JSON (``serve``, ``gateway``), plain text otherwise."""
    if _json_notes:
        _log.warning(message)
    else:
        console.print(plain(message))


def _data_dir(value: str | None) -> Path | None:
    """``--data-dir``: a CSV directory, or a data source fetched first (a bad one exits 2)."""
    if value is None:
        return None
    try:
        return data_dir_of(value, _note)
    except CommandError as exc:  # click names the option
        raise typer.BadParameter(str(exc).removeprefix("--data-dir: ")) from exc


def _server_target(value: str | None) -> str | None:
    """A ``--target`` (or ``--grpc-target``): one that names no server (blank, a URL, an
    unbracketed IPv6 address, a bad port: :func:`~workplace_env_client.routing.target_problem`)
    is a usage error (exit 2), never handed to gRPC."""
    if value is not None and (problem := target_problem(value)):
        raise typer.BadParameter(problem)
    return value


DataDir = Annotated[
    Optional[str],  # noqa: UP045  (typer needs Optional at runtime on 3.11)
    typer.Option(
        "--data-dir",
        help="WorkBench CSV directory, or a source as for 'data fetch --from' (nemo-gym, a NeMo "
        "Gym venv, an archive or its URL), fetched and verified into the cache first; default: "
        "the embedded generated sandbox (seed 0).",
        callback=_data_dir,
    ),
]
Opt = typer.Option
OptStr = Optional[str]  # noqa: UP045  (typer needs Optional at runtime on 3.11)
OptInt = Optional[int]  # noqa: UP045
OptFloat = Optional[float]  # noqa: UP045
ConfigFile = Annotated[
    OptStr,
    Opt(
        "--config",
        help="TOML or YAML settings file (also WORKPLACE_ENV_CONFIG).",
        **_path_param("file"),
    ),
]


def _float_range(low: float, high: float) -> dict[str, Any]:
    """The ``min``, ``max`` (shown in the help) and ``parser`` of a float option taking
    ``low`` to ``high``: ``nan`` or an infinity is a usage error (exit 2) saying it must be a
    finite number (a range check alone calls ``nan`` out of range), the rest in typer's own
    words."""
    adapter = TypeAdapter(Annotated[float, Field(ge=low, le=high, allow_inf_nan=False)])

    def parse(value: Any) -> float:
        try:
            return adapter.validate_python(value)
        except ValidationError as exc:
            raise typer.BadParameter(str(exc.errors()[0]["msg"])) from None

    return {"min": low, "max": high, "parser": parse}


def _model_opt(help: str, **kwargs: object) -> typer.models.OptionInfo:
    """An option of ``run --policy model`` (its help says so)."""
    return Opt(help=f"(--policy model) {help}", **kwargs)  # type: ignore[arg-type]


def _warn(line: str, log: logging.Logger | None = None) -> None:
    """``line`` as a warning on stderr (a JSON log record with ``log``)."""
    if log is not None:
        log.warning(line)
    else:
        console.print(f"[yellow]warning:[/yellow] {plain(line)}")


#: The commands whose every stderr line is a JSON log record: they warn about unknown
#: variables themselves, once their logging is set up.
_LOGGING_COMMANDS = ("serve", "gateway")


def _warn_unknown_env_vars(log: logging.Logger | None = None) -> None:
    """Warn about each ``WORKPLACE_ENV_*`` variable that is no setting (a typo), which is
    ignored (:func:`~workplace_env.config.unknown_env_vars`)."""
    for line in unknown_env_vars():
        _warn(line, log)


def _settings(
    flags: dict,
    config_file: Path | None,
    log: logging.Logger | None = None,
    command: str | None = None,
    uses: Collection[str] | None = None,
) -> tuple[Settings, dict[str, str]]:
    """The effective settings of ``command`` (``uses``: the settings it uses, as
    :func:`~workplace_env.config.load_settings` takes them); a bad one exits 2; one given
    that it does not use, and a weak one it takes (a short admin token,
    :func:`~workplace_env.config.setting_warnings`; None: any) is warned about (stderr; a JSON
    log record with ``log``)."""
    try:
        settings, sources = load_settings(
            flags, config_file, command=command, uses=uses, warn=lambda line: _warn(line, log)
        )
    except ConfigError as exc:
        if log is not None:
            log.error(f"configuration error: {exc}")
        else:
            console.print(f"[red]configuration error:[/red] {plain(exc)}")
        raise typer.Exit(2) from exc
    for line in setting_warnings(settings, command):
        _warn(line, log)
    return settings, sources


@app.command()
@setting_options("serve", data_dir=DataDir)
def serve(
    flags: dict[str, Any],
    config: ConfigFile = None,
    print_config: Annotated[
        bool, Opt("--print-config", help="Print the settings and exit.")
    ] = False,
) -> None:
    """Serve the environment over gRPC (with health and reflection) until SIGTERM/SIGINT.

    Every option can also come from WORKPLACE_ENV_<NAME> or the --config file (flags win).
    Every line it writes to stderr is a JSON log record.
    """
    if print_config:
        _warn_unknown_env_vars()
        print_settings(*_settings(flags, config, command="serve"))
        return
    configure_logging()  # every line JSON from the first (the level comes with the settings)
    _warn_unknown_env_vars(_log)
    settings, _ = _settings(flags, config, _log, "serve")
    with _reported(_log):
        serve_until_signalled(settings)
    _exit_promptly()


def _credentials(settings: Settings) -> grpc.ChannelCredentials | None:
    """The TLS credentials of a command connecting to a server (``run --target``,
    ``checkpoint``) from its settings (``tls_ca``, ``tls_client_cert``, ``tls_client_key``), as
    for the gateway; None: plaintext. An unreadable file exits 2."""
    try:
        return client_credentials(settings)
    except (OSError, ValueError) as exc:
        console.print(f"[red]cannot read the TLS files:[/red] {plain(exc)}")
        raise typer.Exit(2) from exc


@app.command()
@setting_options("gateway")
def gateway(
    flags: dict[str, Any],
    grpc_target: Annotated[
        str, Opt(help="HOST:PORT of the gRPC server.", callback=_server_target)
    ] = "127.0.0.1:50051",
    address: Annotated[str, Opt(help="HOST:PORT to serve HTTP on.")] = "127.0.0.1:8000",
    config: ConfigFile = None,
) -> None:
    """Serve the reference's legacy cookie HTTP routes (and MCP) over a gRPC server.

    Every option but the addresses can also come from WORKPLACE_ENV_<NAME> or the --config file.
    Every line it writes to stderr is a JSON log record.
    """
    from workplace_env.gateway.serve import serve_gateway_until_signalled

    configure_logging()
    _warn_unknown_env_vars(_log)
    settings, _ = _settings(flags, config, _log, "gateway")
    with _reported(_log):
        serve_gateway_until_signalled(grpc_target, address, settings)
    _exit_promptly()


@app.command("config")
def config_command(config: ConfigFile = None) -> None:
    """Print the effective settings (environment and config file over defaults)."""
    settings, sources = _settings({}, config)
    print_settings(settings, sources)


#: ``run``'s options that apply to one kind of policy only: the model's, and the scripted
#: policies' (``recorded``, ``oracle``, ``perturbed``).
_MODEL_ONLY = (
    "base_url", "model", "api", "max_turns", "api_key_env", "timeout", "max_retries",
    "temperature", "top_p", "model_seed", "max_output_tokens", "repeats", "out",
    "fail_on_masked",
)  # fmt: skip
_SCRIPTED_ONLY = ("json_out", "token")


def _refuse_other_policys_flags(ctx: typer.Context, policy: str) -> None:
    """A flag given (command line, environment) that does not apply to ``policy`` is a usage
    error (exit 2) naming it and the policies it belongs to."""
    foreign, owner = (
        (_MODEL_ONLY, "--policy model")
        if policy != "model"
        else (_SCRIPTED_ONLY, f"--policy {' | '.join(POLICIES)}")
    )
    for param in ctx.command.params:
        source = ctx.get_parameter_source(str(param.name))  # click's enum, or typer's copy
        if param.name in foreign and source is not None and source.name != "DEFAULT":
            flag = max(param.opts, key=len)
            raise typer.BadParameter(
                f"{flag} applies to {owner} only, not to --policy {policy}",
                ctx=ctx,
                param=param,
            )


@app.command()
@setting_options("run")
def run(
    flags: dict[str, Any],
    ctx: typer.Context,
    file: Annotated[
        str,
        typer.Argument(
            help="JSONL of tasks, rollouts or goldens.",
            **_path_param("file"),
        ),
    ],
    data_dir: DataDir = None,
    target: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option(
            help="HOST:PORT of a running server; default: an in-process server.",
            callback=_server_target,
        ),
    ] = None,
    policy: Annotated[
        str, typer.Option(help="recorded | oracle | perturbed | model.")
    ] = "recorded",
    concurrency: Annotated[int, typer.Option(min=1, help="Episodes in flight.")] = 1,
    json_out: Annotated[
        OptStr,
        typer.Option(
            "--json-out",
            help="Write the summary as JSON here.",
            **_path_param("file", output=True),
        ),
    ] = None,
    token: Annotated[
        OptStr,
        Opt(
            help="Admin token for the tables_after exports of --policy recorded (also "
            "WORKPLACE_ENV_ADMIN_TOKEN or the --config file's admin_token)."
        ),
    ] = None,
    base_url: Annotated[
        OptStr,
        _model_opt(
            "Model endpoint (OpenAI-compatible), e.g. http://host:8000/v1; not part of the "
            "plan: a rerun with another one resumes --out."
        ),
    ] = None,
    model: Annotated[OptStr, _model_opt("Model name sent to the endpoint.")] = None,
    api: Annotated[
        str, _model_opt("responses | chat (Chat Completions with tools).")
    ] = "responses",
    max_turns: Annotated[int, _model_opt("Model calls per episode at most.", min=1)] = 10,
    api_key_env: Annotated[
        str, _model_opt("Environment variable holding the API key.")
    ] = "OPENAI_API_KEY",
    timeout: Annotated[
        float,
        _model_opt("Seconds per model request.", **_float_range(0.1, MAX_SECONDS)),
    ] = 120.0,
    max_retries: Annotated[
        int, _model_opt("Retries with exponential backoff on 429, 5xx, timeouts.", min=0, max=100)
    ] = 4,
    temperature: Annotated[
        OptFloat,
        _model_opt("Sampling temperature, 0 to 2 [endpoint default].", **_float_range(0.0, 2.0)),
    ] = None,
    top_p: Annotated[
        OptFloat,
        _model_opt("Nucleus sampling top_p, 0 to 1 [endpoint default].", **_float_range(0.0, 1.0)),
    ] = None,
    model_seed: Annotated[
        OptInt, _model_opt("Sampling seed sent with every model request [none sent].")
    ] = None,
    max_output_tokens: Annotated[
        OptInt, _model_opt("Tokens per model answer at most [endpoint default].", min=1)
    ] = None,
    repeats: Annotated[int, _model_opt("Rollouts per task.", min=1)] = 1,
    out: Annotated[
        OptStr,
        _model_opt(
            "Rollouts JSONL [<file stem>_rollouts.jsonl]; a rerun of the same plan resumes it, "
            "another plan is refused (exit 2) unless --overwrite.",
            **_path_param("file", output=True),
        ),
    ] = None,
    overwrite: Annotated[
        bool,
        Opt(
            help="Replace an existing --json-out; with --policy model, delete the --out "
            "rollouts, materialized inputs, summary and plot first and play every episode "
            "again."
        ),
    ] = False,
    fail_on_masked: Annotated[
        bool,
        _model_opt(
            "Exit 1 on any masked episode, the model's own failures (agent_run_error) "
            "included; without it only episodes left unfinished (endpoint, environment) do."
        ),
    ] = False,
    any_sandbox: Annotated[
        bool,
        Opt(
            "--any-sandbox",
            help="Play lines written for another sandbox than the server's (by default "
            "refused: WorkBench's tasks need the WorkBench tables, generated tasks the sandbox "
            "they were made on).",
        ),
    ] = False,
    config: ConfigFile = None,
) -> None:
    """Run one episode per JSONL line through the gRPC API; exit 1 on any mismatch or failure.

    With --policy recorded, lines with tables_after also have the session's tables compared
    (an admin export); the other policies do not check tables_after.
    The run names the server's sandbox; lines written for another sandbox (WorkBench's tasks
    on the generated one, generated tasks elsewhere) are refused (exit 2) unless
    --any-sandbox.
    With --policy model, an OpenAI-compatible model plays each task (see docs/evaluating.md):
    rollouts go to --out (resumed on a rerun), a summary by category is printed and a
    pass-rate plot saved next to it; a masked episode is a failure of the run (exit 1) only
    when the endpoint or the environment masked it (a rerun plays it again), not when the
    model did (agent_run_error, counted in its pass rate), unless --fail-on-masked.
    With --target, the TLS options are the gateway's (also WORKPLACE_ENV_TLS_CA, ... or the
    --config file).
    """
    if policy not in (*POLICIES, "model"):
        console.print(f"[red]--policy must be one of {', '.join(POLICIES)}, model[/red]")
        raise typer.Exit(2)
    _refuse_other_policys_flags(ctx, policy)
    # the in-process server takes no settings: each one given is warned about
    settings, _ = (
        _settings(flags, config, command="run")
        if target
        else _settings(flags, config, command="run without --target", uses=())
    )
    credentials = _credentials(settings) if target else None
    token = token or settings.admin_token
    out_path = _path(out) or Path(f"{Path(file).stem}_rollouts.jsonl")
    with _reported(), server_errors("run", target, RUN_WORDS), contextlib.ExitStack() as held:
        refuse_output_over_input(
            run_outputs(out_path) if policy == "model" else _named("--json-out", json_out),
            [("FILE", Path(file)), *_named("--config", config), *_data_dir_files(data_dir)],
            "nothing was played",
        )
        held.enter_context(session_warnings_printed())
        # the model's --out has its own rule: the same plan resumes, another is refused
        json_outs = _named("--json-out", json_out)
        held.enter_context(writing_alone(json_outs, "nothing was played"))
        refuse_existing_outputs(json_outs, overwrite, "nothing was played")
        episodes = read_episodes(Path(file))
        lines = episodes.lines
        if policy == "model":
            options = ModelRunOptions(
                base_url=base_url,
                model=model,
                api=api,
                max_turns=max_turns,
                api_key_env=api_key_env,
                timeout_s=timeout,
                max_retries=max_retries,
                temperature=temperature,
                max_output_tokens=max_output_tokens,
                repeats=repeats,
                out=out_path,
                concurrency=concurrency,
                fail_on_masked=fail_on_masked,
                overwrite=overwrite,
                top_p=top_p,
                seed=model_seed,
                any_sandbox=any_sandbox,
            )
            status = run_model_policy(
                lines,
                options,
                target=target,
                data_dir=data_dir,
                credentials=credentials,
                line_numbers=episodes.line_numbers,
            )
        else:
            status = run_scripted(
                lines,
                policy,
                title=f"{Path(file).name} ({policy})",
                target=target,
                data_dir=data_dir,
                concurrency=concurrency,
                token=token,
                json_out=_path(json_out),
                line_numbers=episodes.line_numbers,
                credentials=credentials,
                any_sandbox=any_sandbox,
            )
    _exit(status)


@app.command("generate-tasks")
def generate_tasks_command(
    count: Annotated[
        int,
        typer.Option(
            min=0,
            max=MAX_TASK_COUNT,
            help=f"How many tasks to generate, at most {MAX_TASK_COUNT:,}.",
        ),
    ] = 100,
    seed: Annotated[int, typer.Option(help="Seed of the draw: same seed, same tasks.")] = 0,
    data_dir: DataDir = None,
    out: Annotated[
        OptStr,
        typer.Option(
            "--out",
            help="JSONL file to write; default: stdout. An existing file is refused unless "
            "--overwrite.",
            **_path_param("file", output=True),
        ),
    ] = None,
    overwrite: Annotated[bool, Opt(help="Replace an existing --out file.")] = False,
) -> None:
    """Generate WorkBench-style tasks whose ground truths are computed from the sandbox (JSONL).

    Each line is written as soon as its task is made (an interrupted run leaves whole lines),
    with a progress bar on stderr.
    """
    with _reported():
        refuse_output_over_input(
            _named("--out", out), _data_dir_files(data_dir), "no task was generated"
        )
        with writing_alone(_named("--out", out), "no task was generated"):
            refuse_existing_outputs(_named("--out", out), overwrite, "no task was generated")
            generate_to(data_dir, count, seed, _path(out))


@app.command()
def demo(
    count: Annotated[int, typer.Option(min=1, help="How many tasks to generate.")] = 200,
    seed: Annotated[int, typer.Option(help="Seed of the task draw.")] = 0,
    concurrency: Annotated[int, typer.Option(min=1, help="Episodes in flight.")] = 8,
    data_dir: DataDir = None,
) -> None:
    """Generate tasks, run them through the gRPC API as the oracle and a perturbed policy.

    The oracle makes each task's ground-truth calls and should score 1.0; the perturbed policy
    drops one of them (or makes a spurious write when the answer is to change nothing). Exit
    status 1 when an episode fails or the oracle scores below 1.0.
    """
    with _reported(), server_errors("demo", None):
        status = run_demo(count, seed, concurrency, data_dir)
    _exit(status)


def _command_group(name: str, help_text: str) -> typer.Typer:
    """A sub-command group of ``app`` (``workplace-env NAME ...``), with plain whole help."""
    group = typer.Typer(
        help=help_text, no_args_is_help=True, rich_markup_mode=HELP_MARKUP, cls=HelpGroup
    )
    app.add_typer(group, name=name)
    return group


checkpoint_app = _command_group(
    "checkpoint", "Save live sessions to a directory, or restore them into a server."
)
Target = Annotated[str, Opt(help="HOST:PORT of the server.", callback=_server_target)]


def _admin_token(value: str | None) -> str | None:
    """``--token`` as given; a blank or unsendable one is a usage error (as the setting)."""
    instead = f"{take_back('flag')} (then {origin('admin_token', 'env')} is used)"
    if value is not None and (problem := admin_token_problem(value, instead)):
        raise typer.BadParameter(problem)
    return value


Token = Annotated[
    OptStr,
    Opt(
        help="Admin bearer token (also WORKPLACE_ENV_ADMIN_TOKEN or the --config file's "
        "admin_token).",
        callback=_admin_token,
    ),
]


def _checkpoint_dir(output: bool) -> typer.models.ArgumentInfo:
    """The checkpoint ``DIRECTORY`` argument (``output``: ``save`` writes it)."""
    return typer.Argument(
        help="Checkpoint directory.",
        **_path_param("directory", output=output),
    )


CheckpointTimeout = Annotated[
    float,
    Opt(
        help="Deadline in seconds of the whole export or restore (all sessions in one stream).",
        **_float_range(0.1, MAX_SECONDS),  # the SDK's bound
    ),
]


@checkpoint_app.command("save")
@setting_options("checkpoint")
def checkpoint_save(
    flags: dict[str, Any],
    directory: Annotated[str, _checkpoint_dir(output=True)],
    target: Target = "127.0.0.1:50051",
    token: Token = None,
    timeout_s: CheckpointTimeout = CHECKPOINT_TIMEOUT_S,
    config: ConfigFile = None,
) -> None:
    """Export every live session and write one file each plus a manifest (atomic).

    Exits 1, after saving the others, when a session cannot be exported (each is named).
    The TLS options are the gateway's (also WORKPLACE_ENV_TLS_CA, ... or the --config file).
    """
    settings, _ = _settings(flags, config, command="checkpoint")
    token = token or settings.admin_token
    with _reported(), server_errors("checkpoint save", target):
        status = save_checkpoint(Path(directory), target, token, timeout_s, _credentials(settings))
    _exit(status)


@checkpoint_app.command("restore")
@setting_options("checkpoint")
def checkpoint_restore(
    flags: dict[str, Any],
    directory: Annotated[str, _checkpoint_dir(output=False)],
    target: Target = "127.0.0.1:50051",
    token: Token = None,
    timeout_s: CheckpointTimeout = CHECKPOINT_TIMEOUT_S,
    config: ConfigFile = None,
) -> None:
    """Verify every file's digest, then restore all sessions in one batch (all or nothing).

    The TLS options are the gateway's (also WORKPLACE_ENV_TLS_CA, ... or the --config file).
    """
    settings, _ = _settings(flags, config, command="checkpoint")
    token = token or settings.admin_token
    with _reported(), server_errors("checkpoint restore", target):
        restore_checkpoint(Path(directory), target, token, timeout_s, _credentials(settings))


data_app = _command_group(
    "data", "Get the WorkBench sandbox (six CSVs, checked by SHA-256) and its task files."
)


@data_app.command("fetch")
def data_fetch(
    source: Annotated[
        OptStr,
        Opt(
            "--from",
            help=f"Where from (also {SOURCE_ENV}): {NEMO_GYM} (the nemo-gym 0.7.0 wheel from "
            "the package index, or an installed NeMo Gym), a NeMo Gym venv or site-packages, a "
            "directory holding the CSVs, an archive (.whl, .zip, .tar.gz) or its http(s) URL "
            f"[{NEMO_GYM}].",
        ),
    ] = None,
    to: Annotated[
        OptStr,
        Opt(
            "--to",
            help="Directory to fill [$XDG_CACHE_HOME/workplace-env/workbench].",
            **_path_param("directory", output=True),
        ),
    ] = None,
) -> None:
    """Put the verified WorkBench CSVs and the task files found with them into a directory and
    print that directory (alone on stdout): DATA=$(workplace-env data fetch).

    Exit 2 when a CSV is missing or differs from the known file (each named with the expected
    and found SHA-256).
    """
    with _reported():
        dest = fetch_data(source, _path(to), lambda m: console.print(plain(m)))
    print(dest)


@data_app.command("verify")
def data_verify(
    directory: Annotated[
        str,
        typer.Argument(
            help="Directory of the six CSVs.",
            **_path_param("directory"),
        ),
    ],
) -> None:
    """Check a directory's six CSVs against the known SHA-256 digests; exit 2 naming each
    missing or differing file."""
    with _reported():
        verify_directory(Path(directory))
    console.print(f"{plain(directory)}: the WorkBench sandbox, every CSV verified")


def main() -> None:
    """Console-script entry point."""
    app(prog_name="workplace-env")


if __name__ == "__main__":
    sys.exit(main())
