"""The 27 tool schemas advertised to the model are exactly the reference's (tool_schemas.json)."""

from __future__ import annotations

import json

from tests.conftest import WORKBENCH, shared_file
from workplace_env.sandbox.tools import TOOLS, advertised_tools


def test_registry_has_27_tools():
    assert len(TOOLS) == 27


def test_schemas_equal_reference():
    path = shared_file(WORKBENCH / "tool_schemas.json")
    reference = json.loads(path.read_text(encoding="utf-8"))
    ours = [t.schema for t in advertised_tools()]
    assert [json.dumps(s) for s in ours] == [json.dumps(s) for s in reference]
