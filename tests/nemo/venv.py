"""The black-box venvs of the tests (NeMo Gym, verifiers): each created once per machine, shared
by test processes.

``nemo_python()`` and ``verifiers_python()`` return a venv's interpreter, creating the venv when
needed (:func:`black_box_python`):

* where: the venv named by its variable (``$WORKPLACE_ENV_NEMO_VENV``,
  ``$WORKPLACE_ENV_VERIFIERS_VENV``: an existing venv, e.g. ``/tmp/nemo-probe``, is reused as
  is), else under ``$XDG_CACHE_HOME/workplace-env/`` (``~/.cache/...``, outside the checkout):
  ``nemo-gym-0.7.0-venv`` (about 1.1 GB), ``verifiers-0.4.0-venv`` (about 0.4 GB);
* with: Python 3.13 (``python3.13`` on PATH, else ``/root/.pyenv/versions/3.13.*``), and
  ``pip install`` of its pins (NeMo's with ``--ignore-requires-python``: the wheel asks for
  3.13.14 on paper; 3.13.0 works);
* races: an exclusive ``flock`` on ``<venv>.lock`` serialises creators; a venv counts as ready
  only once its marker file is written, so a half-built one (a killed run) is rebuilt;
* skips (``pytest.skip``) with the reason when Python 3.13 is missing or the install fails
  (no registry).
"""

from __future__ import annotations

import fcntl
import glob
import os
import shutil
import subprocess
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

from workplace_env.sandbox.source import NEMO_VENV_ENV as VENV_ENV
from workplace_env.sandbox.source import cache_dir, default_nemo_venv


@dataclass(frozen=True)
class BlackBox:
    """A venv the tests drive as a black box: its pins, the modules it must import, the variable
    naming an existing one, its directory under ``cache_dir()``, its ready marker and pip's extra
    flags."""

    requirements: tuple[str, ...]
    imports: str
    variable: str
    directory: str
    marker: str
    pip_flags: tuple[str, ...] = ()


#: NeMo Gym (the reference's pins).
NEMO = BlackBox(
    ("nemo-gym==0.7.0", "pandas==2.3.2", "numpy==2.3.2"),
    "nemo_gym, mcp",
    VENV_ENV,
    default_nemo_venv().name,
    ".workplace-env-nemo-ready",
    ("--ignore-requires-python",),
)
#: verifiers 0.4.0 (its built-in NeMo Gym taskset and ``vf-eval``).
VERIFIERS = BlackBox(
    ("verifiers==0.4.0",),
    "verifiers.v1.tasksets.nemo_gym",
    "WORKPLACE_ENV_VERIFIERS_VENV",
    "verifiers-0.4.0-venv",
    ".workplace-env-verifiers-ready",
)
_INSTALL_TIMEOUT_S = 1800


def find_python313() -> str | None:
    """A working Python 3.13 interpreter, or None."""
    candidates = [shutil.which("python3.13")]
    candidates += sorted(glob.glob("/root/.pyenv/versions/3.13.*/bin/python3.13"), reverse=True)
    for candidate in candidates:
        if not candidate:
            continue
        try:
            out = subprocess.run(
                [candidate, "-c", "import sys, venv; print(sys.version_info[:2])"],
                capture_output=True,
                text=True,
                timeout=60,
            )
        except (OSError, subprocess.TimeoutExpired):
            continue
        if out.returncode == 0 and out.stdout.strip() == "(3, 13)":
            return candidate
    return None


def _venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def _imports(python: Path, modules: str) -> bool:
    try:
        out = subprocess.run(
            [str(python), "-c", f"import {modules}"], capture_output=True, timeout=120
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0


def _create(box: BlackBox, venv: Path) -> None:
    """Build ``box`` at ``venv`` (the caller holds the lock). Skips the test on failure."""
    python313 = find_python313()
    if python313 is None:
        pytest.skip(f"{box.requirements[0]} needs Python 3.13 (python3.13 on PATH or in ~/.pyenv)")
    if venv.exists():
        shutil.rmtree(venv)  # half-built by an interrupted run
    subprocess.run([python313, "-m", "venv", str(venv)], check=True, timeout=300)
    pip = [str(_venv_python(venv)), "-m", "pip", "install", "--disable-pip-version-check", "-q"]
    pip += ["--no-compile", "--prefer-binary"]  # bytecode of ray, mlflow ... costs minutes
    out = subprocess.run(
        [*pip, *box.pip_flags, *box.requirements],
        capture_output=True,
        text=True,
        timeout=_INSTALL_TIMEOUT_S,
    )
    if out.returncode != 0:
        shutil.rmtree(venv, ignore_errors=True)
        tail = (out.stderr or out.stdout).strip().splitlines()[-5:]
        pins = " ".join(box.requirements)
        pytest.skip(f"cannot install {pins} (registry?): {' | '.join(tail)}")
    (venv / box.marker).write_text(" ".join(box.requirements) + "\n")


@cache
def black_box_python(box: BlackBox) -> Path:
    """The interpreter of ``box``'s venv (see the module docstring); skips when unavailable."""
    given = os.environ.get(box.variable)
    if given:
        python = _venv_python(Path(given))
        if not _imports(python, box.imports):
            pytest.skip(f"${box.variable}={given} is not a venv with {box.imports}")
        return python
    venv = cache_dir() / box.directory
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(f"{venv}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another test process may be building it
        if not (venv / box.marker).exists() or not _imports(_venv_python(venv), box.imports):
            _create(box, venv)
    return _venv_python(venv)


def nemo_python() -> Path:
    """The NeMo Gym venv's interpreter; skips when unavailable."""
    return black_box_python(NEMO)


def verifiers_python() -> Path:
    """The verifiers venv's interpreter; skips when unavailable."""
    return black_box_python(VERIFIERS)


@cache
def site_packages(python: Path) -> Path:
    """The site-packages directory of the venv whose interpreter is ``python``."""
    out = subprocess.run(
        [
            str(python),
            "-c",
            "import nemo_gym, pathlib; print(pathlib.Path(nemo_gym.__file__).parents[1])",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return Path(out.stdout.strip())
