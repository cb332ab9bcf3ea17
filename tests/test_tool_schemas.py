"""The 27 tool schemas advertised to the model are exactly the reference's (tool_schemas.json)."""

from __future__ import annotations

import json

import pytest

from tests.conftest import WORKBENCH
from workplace_env.sandbox.tools import TOOLS, advertised_tools


def test_registry_has_27_tools():
    assert len(TOOLS) == 27


def test_schemas_equal_reference():
    path = WORKBENCH / "tool_schemas.json"
    if not path.exists():
        pytest.skip(f"reference schemas not found at {path}")
    reference = json.loads(path.read_text(encoding="utf-8"))
    ours = [t.schema for t in advertised_tools()]
    assert [json.dumps(s) for s in ours] == [json.dumps(s) for s in reference]
