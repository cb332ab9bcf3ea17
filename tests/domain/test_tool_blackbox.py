"""Tool behaviour pinned by black-box calls to the reference server, where no golden pins it.

Each case was sent to NeMo Gym 0.7.0's workplace_assistant resources server (Python 3.13, pandas
2.3.2) over its HTTP routes only (``/seed_session``, then ``POST /<tool>`` in one cookie session),
and the outputs below are what it answered. They fix the order of checks and the fate of odd
values in the PM search/create/update/delete, CRM update/add/delete and calendar create pandas
paths, which were rewritten from REFERENCE.md, the goldens and these observations.
Every case runs on a fresh WorkBench session twice: pandas implementations only, and with fast
paths (which must hand these inputs over or agree).

A step ``(EMPTY, table, keep)`` deletes, with the table's delete tool, every row but the ids in
``keep`` (each delete must succeed).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.conftest import needs_shared
from workplace_env.sandbox.tables import CALENDAR, CRM, SessionTables
from workplace_env.sandbox.tools import drop_nulls, encode_output, execute
from workplace_env.sandbox.tools.registry import parse_arguments

EMPTY = "<delete all rows but>"

PM = "project_management_"
SEARCH, CREATE, UPDATE, DELETE = (
    PM + t for t in ("search_tasks", "create_task", "update_task", "delete_task")
)
GET = PM + "get_task_information_by_id"
CRM_ = "customer_relationship_manager_"
C_SEARCH, C_UPDATE, C_ADD = (
    CRM_ + t for t in ("search_customers", "update_customer", "add_customer")
)
C_DELETE = CRM_ + "delete_customer"
E_CREATE, E_GET = "calendar_create_event", "calendar_get_event_information_by_id"

_DELETERS = {CRM: (C_DELETE, "customer_id"), CALENDAR: ("calendar_delete_event", "event_id")}


def _err(tool: str, text: str) -> str:
    return f"Error executing tool '{tool}': {text}"


TASK = {
    "task_name": "T",
    "assigned_to_email": "leila.azizi@atlas.com",
    "list_name": "Backlog",
    "due_date": "2023-12-01",
    "board": "Design",
}
CUSTOMER = {
    "customer_name": "Robin Parity",
    "assigned_to_email": "raj.patel@atlas.com",
    "status": "Lead",
}
EVENT = {
    "event_name": "Sync",
    "participant_email": "A.B@atlas.com",
    "event_start": "2023-12-05 10:00:00",
    "duration": "30",
}
BAD_LIST = "List not valid. Please choose from: 'Backlog', 'In Progress', 'In Review', 'Completed'."
BAD_BOARD = "Board not valid. Please choose from: 'Back end', 'Front end', 'Design'."
BAD_ASSIGNEE = "Assignee email not valid. Please choose from the list of team members."
BAD_STATUS = "Status not valid. Please choose from: 'Qualified', 'Won', 'Lost', 'Lead', 'Proposal'"
UPDATED, NOT_FOUND = "Task updated successfully.", "Task not found."
C_UPDATED, C_NOT_FOUND = "Customer updated successfully.", "Customer not found."
# Customer 00000149 has neither phone nor notes (NaN cells).
JESSIE = {
    "customer_id": "00000149",
    "assigned_to_email": "raj.patel@atlas.com",
    "customer_name": "Jessie Thomas",
    "customer_email": "jessie.thomas@greendynamicsecurity",
    "customer_phone": None,
    "last_contact_date": "2023-11-29 23:59:00",
    "product_interest": "Services",
    "status": "Lead",
    "follow_up_by": "2023-12-21 23:59:00",
    "notes": None,
}


def _robin(customer_id: str, **cells: Any) -> dict[str, Any]:
    """A customer row add_customer made from CUSTOMER, optionals missing unless given."""
    row = {
        "customer_id": customer_id,
        "assigned_to_email": "raj.patel@atlas.com",
        "customer_name": "Robin Parity",
        "customer_email": None,
        "customer_phone": None,
        "last_contact_date": None,
        "product_interest": None,
        "status": "Lead",
        "follow_up_by": None,
        "notes": "",
    }
    return row | cells


def _page(*customers: dict[str, Any]) -> dict[str, Any]:
    pagination = {"total_customers": len(customers), "page": 1, "page_size": 5, "total_pages": 1}
    return {"customers": list(customers), "pagination": pagination}


CASES: list[tuple[str, list[tuple[Any, ...]]]] = [
    # -- PM search: the email format check comes before every filter; each filter sees only
    #    the rows the ones before it kept, and compiles its pattern even when none is left.
    (
        "search-email-type-checked-before-filters",
        [
            (
                SEARCH,
                {"task_name": 7, "assigned_to_email": 7},
                _err(SEARCH, "expected string or bytes-like object, got 'int'"),
            ),
            (
                SEARCH,
                {"assigned_to_email": {"a": 1}, "task_name": "x"},
                _err(SEARCH, "expected string or bytes-like object, got 'dict'"),
            ),
            (
                SEARCH,
                {"task_name": "(", "assigned_to_email": "bad"},
                "Invalid email format for assigned_to_email.",
            ),
            (
                SEARCH,
                {"list_name": "(", "assigned_to_email": "bad"},
                "Invalid email format for assigned_to_email.",
            ),
        ],
    ),
    (
        "search-pattern-errors-after-an-empty-narrowing",
        [
            (
                SEARCH,
                {"task_name": "zzzz", "list_name": 7},
                _err(SEARCH, "first argument must be string or compiled pattern"),
            ),
            (
                SEARCH,
                {"task_name": "zzzz", "due_date": "("},
                _err(SEARCH, "missing ), unterminated subpattern at position 0"),
            ),
            (
                SEARCH,
                {"assigned_to_email": "a@b.co", "task_name": 7},
                _err(SEARCH, "first argument must be string or compiled pattern"),
            ),
        ],
    ),
    (
        "search-narrowed-column-without-text",
        [
            (UPDATE, {"task_id": "00000149", "field": "due_date", "new_value": 5}, UPDATED),
            (
                SEARCH,
                {
                    "task_name": "carousel",
                    "assigned_to_email": "leila.azizi@atlas.com",
                    "due_date": "x",
                },
                _err(SEARCH, "Can only use .str accessor with string values!"),
            ),
            (
                SEARCH,
                {"task_name": "carousel", "due_date": "2023"},
                _err(SEARCH, "Cannot mask with non-boolean array containing NA / NaN values"),
            ),
        ],
    ),
    # -- PM create: lower-casing, then assignee, list, board, and only then the new id.
    (
        "create-check-order",
        [
            (
                CREATE,
                TASK | {"assigned_to_email": 5, "list_name": "bad", "board": "bad"},
                _err(CREATE, "'int' object has no attribute 'lower'"),
            ),
            (CREATE, TASK | {"assigned_to_email": "x@y.z", "list_name": "bad"}, BAD_ASSIGNEE),
            (CREATE, TASK | {"list_name": ["Backlog"]}, BAD_LIST),
            (CREATE, TASK | {"board": {"a": 1}}, BAD_BOARD),
            (UPDATE, {"task_id": "00000299", "field": "task_id", "new_value": "abc"}, UPDATED),
            (CREATE, TASK | {"list_name": "bad"}, BAD_LIST),
            (CREATE, TASK | {"assigned_to_email": "no@x.y"}, BAD_ASSIGNEE),
            (CREATE, TASK, _err(CREATE, "invalid literal for int() with base 10: 'abc'")),
        ],
    ),
    (
        "create-stores-name-and-due-date-as-sent",
        [
            (CREATE, TASK | {"task_name": 5, "due_date": ["a", "b"]}, "00000300"),
            (GET, {"task_id": "00000300", "field": "task_name"}, {"task_name": 5}),
            (GET, {"task_id": "00000300", "field": "due_date"}, {"due_date": ["a", "b"]}),
            (CREATE, TASK | {"task_name": {"a": 1}, "due_date": True}, "00000301"),
            (GET, {"task_id": "00000301", "field": "task_name"}, {"task_name": {"a": 1}}),
            (GET, {"task_id": "00000301", "field": "due_date"}, {"due_date": True}),
            (CREATE, TASK | {"task_name": 2.5, "due_date": [1]}, "00000302"),
            (GET, {"task_id": "00000302", "field": "due_date"}, {"due_date": [1]}),
        ],
    ),
    (
        "create-id-from-the-column-max",
        [
            (UPDATE, {"task_id": "00000299", "field": "task_id", "new_value": "99999999"}, UPDATED),
            (CREATE, TASK, "100000000"),
            (UPDATE, {"task_id": "100000000", "field": "task_id", "new_value": " 7 "}, UPDATED),
            (CREATE, TASK, "100000000"),
            (UPDATE, {"task_id": "00000298", "field": "task_id", "new_value": 999}, UPDATED),
            (CREATE, TASK, _err(CREATE, "'>=' not supported between instances of 'str' and 'int'")),
        ],
    ),
    # -- PM update/delete: numpy membership, then pandas' == mask and .loc assignment.
    (
        "update-lookup-and-checks",
        [
            (UPDATE, {"task_id": ["99999999"], "field": "task_name", "new_value": "x"}, NOT_FOUND),
            (UPDATE, {"task_id": 7, "field": "task_name", "new_value": "x"}, NOT_FOUND),
            (UPDATE, {"task_id": {"a": 1}, "field": "task_name", "new_value": "x"}, NOT_FOUND),
            (UPDATE, {"task_id": True, "field": "task_name", "new_value": "x"}, NOT_FOUND),
            (UPDATE, {"task_id": "99999999", "field": ["x"], "new_value": "x"}, NOT_FOUND),
            (UPDATE, {"task_id": "99999999", "field": "board", "new_value": "bad"}, BAD_BOARD),
            (UPDATE, {"task_id": "00000149", "field": "board", "new_value": ["Design"]}, BAD_BOARD),
            (
                UPDATE,
                {
                    "task_id": "00000149",
                    "field": "assigned_to_email",
                    "new_value": "LEILA.AZIZI@atlas.com",
                },
                UPDATED,
            ),
            (
                GET,
                {"task_id": "00000149", "field": "assigned_to_email"},
                {"assigned_to_email": "leila.azizi@atlas.com"},
            ),
        ],
    ),
    (
        "update-stores-through-loc",
        [
            (UPDATE, {"task_id": "00000149", "field": "due_date", "new_value": {"a": 1}}, UPDATED),
            (GET, {"task_id": "00000149", "field": "due_date"}, {"due_date": None}),
            (UPDATE, {"task_id": "00000149", "field": "due_date", "new_value": ["x"]}, UPDATED),
            (GET, {"task_id": "00000149", "field": "due_date"}, {"due_date": "x"}),
            (UPDATE, {"task_id": "00000149", "field": "due_date", "new_value": [["x"]]}, UPDATED),
            (GET, {"task_id": "00000149", "field": "due_date"}, {"due_date": ["x"]}),
            (
                UPDATE,
                {"task_id": "00000149", "field": "task_name", "new_value": [{"a": 1}]},
                UPDATED,
            ),
            (GET, {"task_id": "00000149", "field": "task_name"}, {"task_name": {"a": 1}}),
            (UPDATE, {"task_id": "00000149", "field": "task_name", "new_value": True}, UPDATED),
            (GET, {"task_id": "00000149", "field": "task_name"}, {"task_name": True}),
            (UPDATE, '{"task_id": "00000149", "field": "task_name", "new_value": NaN}', UPDATED),
            (GET, {"task_id": "00000149", "field": "task_name"}, {"task_name": None}),
        ],
    ),
    (
        "update-and-delete-by-an-int-id",
        [
            (UPDATE, {"task_id": "00000149", "field": "task_id", "new_value": 149}, UPDATED),
            (
                GET,
                {"task_id": 149, "field": "task_name"},
                {"task_name": "Add animation to carousel"},
            ),
            (UPDATE, {"task_id": 149, "field": "task_name", "new_value": "y"}, UPDATED),
            (DELETE, {"task_id": 149}, "Task deleted successfully."),
            (DELETE, {"task_id": 149}, NOT_FOUND),
        ],
    ),
    (
        "duplicate-ids-take-a-list-element-wise-and-delete-together",
        [
            (UPDATE, {"task_id": "00000149", "field": "task_id", "new_value": "00000037"}, UPDATED),
            (
                UPDATE,
                {"task_id": "00000037", "field": "task_name", "new_value": ["a", "b"]},
                UPDATED,
            ),
            (
                SEARCH,
                {"task_name": "^[ab]$"},
                [
                    {
                        "task_id": "00000037",
                        "task_name": "a",
                        "assigned_to_email": "leila.azizi@atlas.com",
                        "list_name": "Backlog",
                        "due_date": "2023-11-27",
                        "board": "Front end",
                    },
                    {
                        "task_id": "00000037",
                        "task_name": "b",
                        "assigned_to_email": "carlos.rodriguez@atlas.com",
                        "list_name": "Completed",
                        "due_date": "2023-11-27",
                        "board": "Back end",
                    },
                ],
            ),
            (DELETE, {"task_id": "00000037"}, "Task deleted successfully."),
            (GET, {"task_id": "00000037", "field": "task_name"}, NOT_FOUND),
        ],
    ),
    (
        "delete-odd-ids",
        [
            (DELETE, {"task_id": ["99999999"]}, NOT_FOUND),
            (DELETE, {"task_id": {"a": 1}}, NOT_FOUND),
            (DELETE, {"task_id": True}, NOT_FOUND),
            (
                DELETE,
                {"task_id": [["00000149"]]},
                _err(DELETE, "('Lengths must match to compare', (300,), (1, 1))"),
            ),
        ],
    ),
    # -- CRM update: enum checks before the lookup, lower-casing before it too.
    (
        "crm-update-checks-and-stores",
        [
            (
                C_UPDATE,
                {"customer_id": "00000189", "field": "status", "new_value": ["Won"]},
                BAD_STATUS,
            ),
            (
                C_UPDATE,
                {"customer_id": "99999999", "field": "status", "new_value": "bad"},
                BAD_STATUS,
            ),
            (
                C_UPDATE,
                {"customer_id": "99999999", "field": "customer_email", "new_value": "X@Y.Z"},
                C_NOT_FOUND,
            ),
            (
                C_UPDATE,
                {"customer_id": ["99999999"], "field": "notes", "new_value": "x"},
                C_NOT_FOUND,
            ),
            (C_UPDATE, {"customer_id": "99999999", "field": ["x"], "new_value": "x"}, C_NOT_FOUND),
            (
                C_UPDATE,
                {"customer_id": "00000189", "field": "customer_email", "new_value": ["A"]},
                _err(C_UPDATE, "'list' object has no attribute 'lower'"),
            ),
            (
                C_UPDATE,
                {"customer_id": "00000149", "field": "notes", "new_value": {"a": 1}},
                C_UPDATED,
            ),
            (
                C_UPDATE,
                {"customer_id": "00000149", "field": "customer_phone", "new_value": ["555"]},
                C_UPDATED,
            ),
            (
                C_SEARCH,
                {"customer_name": "Jessie Thomas"},
                _page(JESSIE | {"customer_phone": "555"}),
            ),
            (
                C_UPDATE,
                {"customer_id": "00000149", "field": "customer_phone", "new_value": 5},
                C_UPDATED,
            ),
            (C_SEARCH, {"customer_name": "Jessie Thomas"}, _page(JESSIE | {"customer_phone": 5})),
            (
                C_UPDATE,
                {"customer_id": "00000189", "field": "customer_id", "new_value": "00000999"},
                C_UPDATED,
            ),
            (C_ADD, CUSTOMER, "00001000"),
        ],
    ),
    # -- CRM add: assignee lowered, then the customer email, then the id; the rest as sent.
    (
        "crm-add-lower-order",
        [
            (
                C_ADD,
                CUSTOMER | {"customer_email": 2.0, "assigned_to_email": 5},
                _err(C_ADD, "'int' object has no attribute 'lower'"),
            )
        ],
    ),
    (
        "crm-add-stores-as-sent",
        [
            (
                C_ADD,
                CUSTOMER
                | {
                    "customer_email": "",
                    "customer_phone": 0,
                    "notes": [],
                    "follow_up_by": False,
                    "product_interest": {},
                },
                "00000200",
            ),
            (
                C_ADD,
                CUSTOMER
                | {
                    "customer_name": "Robin Parity",
                    "status": 5,
                    "customer_phone": 5,
                    "notes": [1, 2],
                    "follow_up_by": {"a": 1},
                    "customer_email": "A@B.C",
                    "last_contact_date": True,
                },
                "00000201",
            ),
            (
                C_SEARCH,
                {"customer_name": "Robin Parity"},
                _page(
                    _robin(
                        "00000200",
                        customer_email="",
                        customer_phone=0,
                        product_interest={},
                        follow_up_by=False,
                        notes=[],
                    ),
                    _robin(
                        "00000201",
                        customer_email="a@b.c",
                        customer_phone=5,
                        last_contact_date=True,
                        status=5,
                        follow_up_by={"a": 1},
                        notes=[1, 2],
                    ),
                ),
            ),
            (C_ADD, CUSTOMER | {"customer_name": ["R"]}, "00000202"),
        ],
    ),
    (
        "crm-add-next-to-a-row-without-phone",
        [
            (EMPTY, CRM, ["00000149"]),
            (C_ADD, CUSTOMER | {"customer_phone": 5, "notes": 7}, "00000150"),
            (
                C_SEARCH,
                {"status": "Lead"},
                _page(JESSIE, _robin("00000150", customer_phone=5, notes=7)),
            ),
        ],
    ),
    (
        "crm-add-on-an-emptied-table-lowers-first",
        [
            (EMPTY, CRM, []),
            (
                C_ADD,
                CUSTOMER | {"assigned_to_email": 5},
                _err(C_ADD, "'int' object has no attribute 'lower'"),
            ),
            (
                C_ADD,
                CUSTOMER | {"customer_email": 5},
                _err(C_ADD, "'int' object has no attribute 'lower'"),
            ),
            (C_ADD, CUSTOMER, _err(C_ADD, "cannot convert float NaN to integer")),
        ],
    ),
    (
        "crm-add-id-from-numbers",
        [
            (
                C_UPDATE,
                {"customer_id": "00000199", "field": "customer_id", "new_value": 199},
                C_UPDATED,
            ),
            (
                C_ADD,
                CUSTOMER,
                _err(C_ADD, "'>=' not supported between instances of 'str' and 'int'"),
            ),
            (EMPTY, CRM, [199]),
            (C_UPDATE, {"customer_id": 199, "field": "customer_id", "new_value": 2.5}, C_UPDATED),
            (C_ADD, CUSTOMER, "00000003"),
        ],
    ),
    # -- calendar create: argument messages, then lower-casing, then the id; values as sent.
    (
        "calendar-create-check-order",
        [
            (
                E_CREATE,
                EVENT | {"participant_email": 7, "event_start": "bad"},
                "Invalid event_start format. Expected YYYY-MM-DD HH:MM:SS.",
            ),
            (
                E_CREATE,
                EVENT | {"participant_email": 7, "duration": "x"},
                "Invalid duration format. Expected a number of minutes.",
            ),
            (EMPTY, CALENDAR, []),
            (
                E_CREATE,
                EVENT | {"participant_email": 7},
                _err(E_CREATE, "'int' object has no attribute 'lower'"),
            ),
        ],
    ),
    (
        "calendar-create-stores-as-sent",
        [
            (E_CREATE, EVENT | {"duration": True}, "00000300"),
            (E_GET, {"event_id": "00000300", "field": "duration"}, {"duration": True}),
            (E_CREATE, EVENT | {"duration": 30.5}, "00000301"),
            (E_GET, {"event_id": "00000301", "field": "duration"}, {"duration": 30.5}),
            (E_CREATE, EVENT | {"event_name": ["a", "b"]}, "00000302"),
            (E_GET, {"event_id": "00000302", "field": "event_name"}, {"event_name": ["a", "b"]}),
            (E_CREATE, EVENT | {"event_name": {"a": 1}, "duration": 45}, "00000303"),
            (E_GET, {"event_id": "00000303", "field": "event_name"}, {"event_name": {"a": 1}}),
            (E_GET, {"event_id": "00000303", "field": "duration"}, {"duration": 45}),
            (E_CREATE, EVENT | {"event_start": "2023-12-05"}, "00000304"),
            (
                E_GET,
                {"event_id": "00000304", "field": "event_start"},
                {"event_start": "2023-12-05"},
            ),
            (
                E_GET,
                {"event_id": "00000304", "field": "participant_email"},
                {"participant_email": "a.b@atlas.com"},
            ),
        ],
    ),
]


def _run(tables: SessionTables, steps: list[tuple[Any, ...]], fast: bool) -> None:
    for i, step in enumerate(steps):
        if step[0] == EMPTY:
            _, key, keep = step
            tool, column = _DELETERS[key]
            for row_id in list(tables.table(key).data[column]):
                if row_id not in keep:
                    output = execute(tables, tool, {column: row_id}, fast=fast)
                    assert output.endswith("deleted successfully."), (i, row_id, output)
            continue
        name, arguments, expected = step
        text = arguments if isinstance(arguments, str) else json.dumps(arguments)
        output = json.loads(
            encode_output(execute(tables, name, drop_nulls(parse_arguments(text)), fast=fast))
        )
        assert output == expected, (
            f"step {i} {name} {text}\nexpected: {expected!r}\nactual:   {output!r}"
        )


@needs_shared
@pytest.mark.parametrize("fast", [False, True], ids=["pandas", "fast"])
@pytest.mark.parametrize("case", CASES, ids=[case_id for case_id, _ in CASES])
def test_reference_black_box_behaviour(case, fast, workbench_tables):
    _, steps = case
    _run(SessionTables(workbench_tables), steps, fast)
