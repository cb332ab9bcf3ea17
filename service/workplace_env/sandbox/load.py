"""Where a process's sandbox comes from: a WorkBench CSV directory, or the embedded default.

The embedded default is the generated sandbox (seed 0, scale 1) built in memory at start-up;
a ``--data-dir`` replaces it with real WorkBench CSVs.
"""

from __future__ import annotations

from pathlib import Path

from workplace_env.sandbox.tables import GENERATED, BaseTables


def load_sandbox(
    data_dir: str | Path | None = None, seed: int = 0, scale: float = 1.0
) -> BaseTables:
    """The sandbox for ``data_dir``, or the generated default when it is None.

    Raises TablesUnavailableError when the directory's files are missing or malformed.
    """
    if data_dir is not None:
        return BaseTables.from_directory(data_dir)
    from workplace_env.sandbox.generate import generate_sandbox

    return generate_sandbox(seed=seed, scale=scale)


def describe_sandbox(base: BaseTables) -> str:
    """The identity of ``base`` for people, one line: ``data directory DIR, digest sha256:...``
    or ``generated (seed=0,scale=1.0), digest sha256:...`` (the digest checkpoints record)."""
    origin = base.origin or "(origin unknown)"
    if origin.startswith(GENERATED):
        where = f"generated ({origin.removeprefix(GENERATED)})"
    else:
        where = f"data directory {origin}"
    return f"{where}, digest {base.digest}"
