"""Differential test against the reference server (issue 14): generated call sequences, both sides.

Sequences from :mod:`tests.differential` (every tool, every parameter, type confusions, state
edges) run on NeMo Gym 0.7.0's own ``workplace_assistant`` server, driven only through its HTTP
routes, and on ours (fast paths and pandas implementations); every output must be equal. A
bounded number of sequences runs here; ``python -m tests.differential --sequences N`` runs more.
The NeMo Gym venv comes from tests/nemo (``WORKPLACE_ENV_NEMO_VENV`` names an existing one).
"""

from __future__ import annotations

import os

import pytest

from tests.conftest import WORKBENCH, needs_shared
from tests.differential import compare, sequences

#: Sequences per test run (about 200 calls); WORKPLACE_ENV_DIFF_SEQUENCES overrides it.
SEQUENCES = int(os.environ.get("WORKPLACE_ENV_DIFF_SEQUENCES", "30"))


@pytest.fixture(scope="module")
def reference_url(tmp_path_factory):
    """NeMo Gym's own workplace_assistant resources server on loopback (a black box)."""
    from tests.nemo.servers import NemoStack, reference_resources
    from tests.nemo.venv import nemo_python

    python = nemo_python()
    with NemoStack(python, [reference_resources()], tmp_path_factory.mktemp("nemo")) as stack:
        yield stack.url("workplace_assistant")


@needs_shared
@pytest.mark.parametrize("seed", [14])
def test_generated_sequences_match_the_reference(seed, reference_url, workbench_tables):
    all_calls = list(sequences(SEQUENCES, seed, WORKBENCH))
    made, differences = compare(reference_url, workbench_tables, all_calls)
    assert made >= 3 * SEQUENCES
    assert differences == [], "\n".join(map(str, differences[:20]))
