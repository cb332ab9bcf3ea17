"""The documentation: generated pages current, the site built strictly, every example run.

Examples live in docs/examples/ and pages include them (``--8<-- "name"``); each is run here
(or by the test named in :data:`RUN_ELSEWHERE`), the README's shell blocks too, in a temporary
directory that holds only a link to the checkout's ``.venv``, as a fresh clone would.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

import pytest
import yaml

from tests.conftest import needs_shared
from tests.helpers import REPO
from tests.model_standin import Calls, StandInModel, Text
from tests.nemo.launcher import RAY_ENV
from tests.nemo.venv import nemo_python, site_packages
from tests.proxy_cluster import free_port
from workplace_env.config import Settings

DOCS = REPO / "docs"
EXAMPLES = DOCS / "examples"
PYTHON = Path(sys.executable)
VENV_BIN = PYTHON.parent
ENV = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
#: Examples another test runs as written: (that test's file, what of the example it runs).
RUN_ELSEWHERE = {
    "grpcurl.sh": ("tests/deploy/test_grpcurl.py", "every command"),
    "http_episode.sh": ("tests/gateway/test_http_episode_example.py", "every command"),
    "install_wheels.sh": ("tests/project/test_distributions.py", "its pip lines, in a clone copy"),
    "nemo_gym.yaml": ("tests/nemo/test_nemo_gym.py", "the same instances"),
    "nemo_launcher.sh": ("tests/nemo/test_nemo_launcher.py", "the same commands and configs"),
    "typed_rows.py": ("tests/nemo/test_nemo_configs.py", "over NeMo's example.jsonl, validated"),
    "verifiers_eval.sh": ("tests/sdk/test_verifiers.py", "its vf-eval command"),
    "verifiers_eval.toml": ("tests/sdk/test_verifiers.py", "as written"),
}
#: Examples no test runs, and why.
NOT_RUN = {
    "haproxy.sh": "serves until stopped; tests/deploy/test_proxy.py runs deploy/haproxy.cfg as is",
}
#: Example data (rows an example reads): named by its path in a page, not included.
DATA_SUFFIXES = {".jsonl"}
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
INCLUDE = re.compile(r'^--8<-- "([^"]+)"', re.M)
#: A curl command that sends a body (continuation lines included).
CURL_WITH_BODY = re.compile(
    r"\bcurl\b(?:[^\n`]|\\\n)*?\s(?:-d|--data(?:-raw|-binary|-urlencode)?|--json|-F|--form)\s"
)


def _run(
    *args: str | Path,
    cwd: Path = REPO,
    env: dict | None = None,
    timeout: float = 300,
    preexec_fn: Callable[[], object] | None = None,
    input: str | None = None,
):
    return subprocess.run(
        [str(a) for a in args],
        cwd=cwd,
        env=env or ENV,
        capture_output=True,
        text=True,
        timeout=timeout,
        preexec_fn=preexec_fn,
        input=input,
    )


def _clone_like(tmp_path: Path) -> Path:
    """A directory with only ``.venv`` (linked to this checkout's), where examples run."""
    (tmp_path / ".venv").symlink_to(VENV_BIN.parent)
    return tmp_path


def _left_in_checkout(cwd: Path, *ours: str) -> list[str]:
    """What an example left in the clone-like ``cwd`` that a clone's ``git status`` would show:
    every entry but ``.venv`` and ``ours`` (links the test made) that .gitignore does not
    cover."""
    left = sorted(
        f"{p.name}/" if p.is_dir() else p.name
        for p in cwd.iterdir()
        if p.name not in {".venv", *ours}
    )
    ignored = _run(
        "git", "check-ignore", "--no-index", "--stdin", cwd=REPO, env=ENV, input="\n".join(left)
    )
    return sorted(set(left) - set(ignored.stdout.split()))


def _pages() -> list[Path]:
    return sorted(DOCS.rglob("*.md"))


# -- generated and built ----------------------------------------------------------------------


def test_generated_reference_pages_are_current():
    proc = _run(PYTHON, DOCS / "gen.py", "--check")
    assert proc.returncode == 0, proc.stderr  # names the stale pages and the command


def test_the_site_builds_strictly(tmp_path):
    proc = _run(VENV_BIN / "mkdocs", "build", "--strict", "-d", tmp_path / "site")
    assert proc.returncode == 0, proc.stderr
    start = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
    assert f"workplace-env {metadata.version('workplace-env')}" in start


def test_one_version_everywhere():
    version = metadata.version("workplace-env")
    proc = _run(VENV_BIN / "workplace-env", "--version")
    assert proc.stdout.strip() == f"workplace-env {version}"
    import workplace_env_client

    sdk = getattr(workplace_env_client, "__version__", None)
    assert sdk in (None, metadata.version("workplace-env-client"))
    assert metadata.version("workplace-env-client") == version


# -- examples are files -----------------------------------------------------------------------


def test_every_example_is_included_and_every_code_block_is_an_example():
    included: set[str] = set()
    inline: list[str] = []
    for page in _pages():
        for lang, body in FENCE.findall(page.read_text(encoding="utf-8")):
            names = INCLUDE.findall(body)
            included.update(Path(n).name for n in names)
            fresh_machine = all(line.startswith("./build.sh && ") for line in body.splitlines())
            if lang in ("sh", "bash", "python") and not names and not fresh_machine:
                inline.append(f"{page.relative_to(REPO)}: {body[:60]!r}")
    assert inline == []
    examples = {p.name for p in EXAMPLES.iterdir()}
    named = {
        p.name
        for p in EXAMPLES.iterdir()
        if p.suffix in DATA_SUFFIXES
        for page in [REPO / "README.md", *_pages()]
        if f"docs/examples/{p.name}" in page.read_text(encoding="utf-8")
    }
    assert examples - included - named == set()
    assert set(RUN_ELSEWHERE) | set(NOT_RUN) <= examples
    assert [test for test, _ in RUN_ELSEWHERE.values() if not (REPO / test).is_file()] == []


#: A path under tests/ as a page names it (a test file, a support file, a folder).
TESTS_PATH = re.compile(r"\btests/[\w/.]*\w")


def test_every_path_under_tests_a_page_names_exists():
    named = {
        (page.relative_to(REPO), path)
        for page in [REPO / "README.md", *_pages()]
        for path in TESTS_PATH.findall(page.read_text(encoding="utf-8"))
    }
    assert named
    assert sorted((str(page), path) for page, path in named if not (REPO / path).exists()) == []


def test_every_curl_with_a_body_is_an_example_a_test_runs():
    """A curl command sending a body is never inline in a page (where no test sends it): it is
    in an example file a test runs against the gateway, which refuses a body that is not
    ``application/json`` with 422."""
    inline = [
        f"{page.relative_to(REPO)}: {found.group(0)!r}"
        for page in [REPO / "README.md", *_pages()]
        for found in CURL_WITH_BODY.finditer(page.read_text(encoding="utf-8"))
    ]
    assert inline == []
    with_body = {p.name for p in EXAMPLES.iterdir() if CURL_WITH_BODY.search(p.read_text())}
    assert with_body and with_body.isdisjoint(NOT_RUN)


LAUNCHER_EXAMPLE = EXAMPLES / "nemo_launcher.sh"


def _launcher_setup() -> str:
    """The settings of nemo_launcher.sh (its lines before the first function), as they run
    when bash runs the script from its place (``${BASH_SOURCE[0]}`` its path)."""
    text = LAUNCHER_EXAMPLE.read_text(encoding="utf-8")
    setup = text[: text.index("\nstart() {")]
    return setup.replace("${BASH_SOURCE[0]}", str(LAUNCHER_EXAMPLE))


def test_the_launcher_example_environment_finds_uv_python_and_gives_ray_the_tests_wait():
    """The settings of nemo_launcher.sh, run by bash with a venv active (this checkout's,
    standing in for NeMo Gym's) and nothing set: the extra root is the checkout holding the
    script, ``uv`` is the one build.sh installs, the venv's base interpreter directory is on
    PATH ahead of the system's (where uv finds the Python of ``uv venv --python X.Y.Z``), Ray
    gets the wait the launcher tests use, and the configs, data and head port have defaults."""
    names = sorted(RAY_ENV)
    shown = [
        "command -v uv",
        'echo "$PATH"',
        *(f'echo "${{{n}}}"' for n in names),
        'echo "$NEMO_GYM_EXTRA_ROOTS"',
        'echo "$CONFIGS"',
        'echo "$WORKBENCH"',
        'echo "$HEAD"',
    ]
    env = {"PATH": f"{VENV_BIN}:/usr/bin:/bin", "HOME": str(REPO), "POLICY_MODEL_NAME": "m"}
    proc = _run("bash", "-c", "\n".join([_launcher_setup(), *shown]), env=env, cwd=Path("/"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    uv, path, *values = proc.stdout.split()
    *ray, root, configs, workbench, head = values
    assert Path(uv) == VENV_BIN / "uv"
    dirs = path.split(":")
    base_bin = str(Path(sys.base_prefix) / "bin")
    assert base_bin in dirs
    assert dirs.index(base_bin) < dirs.index("/usr/bin")
    assert ray == [RAY_ENV[n] for n in names]
    assert Path(root) == REPO
    assert Path(configs, "workplace_env.yaml").is_file()
    assert Path(workbench) == REPO / ".cache" / "workplace-env" / "workbench"
    assert head == "++head_server.port=11000"


def test_the_launcher_example_names_the_model_setting_it_needs(tmp_path):
    """Without POLICY_MODEL_NAME the script stops before launching anything, saying so."""
    env = {"PATH": f"{VENV_BIN}:/usr/bin:/bin", "HOME": str(tmp_path)}
    proc = _run("bash", LAUNCHER_EXAMPLE, cwd=tmp_path, env=env)
    assert proc.returncode != 0
    assert "POLICY_MODEL_NAME: the model the endpoint serves" in proc.stderr


#: The line each example that makes a venv of Python 3.13 uses to find it (as build.sh does).
PY313_LINE = re.compile(r"^(?:#\s+)?(PY313=.*)$", re.M)


def test_every_python313_venv_line_finds_a_working_313_as_written():
    """``python3.13 -m venv`` failed under pyenv (its shim: "python3.13: command not found"):
    every example names the interpreter by one line that skips a shim that does not run."""
    lines = {
        path.name: PY313_LINE.findall(path.read_text(encoding="utf-8"))
        for path in sorted(EXAMPLES.iterdir())
        if path.suffix in (".sh", ".py")
    }
    assert [name for name, text in lines.items() if not text and _makes_venv(name)] == []
    found = {line for text in lines.values() for line in text}
    assert len(found) == 1, found  # one line, the same everywhere
    (line,) = found
    shown = 'echo "$PY313"; "$PY313" -c "import sys; print(sys.version_info[:2])"'
    proc = _run("bash", "-c", f"{line}\n{shown}")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == "(3, 13)"


def _makes_venv(name: str) -> bool:
    return " -m venv " in (EXAMPLES / name).read_text(encoding="utf-8")


#: Stand-ins of NeMo's CLIs and curl for running nemo_launcher.sh's sequence: ng_run holds the
#: launcher's ports (a directory) until SIGINT (or 20 s, then fails), curl answers once they
#: are held, a collection logs the configs of the launcher it ran against, reverify fails while
#: the ports are held.
LAUNCHER_STUBS = {
    "ng_run": """mkdir "$STATE/ports" 2>/dev/null || { echo "address in use" >&2; exit 1; }
exec >/dev/null 2>&1  # the script's output closes when the script ends
trap 'rm -r "$STATE/ports"; echo stopped >>"$STATE/log"; exit 0' INT
echo "$1" >"$STATE/ports/configs"; echo "ng_run $*" >>"$STATE/log"
for _ in $(seq 200); do sleep 0.1; done; rm -r "$STATE/ports"; exit 1""",
    "curl": """[[ "$*" == *"127.0.0.1:$HEAD_PORT/readyz"* ]] || exit 7
[ -d "$STATE/ports" ] && [ -s "$STATE/ports/configs" ]""",
    "ng_collect_rollouts": """[ -d "$STATE/ports" ] || { echo "no head server" >&2; exit 1; }
echo "collect $(cat "$STATE/ports/configs") $*" >>"$STATE"/log""",
    "gym": """[ -d "$STATE/ports" ] && { echo "address in use" >&2; exit 1; }
echo "$*" >>"$STATE"/log""",
}


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _launcher_stubs(tmp_path: Path) -> dict[str, str]:
    """The environment of a run of nemo_launcher.sh with :data:`LAUNCHER_STUBS` on PATH, a
    checkout at ``tmp_path/checkout`` (its examples and configs linked to this one's), a
    one-row example.jsonl in ``$WORKBENCH`` and ``tmp_path/elsewhere`` to run it from; the
    stand-ins log to ``tmp_path/log``."""
    stubs = tmp_path / "bin"
    stubs.mkdir()
    for name, body in LAUNCHER_STUBS.items():
        (stubs / name).write_text(f"#!/bin/bash\n{body}\n")
        (stubs / name).chmod(0o755)
    checkout = tmp_path / "checkout"
    (checkout / "docs").mkdir(parents=True)
    (checkout / "docs" / "examples").symlink_to(EXAMPLES)
    (checkout / "resources_servers").symlink_to(REPO / "resources_servers")
    (tmp_path / "workbench").mkdir()
    (tmp_path / "elsewhere").mkdir()
    row = {"id": 3, "ground_truth": [], "responses_create_params": {"input": []}}
    (tmp_path / "workbench" / "example.jsonl").write_text(json.dumps(row) + "\n")
    return {
        "PATH": f"{stubs}:{VENV_BIN}:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "STATE": str(tmp_path),
        "WORKBENCH": str(tmp_path / "workbench"),
        "HEAD_PORT": str(free_port()),
        "POLICY_MODEL_NAME": "stand-in",
    }


def _launcher_log(tmp_path: Path) -> list[str]:
    log = tmp_path / "log"
    return log.read_text().splitlines() if log.exists() else []


@pytest.mark.parametrize(
    "preexec_fn", [None, _ignore_sigint], ids=["foreground", "started-with-sigint-ignored"]
)
def test_the_launcher_example_stops_each_launcher_before_the_next_and_reverify(
    tmp_path, preexec_fn
):
    """Run as written, by its path in a checkout from another directory, with stand-ins of the
    NeMo commands (also as ``nohup ... &`` starts it, SIGINT ignored): each launcher is ready
    (polled on ``HEAD_PORT``) before its collection, each collection runs against the launcher
    of the checkout's configs defining what it routes to, on that head port, and each launcher
    has exited on its SIGINT before the next one or reverify starts. ``$VENVS`` is added to
    each command that starts servers."""
    env = _launcher_stubs(tmp_path)
    head_port = env["HEAD_PORT"]
    env["VENVS"] = "++skip_venv_if_present=true ++uv_venv_dir=/v"
    checkout, elsewhere = tmp_path / "checkout", tmp_path / "elsewhere"
    script = checkout / "docs" / "examples" / "nemo_launcher.sh"
    proc = _run("bash", script, cwd=elsewhere, env=env, timeout=120, preexec_fn=preexec_fn)
    assert proc.returncode == 0, proc.stderr
    log = _launcher_log(tmp_path)
    assert [entry.split()[0] for entry in log] == [
        *["ng_run", "collect", "stopped"] * 3,
        "eval",
    ]
    starting = [e.split() for e in log if e.startswith(("ng_run ", "eval "))]
    assert all({"++skip_venv_if_present=true", "++uv_venv_dir=/v"} <= set(e) for e in starting)
    assert log[-1].startswith("eval reverify --config ")
    assert f"++head_server.port={head_port}" in log[-1].split()
    assert all(f"++head_server.port={head_port}" in e.split() for e in log if "collect" in e)
    typed = json.loads((elsewhere / "typed_in.jsonl").read_text())
    assert typed["task_id"] == {"taskset": "workplace_assistant_typed", "task_id": "3"}
    for entry in log:
        if entry.startswith("collect "):
            configs, *args = entry.split()[1:]
            routed = re.search(r"(?:routes=\{\w+: |agent_name=)(\w+)", " ".join(args))
            assert routed, entry
            paths = configs.split("[", 1)[1].rstrip("]").split(",")
            assert Path(paths[0]).parent.parent == checkout / "resources_servers/workplace_env"
            defined = set()
            for path in paths:
                if (REPO / path).is_file():
                    defined |= set(yaml.safe_load((REPO / path).read_text()))
            assert routed.group(1) in defined, entry


def test_the_launcher_example_copied_elsewhere_finds_the_checkout_it_is_told(tmp_path):
    """A copy outside any checkout stops before launching anything, naming WORKPLACE_ENV_ROOT;
    with it set, the checkout's typed_rows.py and configs are the ones used."""
    env = _launcher_stubs(tmp_path)
    copy = tmp_path / "elsewhere" / "nemo_launcher.sh"
    shutil.copy(LAUNCHER_EXAMPLE, copy)
    lost = _run("bash", copy, cwd=tmp_path / "elsewhere", env=env, timeout=120)
    assert lost.returncode == 2 and _launcher_log(tmp_path) == []
    assert "set WORKPLACE_ENV_ROOT to the checkout" in lost.stderr
    env["WORKPLACE_ENV_ROOT"] = str(tmp_path / "checkout")
    found = _run("bash", copy, cwd=tmp_path / "elsewhere", env=env, timeout=120)
    assert found.returncode == 0, found.stderr
    assert (tmp_path / "elsewhere" / "typed_in.jsonl").exists()
    assert f"{tmp_path}/checkout/resources_servers/" in _launcher_log(tmp_path)[0]


def test_the_launcher_example_copied_into_its_git_checkout_finds_it(tmp_path):
    """A copy at another depth of the checkout (its git repository) needs no setting."""
    env = _launcher_stubs(tmp_path)
    checkout = tmp_path / "checkout"
    assert _run("git", "init", "-q", checkout).returncode == 0
    (checkout / "tools").mkdir()
    shutil.copy(LAUNCHER_EXAMPLE, checkout / "tools" / "nemo_launcher.sh")
    proc = _run(
        "bash", checkout / "tools" / "nemo_launcher.sh", cwd=tmp_path / "elsewhere", env=env
    )
    assert proc.returncode == 0, proc.stderr
    assert f"{checkout}/resources_servers/" in _launcher_log(tmp_path)[0]


def test_the_launcher_example_starts_no_launcher_after_a_failed_step(tmp_path):
    """A step that fails (no example.jsonl to make the typed rows of) ends the script with its
    status: no launcher is started."""
    env = _launcher_stubs(tmp_path)
    (tmp_path / "workbench" / "example.jsonl").unlink()
    script = tmp_path / "checkout" / "docs" / "examples" / "nemo_launcher.sh"
    proc = _run("bash", script, cwd=tmp_path / "elsewhere", env=env, timeout=120)
    assert proc.returncode != 0
    assert _launcher_log(tmp_path) == []


def test_the_launcher_example_stop_gives_up_on_a_launcher_ignoring_sigint(tmp_path):
    """``stop`` waits STOP_WAIT_S for a launcher that never exits, then names its pid."""
    script = (EXAMPLES / "nemo_launcher.sh").read_text(encoding="utf-8")
    functions = script[script.index("DEFAULT_SIGINT=") : script.index("# typed: collect routed")]
    # the stand-in says, through a FIFO, once it ignores SIGINT; stop is called after that
    stuck = "trap '' INT; echo ignoring > ready; sleep 30"
    body = (
        f'{functions}\nmkfifo ready\npython3 -c "$DEFAULT_SIGINT" bash -c "{stuck}" &\n'
        "LAUNCHER=$!\nread -r _ < ready\nstop"
    )
    env = {"PATH": f"{VENV_BIN}:/usr/bin:/bin", "STOP_WAIT_S": "1"}
    proc = _run("bash", "-c", body + '\necho "stop $?"; kill $LAUNCHER', cwd=tmp_path, env=env)
    assert proc.stdout.strip() == "stop 1"
    assert re.search(r"launcher pid \d+ still running 1 s after SIGINT", proc.stderr), proc.stderr


def test_the_typed_row_the_page_shows_is_what_the_converter_makes_of_its_dataset_row():
    page = (DOCS / "http-gateway.md").read_text(encoding="utf-8")
    (shown,) = [json.loads(body) for lang, body in FENCE.findall(page) if lang == "json"][:1]
    given = shown["task_input"]
    row = {**given["task_data"], "responses_create_params": given["responses_create_params"]}
    assert _typed_rows_module().typed_row(row) == shown


def _typed_rows_module():
    spec = importlib.util.spec_from_file_location("typed_rows", EXAMPLES / "typed_rows.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_readme_python_episode_is_the_example_file():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    (shown,) = [body for lang, body in FENCE.findall(readme) if lang == "python"]
    example = (EXAMPLES / "sdk_episode.py").read_text(encoding="utf-8")
    assert example.endswith(shown)
    (config,) = [body for lang, body in FENCE.findall(readme) if lang == "yaml"]
    assert config == (EXAMPLES / "nemo_gym.yaml").read_text(encoding="utf-8")


def test_sdk_episode(server):
    proc = _run(PYTHON, EXAMPLES / "sdk_episode.py", f"127.0.0.1:{server.port}")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == "reward 1.0"


def test_trl_env(server):
    proc = _run(PYTHON, EXAMPLES / "trl_env.py", f"127.0.0.1:{server.port}")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        '"Email deleted successfully."',
        '"Email ID not provided."',
        "reward 1.0",
    ]
    assert server.store.live_count() == 0


def test_openenv_env(server):
    proc = _run(PYTHON, EXAMPLES / "openenv_env.py", f"127.0.0.1:{server.port}")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["27", '"Email ID not provided."', "reward 1.0"]
    assert server.store.live_count() == 0


def test_replicas(make_server):
    replicas = [make_server().target for _ in range(2)]
    proc = _run(PYTHON, EXAMPLES / "replicas.py", *replicas)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["rollout-7", "1.0", "rollout-8", "1.0", "rollout-9", "1.0"]


def test_recover(make_server):
    token = "an-admin-token-for-the-example"
    served = make_server(settings=Settings(admin_token=token))
    proc = _run(PYTHON, EXAMPLES / "recover.py", served.target, token)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split()[-1] == "1.0"


def test_rollouts_model(server):
    row_prompt = "Delete the email with id 00000057."
    delete = ("email_delete_email", '{"email_id": "00000057"}')
    with StandInModel({row_prompt: [Calls([delete]), Text()]}) as standin:
        proc = _run(
            PYTHON, EXAMPLES / "rollouts_model.py", f"127.0.0.1:{server.port}", standin.base_url
        )
    assert proc.returncode == 0, proc.stderr
    first = proc.stdout.splitlines()[0].split()
    assert first[:2] == ["1.0", "2"]  # the reward, and two model turns (calls, then the answer)


def test_my_agent_example_passes_under_the_plugin(tmp_path):
    shutil.copy(EXAMPLES / "test_my_agent.py", tmp_path)
    proc = _run(PYTHON, "-m", "pytest", "-q", "-p", "no:cacheprovider", tmp_path, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 passed" in proc.stdout


def _shell(name: str, tmp_path: Path, **env: str) -> list[subprocess.CompletedProcess]:
    """The example run twice in a row, as a user reruns it, in a clone-like directory
    (``tmp_path/clone``) with ``$TMPDIR`` at ``tmp_path/tmp``: its two runs, after checking that
    it left nothing in the checkout that git would show."""
    cwd = _clone_like(tmp_path / "clone")
    variables = {**ENV, "EXAMPLES": str(EXAMPLES), "GRPCURL": str(VENV_BIN / "grpcurl"), **env}
    variables["TMPDIR"] = str(tmp_path / "tmp")
    runs = [_run("bash", EXAMPLES / name, cwd=cwd, env=variables) for _ in range(2)]
    assert _left_in_checkout(cwd) == [], runs[-1].stdout + runs[-1].stderr
    return runs


def _temporary(tmp_path: Path, name: str) -> list[Path]:
    """The files ``name`` the runs of :func:`_shell` wrote under ``$TMPDIR``."""
    return sorted((tmp_path / "tmp").glob(f"*/{name}"))


@pytest.fixture
def clone_dirs(tmp_path: Path) -> Path:
    (tmp_path / "clone").mkdir()
    (tmp_path / "tmp").mkdir()
    return tmp_path


def test_generate_and_run(clone_dirs):
    for proc in _shell("generate_and_run.sh", clone_dirs):
        assert proc.returncode == 0, proc.stdout + proc.stderr
    tasks = _temporary(clone_dirs, "tasks.jsonl")
    assert [len(t.read_text().splitlines()) for t in tasks] == [500, 500]


def test_serve(clone_dirs):
    grpc, http = f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"
    for proc in _shell("serve.sh", clone_dirs, GRPC=grpc, HTTP=http):
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert proc.stdout.startswith('{"status":"ready"}')
        assert proc.stdout.splitlines()[-1] == "reward 1.0"


def test_checkpoint(clone_dirs):
    for proc in _shell("checkpoint.sh", clone_dirs, GRPC=f"127.0.0.1:{free_port()}"):
        assert proc.returncode == 0, proc.stdout + proc.stderr
        restored = proc.stdout.split("SESSION_STATE_SEEDED")[-1]
        assert '"output"' in restored  # s1 answers after the restore
    assert len(_temporary(clone_dirs, "manifest.json")) == 2


@pytest.fixture(scope="module")
def data_from() -> str:
    """A local data source as a user has one: the site-packages of the tests' NeMo Gym venv."""
    return str(site_packages(nemo_python()))


def test_real_data_example(clone_dirs, data_from):
    for proc in _shell("real_data.sh", clone_dirs, **_data_env(clone_dirs, data_from)):
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert re.search(r"mean reward \(played\)\W+1\.0000", proc.stdout), proc.stdout


def test_episode_files_example(clone_dirs, data_from):
    """Run where no project data is (``$WORKPLACE_ENV_SHARED`` names an empty directory): the
    tasks come from ``data fetch``, and every one is played to a reward of 1.0."""
    empty = clone_dirs / "no-shared"
    empty.mkdir()
    env = {**_data_env(clone_dirs, data_from), "WORKPLACE_ENV_SHARED": str(empty)}
    for proc in _shell("episode_files.sh", clone_dirs, **env):
        assert proc.returncode == 0, proc.stdout + proc.stderr
    totals = [json.loads(t.read_text()) for t in _temporary(clone_dirs, "totals.json")]
    assert [(t["played_episodes"], t["mean_reward"]) for t in totals] == [(5, 1.0)] * 2


def test_model_run_example(clone_dirs, data_from):
    with StandInModel({}) as standin:  # no script: every episode is a model failure, still run
        runs = _shell(
            "model_run.sh",
            clone_dirs,
            **_data_env(clone_dirs, data_from),
            BASE_URL=standin.base_url,
            SKIP_LOCAL_MODEL="1",
        )
    rollouts = clone_dirs / "clone" / "runs" / "model" / "rollouts.jsonl"
    assert rollouts.exists(), runs[-1].stderr


def test_model_standin_example_serves_every_example_task_its_ground_truth(tmp_path, data_from):
    """The documented stand-in model, started as the page shows: every example task played
    through it by ``run --policy model`` scores 1.0, twice in a row (it answers by the calls a
    conversation holds, not by how often it was asked); Ctrl-C stops it."""
    (tmp_path / "clone").mkdir()
    cwd = _clone_like(tmp_path / "clone")
    (cwd / "tests").symlink_to(REPO / "tests")
    env = {**ENV, **_data_env(tmp_path, data_from), "PORT": str(free_port())}
    standin = subprocess.Popen(
        ["bash", str(EXAMPLES / "model_standin.sh")],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert standin.stdout is not None
        said = standin.stdout.readline()  # once it listens
        assert said.startswith("serving 5 tasks at http://127.0.0.1:"), standin.stderr.read()
        base_url = said.split()[-1]
        data = _run(VENV_BIN / "workplace-env", "data", "fetch", env=env).stdout.strip()
        for attempt in range(2):
            rollouts = tmp_path / f"rollouts{attempt}.jsonl"
            proc = _run(
                VENV_BIN / "workplace-env", "run", f"{data}/example.jsonl", "--data-dir", data,
                "--policy", "model", "--base-url", base_url, "--model", "stand-in",
                "--out", rollouts, env=env,
            )  # fmt: skip
            assert proc.returncode == 0, proc.stdout + proc.stderr
            lines = [json.loads(line) for line in rollouts.read_text().splitlines()]
            assert [line["reward"] for line in lines] == [1.0] * 5
    finally:
        os.killpg(standin.pid, signal.SIGINT)
        standin.wait(timeout=30)
    assert standin.returncode == 0
    assert _left_in_checkout(cwd, "tests") == []


def _data_env(tmp_path: Path, source: str) -> dict[str, str]:
    """``data fetch`` reads ``source`` and writes under ``tmp_path``, not the user's cache."""
    return {"WORKPLACE_ENV_DATA_FROM": source, "XDG_CACHE_HOME": str(tmp_path / "cache")}


def test_fuzz_long_example(tmp_path):
    """Run with 3 examples a target instead of 10,000: the script, not the fuzz, is checked."""
    (tmp_path / "clone").mkdir()
    cwd = _clone_like(tmp_path / "clone")
    (cwd / "tests").symlink_to(REPO / "tests")
    (tmp_path / "tmp").mkdir()
    env = {**ENV, "WORKPLACE_ENV_FUZZ_EXAMPLES": "3", "TMPDIR": str(tmp_path / "tmp")}
    proc = _run("bash", EXAMPLES / "fuzz_long.sh", cwd=cwd, env=env, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = Path(proc.stdout.splitlines()[-1].removeprefix("report: "))
    assert report.parent.parent == tmp_path / "tmp" and report.stat().st_size > 0
    assert _left_in_checkout(cwd, "tests") == []


@needs_shared
def test_differential_example(tmp_path):
    """Run with 3 sequences instead of 3,000, against the tests' NeMo Gym venv."""
    cwd = _clone_like(tmp_path)
    (cwd / "tests").symlink_to(REPO / "tests")
    env = {**ENV, "SEQUENCES": "3", "WORKPLACE_ENV_NEMO_VENV": str(nemo_python().parents[1])}
    proc = _run("bash", EXAMPLES / "differential.sh", cwd=cwd, env=env, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _left_in_checkout(cwd, "tests") == []


# -- the README's shell blocks ----------------------------------------------------------------


def test_the_readme_shell_blocks_run_as_written(tmp_path, data_from):
    """Each ``sh`` block of the README, in a clone-like directory; ``./build.sh && `` is left
    out (the venv is there), the suite's own command is not run from inside the suite, and the
    data block fetches from a local NeMo Gym."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    blocks = [body for lang, body in FENCE.findall(readme) if lang == "sh"]
    assert len(blocks) >= 3
    (tmp_path / "clone").mkdir()
    cwd = _clone_like(tmp_path / "clone")
    ran = 0
    for body in blocks:
        script = body.replace("./build.sh && ", "")
        if "-m pytest" in script:
            continue
        env = {**ENV, **_data_env(tmp_path, data_from)} if "data fetch" in script else ENV
        proc = _run("bash", "-euo", "pipefail", "-c", script, cwd=cwd, env=env)
        assert proc.returncode == 0, f"{script}\n{proc.stdout}\n{proc.stderr}"
        ran += 1
    assert ran >= 1
    assert _left_in_checkout(cwd) == []


# -- screenshots ------------------------------------------------------------------------------


def test_screenshots(tmp_path):
    if not (shutil.which("chromium") or shutil.which("chromium-browser")):
        pytest.skip("chromium not installed: apt-get install -y chromium")
    proc = _run("bash", DOCS / "screenshot.sh", tmp_path, timeout=240)
    assert proc.returncode == 0, proc.stderr
    for name in ("start.png", "reference-errors.png"):
        png = (tmp_path / name).read_bytes()
        assert png[:8] == b"\x89PNG\r\n\x1a\n"
        assert struct.unpack(">II", png[16:24]) == (1280, 900)
        assert len(png) > 20_000  # a rendered page, not a blank one


def _public_members(cls: type, instance: object) -> set[str]:
    names = set(dir(cls)) | set(vars(instance))
    return {name for name in names if not name.startswith("_")}


def test_the_sdk_page_names_every_public_member_of_session():
    from workplace_env_client import Session

    row = next(
        line
        for line in (DOCS / "sdk.md").read_text().splitlines()
        if line.startswith("| `Session` |")
    )
    named = set(re.findall(r"`([a-z_]+)\b[^`]*`", row.split("|")[2]))
    assert named == _public_members(Session, Session(None, "s", ("e", 0)))
