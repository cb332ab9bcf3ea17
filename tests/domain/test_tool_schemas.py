"""The 27 tool schemas advertised to the model are exactly the reference's (tool_schemas.json)."""

from __future__ import annotations

import inspect
import json

import pytest

from tests.conftest import WORKBENCH, shared_file
from workplace_env.sandbox.tools import TOOLS, advertised_tools


def test_registry_has_27_tools():
    assert len(TOOLS) == 27


def test_schemas_equal_reference():
    path = shared_file(WORKBENCH / "tool_schemas.json")
    reference = json.loads(path.read_text(encoding="utf-8"))
    ours = [t.schema for t in advertised_tools()]
    assert [json.dumps(s) for s in ours] == [json.dumps(s) for s in reference]


def test_every_implementation_takes_its_advertised_parameters():
    for spec in TOOLS.values():
        for func in filter(None, (spec.func, spec.fast)):
            inspect.signature(func).bind(None, **dict.fromkeys(spec.params))


@pytest.mark.parametrize(
    "name",
    [
        "customer_relationship_manager_update_customer",
        "customer_relationship_manager_delete_customer",
        "project_management_update_task",
        "project_management_delete_task",
    ],
)
def test_generated_by_id_tools_present_their_method(name):
    spec = TOOLS[name]
    method = spec.qualname.split(".")[1]
    assert (spec.func.__name__, spec.fast.__name__) == (method, f"_{method}_fast")
    for func in (spec.func, spec.fast):
        assert tuple(inspect.signature(func).parameters) == ("tables", *spec.params)
        assert func.__doc__
