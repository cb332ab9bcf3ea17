"""The NeMo Gym black-box venv: created once per machine, shared by test processes.

``nemo_python()`` returns the venv's interpreter, creating the venv when needed:

* where: ``$WORKPLACE_ENV_NEMO_VENV`` (an existing venv, e.g. ``/tmp/nemo-probe``, is reused
  as is), else ``$XDG_CACHE_HOME/workplace-env/nemo-gym-0.7.0-venv`` (``~/.cache/...``; about
  1.1 GB, outside the checkout);
* with: Python 3.13 (``python3.13`` on PATH, else ``/root/.pyenv/versions/3.13.*``), and
  ``pip install --ignore-requires-python nemo-gym==0.7.0 pandas==2.3.2 numpy==2.3.2`` (the
  wheel asks for 3.13.14 on paper; 3.13.0 works);
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
from functools import cache
from pathlib import Path

import pytest

from workplace_env.sandbox.source import NEMO_VENV_ENV as VENV_ENV
from workplace_env.sandbox.source import default_nemo_venv

#: What the venv holds (the reference's pins).
REQUIREMENTS = ("nemo-gym==0.7.0", "pandas==2.3.2", "numpy==2.3.2")
_READY = ".workplace-env-nemo-ready"
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


def _imports_nemo(python: Path) -> bool:
    try:
        out = subprocess.run(
            [str(python), "-c", "import nemo_gym, mcp"], capture_output=True, timeout=120
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0


def _create(venv: Path) -> None:
    """Build the venv at ``venv`` (the caller holds the lock). Skips the test on failure."""
    python313 = find_python313()
    if python313 is None:
        pytest.skip("NeMo Gym tests need Python 3.13 (python3.13 on PATH or in ~/.pyenv)")
    if venv.exists():
        shutil.rmtree(venv)  # half-built by an interrupted run
    subprocess.run([python313, "-m", "venv", str(venv)], check=True, timeout=300)
    pip = [str(_venv_python(venv)), "-m", "pip", "install", "--disable-pip-version-check", "-q"]
    pip += ["--no-compile", "--prefer-binary"]  # bytecode of ray, mlflow ... costs minutes
    out = subprocess.run(
        [*pip, "--ignore-requires-python", *REQUIREMENTS],
        capture_output=True,
        text=True,
        timeout=_INSTALL_TIMEOUT_S,
    )
    if out.returncode != 0:
        shutil.rmtree(venv, ignore_errors=True)
        tail = (out.stderr or out.stdout).strip().splitlines()[-5:]
        pytest.skip(f"cannot install {' '.join(REQUIREMENTS)} (registry?): {' | '.join(tail)}")
    (venv / _READY).write_text(" ".join(REQUIREMENTS) + "\n")


@cache
def nemo_python() -> Path:
    """The NeMo Gym venv's interpreter (see the module docstring); skips when unavailable."""
    given = os.environ.get(VENV_ENV)
    if given:
        python = _venv_python(Path(given))
        if not _imports_nemo(python):
            pytest.skip(f"${VENV_ENV}={given} is not a venv with nemo_gym and mcp")
        return python
    venv = default_nemo_venv()
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(f"{venv}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another test process may be building it
        if not (venv / _READY).exists() or not _imports_nemo(_venv_python(venv)):
            _create(venv)
    return _venv_python(venv)


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
