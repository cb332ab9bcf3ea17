"""Project management tools (5) over the ``project_management._project_tasks`` table.

Behaviour, texts and argument defaults are the reference's (REFERENCE.md f.19-23, goldens README).
Odd inputs must fail the way the reference's pandas code fails, so the filters, lookups and writes
below use the same pandas operations (``Series == value``, ``.str.contains(pat, case=False)``,
``value in column.values``, ``.loc[mask, field] = value``, ``pd.concat``): their exception texts are
part of the golden outputs (e.g. ``('Lengths must match to compare', (300,), (1,))`` for a list id,
``Cannot mask with non-boolean array containing NA / NaN values`` once a cell holds a non-string).
Every cell of this table is an object (a value a tool stored keeps the type it was sent with).

Speed: each tool also has a registered fast path over the session's plain-Python table
(:class:`~workplace_env.sandbox.table.Table`), for string arguments on a text-only table; it
hands anything else to the pandas implementation, the exact one, before changing anything. Its
helpers are the shared ones of :mod:`~workplace_env.sandbox.tools.common`, as are the pandas
implementations' filter steps, id lookups, appends and new ids (written from REFERENCE.md, the
goldens and black-box calls to the reference server; tests/domain/test_tool_blackbox.py).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from workplace_env.sandbox.tables import TASKS, SessionTables
from workplace_env.sandbox.tools.common import (
    IdRecords,
    cell_flags,
    cell_test,
    equals_lowered,
    filtered_rows,
    frame_next_id,
    frame_records,
    matches_pattern,
    narrow,
    next_id,
    text_table,
    with_row,
)
from workplace_env.sandbox.tools.registry import FALLBACK, fast_path, tool

_LISTS = ["Backlog", "In Progress", "In Review", "Completed"]
_BOARDS = ["Back end", "Front end", "Design"]
# The search's assignee must look like an address before it is matched (exactly, any case).
_EMAIL_FORMAT = r"^[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\.[a-zA-Z]{2,}$"
_email_format_match = re.compile(_EMAIL_FORMAT).match

_BAD_LIST = (
    "List not valid. Please choose from: 'Backlog', 'In Progress', 'In Review', 'Completed'."
)
_BAD_BOARD = "Board not valid. Please choose from: 'Back end', 'Front end', 'Design'."
_BAD_ASSIGNEE = "Assignee email not valid. Please choose from the list of team members."

_TASKS = IdRecords(TASKS, "task_id", "Task")

_ID = {"type": "string", "description": "8-digit ID of the task"}
_NAME = {"type": "string", "description": "Name of the task"}
_ASSIGNEE = {"type": "string", "description": "Email address of the person assigned to the task"}
_DUE = {"type": "string", "description": "Due date of the task in YYYY-MM-DD format"}


def _knows_assignee(cells: list[Any], email: str) -> bool:
    """True when some text cell of the assignee column, lower-cased, equals ``email`` (already
    lower-cased): the team members a create or update may name (REFERENCE.md f.21). A missing
    or non-text cell equals nothing."""
    if email in cells and email.lower() == email:  # an exact hit lower-cases to itself
        return True
    entry = cell_test(("=", email))
    assert entry is not None
    return any(cell_flags(entry, cells))


def _search_filters(
    task_name: Any, assigned_to_email: Any, list_name: Any, due_date: Any, board: Any
) -> list[tuple[str, Any]]:
    """The search's (column, value) filters in the reference's order; falsy values are none."""
    return [
        (column, value)
        for column, value in (
            ("task_name", task_name),
            ("assigned_to_email", assigned_to_email),
            ("list_name", list_name),
            ("due_date", due_date),
            ("board", board),
        )
        if value
    ]


@tool(
    name="project_management_get_task_information_by_id",
    qualname="ProjectManagementTool.get_task_information_by_id",
    description="Returns the task information for a given ID.",
    parameters={
        "type": "object",
        "properties": {
            "task_id": _ID,
            "field": {
                "type": "string",
                "description": "Field to return. Available fields are: 'task_id', 'task_name', "
                "'assigned_to_email', 'list_name', 'due_date', 'board'",
            },
        },
        "required": ["task_id", "field"],
        "additionalProperties": False,
    },
)
def get_task_information_by_id(
    tables: SessionTables, task_id: Any = None, field: Any = None
) -> dict[str, Any] | str:
    """``{field: value}`` of the first task whose id equals ``task_id`` (REFERENCE.md f.19).

    Strings: ``"Task ID not provided."``, ``"Field not provided."`` (falsy arguments),
    ``"Task not found."`` (checked before the field), ``"Field not found."``.
    """
    if not task_id:
        return "Task ID not provided."
    if not field:
        return "Field not provided."
    tasks = tables[TASKS]
    if isinstance(task_id, str):
        hits = np.flatnonzero(tasks["task_id"].to_numpy() == task_id)
    else:
        # pandas' Series == value: a list id raises its "Lengths must match" error, an int misses.
        hits = np.flatnonzero((tasks["task_id"] == task_id).to_numpy())
    if not len(hits):
        return "Task not found."
    row = frame_records(tasks, [hits[0]])[0]
    # Dict membership: an unhashable field raises "unhashable type", a non-string misses.
    if field in row:
        return {field: row[field]}
    return "Field not found."


@fast_path("project_management_get_task_information_by_id")
def _get_task_information_by_id_fast(
    tables: SessionTables, task_id: Any = None, field: Any = None
) -> Any:
    """Every outcome for a str ``task_id`` and str ``field`` on a text-only table.

    Falls back for other id or field types (list ids raise in pandas, unhashable fields too) and
    for a table holding non-text cells.
    """
    if not task_id:
        return "Task ID not provided."
    if not field:
        return "Field not provided."
    table = tables.table(TASKS)
    if type(task_id) is not str or type(field) is not str or not table.text_only:
        return FALLBACK
    i = table.first("task_id", task_id)
    if i is None:
        return "Task not found."
    cells = table.data.get(field)
    if cells is None:
        return "Field not found."
    return {field: cells[i]}


@tool(
    name="project_management_search_tasks",
    qualname="ProjectManagementTool.search_tasks",
    description="Searches for tasks based on the given parameters.",
    parameters={
        "type": "object",
        "properties": {
            "task_name": _NAME,
            "assigned_to_email": _ASSIGNEE,
            "list_name": {"type": "string", "description": "Name of the list the task belongs to"},
            "due_date": _DUE,
            "board": {"type": "string", "description": "Name of the board the task belongs to"},
        },
        "required": [],
        "additionalProperties": False,
    },
)
def search_tasks(
    tables: SessionTables,
    task_name: Any = None,
    assigned_to_email: Any = None,
    list_name: Any = None,
    due_date: Any = None,
    board: Any = None,
) -> list[dict[str, Any]] | str:
    """The tasks passing every given filter, as row dicts in table order (REFERENCE.md f.20).

    Falsy arguments are no filter; with none at all: ``"No search parameters provided."``. A
    given assignee must look like an address first (``"Invalid email format for
    assigned_to_email."``; a non-str one fails in ``re``, before any filter: black-box). Then the
    filters narrow the table in parameter order: the assignee is an exact case-insensitive match,
    the others case-insensitive regular expressions (pandas ``str.contains``), so their pattern
    errors, the NA-mask error of a non-text cell and the ``.str`` accessor's error on a column
    left without text are the outputs (goldens; black-box for the last).
    """
    filters = _search_filters(task_name, assigned_to_email, list_name, due_date, board)
    if not filters:
        return "No search parameters provided."
    if assigned_to_email and not _email_format_match(assigned_to_email):
        return "Invalid email format for assigned_to_email."
    steps = [
        (
            column,
            equals_lowered(value.lower())
            if column == "assigned_to_email"
            else matches_pattern(value),
        )
        for column, value in filters
    ]
    tasks = tables[TASKS]
    return frame_records(tasks, narrow(tasks, steps))


@fast_path("project_management_search_tasks")
def _search_tasks_fast(
    tables: SessionTables,
    task_name: Any = None,
    assigned_to_email: Any = None,
    list_name: Any = None,
    due_date: Any = None,
    board: Any = None,
) -> Any:
    """Every outcome for str filters (falsy ones ignored) on a text-only table.

    Filters narrow the rows in the reference's order; a regex filter meeting a missing cell is
    pandas' NA-mask error. Falls back for a non-str truthy filter and a pattern that does not
    compile (pandas' error text decides).
    """
    if not any([task_name, assigned_to_email, list_name, due_date, board]):
        return "No search parameters provided."
    filters = _search_filters(task_name, assigned_to_email, list_name, due_date, board)
    if any(type(value) is not str for _, value in filters):
        return FALLBACK
    if assigned_to_email and not _email_format_match(assigned_to_email):
        return "Invalid email format for assigned_to_email."
    table = tables.table(TASKS)
    if not table.text_only:
        return FALLBACK
    # The assignee is an exact case-insensitive match, the others regex searches.
    tests = [
        (column, ("=", value.lower()) if column == "assigned_to_email" else value)
        for column, value in filters
    ]
    rows = filtered_rows("project_management_search_tasks", table, tests)
    if rows is FALLBACK or type(rows) is str:
        return rows
    return table.records(rows)


@tool(
    name="project_management_create_task",
    qualname="ProjectManagementTool.create_task",
    description="Creates a new task.",
    parameters={
        "type": "object",
        "properties": {
            "task_name": _NAME,
            "assigned_to_email": _ASSIGNEE,
            "list_name": {
                "type": "string",
                "description": "Name of the list the task belongs to. One of: 'Backlog', "
                "'In Progress', 'In Review', 'Completed'",
            },
            "due_date": _DUE,
            "board": {
                "type": "string",
                "description": "Name of the board the task belongs to. One of: 'Back end', "
                "'Front end', 'Design'",
            },
        },
        "required": ["task_name", "assigned_to_email", "list_name", "due_date", "board"],
        "additionalProperties": False,
    },
    writes=(TASKS,),
)
def create_task(
    tables: SessionTables,
    task_name: Any = None,
    assigned_to_email: Any = None,
    list_name: Any = None,
    due_date: Any = None,
    board: Any = None,
) -> str:
    """Append a task and return its id, the next 8-digit one (REFERENCE.md f.21).

    Checks, in order (fast path; black-box for odd types): every argument truthy (``"Missing
    task details."``); the assignee, lower-cased (a non-str fails on ``lower``), must be someone
    the table already assigns; the list, then the board, must be one of the fixed names. Name
    and due date are stored as sent (any type); the table is renumbered 0..n.
    """
    if not all([task_name, assigned_to_email, list_name, due_date, board]):
        return "Missing task details."
    assignee = assigned_to_email.lower()
    tasks = tables[TASKS]
    if not _knows_assignee(tasks["assigned_to_email"].tolist(), assignee):
        return _BAD_ASSIGNEE
    if list_name not in _LISTS:
        return _BAD_LIST
    if board not in _BOARDS:
        return _BAD_BOARD
    task_id = frame_next_id(tasks["task_id"])
    row = {
        "task_id": task_id,
        "task_name": task_name,
        "assigned_to_email": assignee,
        "list_name": list_name,
        "due_date": due_date,
        "board": board,
    }
    tables[TASKS] = with_row(tasks, row, renumber=True)
    return task_id


@fast_path("project_management_create_task")
def _create_task_fast(
    tables: SessionTables,
    task_name: Any = None,
    assigned_to_email: Any = None,
    list_name: Any = None,
    due_date: Any = None,
    board: Any = None,
) -> Any:
    """Every outcome for five str arguments on a text-only table; appends and renumbers 0..n-1.

    Falls back for a non-str argument (stored as sent, or failing on ``lower``), a missing id
    (pandas' max skips it) and ids whose maximum is not a number.
    """
    values = (task_name, assigned_to_email, list_name, due_date, board)
    if not all(values):
        return "Missing task details."
    if any(type(value) is not str for value in values):
        return FALLBACK
    table = text_table(tables, TASKS)
    if table is None:
        return FALLBACK
    assigned_to_email = assigned_to_email.lower()
    if not _knows_assignee(table.data["assigned_to_email"], assigned_to_email):
        return _BAD_ASSIGNEE
    if list_name not in _LISTS:
        return _BAD_LIST
    if board not in _BOARDS:
        return _BAD_BOARD
    task_id = next_id(table.data["task_id"])
    if task_id is None:
        return FALLBACK
    row = (task_id, task_name, assigned_to_email, list_name, due_date, board)
    tables.writable(TASKS).append_row(row)
    return task_id


@tool(
    name="project_management_delete_task",
    qualname="ProjectManagementTool.delete_task",
    description="Deletes a task by ID.",
    parameters={
        "type": "object",
        "properties": {"task_id": _ID},
        "required": ["task_id"],
        "additionalProperties": False,
    },
    writes=(TASKS,),
)
def delete_task(tables: SessionTables, task_id: Any = None) -> str:
    """Remove every task with this id (REFERENCE.md f.22); the other rows keep their labels.

    The id is looked up as :func:`~workplace_env.sandbox.tools.common.id_rows` does (a list id
    fails there; another type than the stored ids is not found).
    """
    return _TASKS.delete(tables, task_id)


@fast_path("project_management_delete_task")
def _delete_task_fast(tables: SessionTables, task_id: Any = None) -> Any:
    """Every outcome for a str ``task_id`` on a text-only table (rows keep their labels).

    Falls back for other id types (a list broadcasts in numpy, an int compares) and for a table
    holding non-text cells.
    """
    return _TASKS.delete_fast(tables, task_id)


@tool(
    name="project_management_update_task",
    qualname="ProjectManagementTool.update_task",
    description="Updates a task by ID.",
    parameters={
        "type": "object",
        "properties": {
            "task_id": _ID,
            "field": {
                "type": "string",
                "description": "Field to update. Available fields are: 'task_name', "
                "'assigned_to_email', 'list_name', 'due_date', 'board'",
            },
            "new_value": {"type": "string", "description": "New value for the field"},
        },
        "required": ["task_id", "field", "new_value"],
        "additionalProperties": False,
    },
    writes=(TASKS,),
)
def update_task(
    tables: SessionTables, task_id: Any = None, field: Any = None, new_value: Any = None
) -> str:
    """Set ``field`` of every task with this id to ``new_value`` (REFERENCE.md f.23).

    Checks, in order (fast path; black-box for odd types): all three truthy; an assignee value is
    lower-cased (a non-str fails on ``lower``); a board or list value must be one of the fixed
    names and an assignee one the table knows (all before the lookup); the task must exist
    (:func:`~workplace_env.sandbox.tools.common.id_rows`); the field must be a column, the id
    column included (an unhashable field fails there). The value is stored with pandas
    ``.loc[rows, field] = value``: any type, a one-item list is unpacked, a dict stores a missing
    cell, a longer list fails (black-box and goldens).
    """
    if not task_id or not field or not new_value:
        return "Task ID, field, or new value not provided."
    if field == "assigned_to_email":
        new_value = new_value.lower()
    if field == "board" and new_value not in _BOARDS:
        return _BAD_BOARD
    if field == "list_name" and new_value not in _LISTS:
        return _BAD_LIST
    tasks = tables[TASKS]
    if field == "assigned_to_email" and not _knows_assignee(
        tasks["assigned_to_email"].tolist(), new_value
    ):
        return _BAD_ASSIGNEE
    return _TASKS.update(tasks, task_id, field, new_value, "Field not valid.")


@fast_path("project_management_update_task")
def _update_task_fast(
    tables: SessionTables, task_id: Any = None, field: Any = None, new_value: Any = None
) -> Any:
    """Every outcome for str arguments on a text-only table (any column, ``task_id`` included).

    Falls back for a non-str argument (an int value is stored as sent, an int id compares in
    numpy) and for a table holding non-text cells.
    """
    if not task_id or not field or not new_value:
        return "Task ID, field, or new value not provided."
    if type(task_id) is not str or type(field) is not str or type(new_value) is not str:
        return FALLBACK
    table = tables.table(TASKS)
    if not table.text_only:
        return FALLBACK
    if field == "assigned_to_email":
        new_value = new_value.lower()
    if field == "board" and new_value not in _BOARDS:
        return _BAD_BOARD
    if field == "list_name" and new_value not in _LISTS:
        return _BAD_LIST
    if field == "assigned_to_email" and not _knows_assignee(
        table.data["assigned_to_email"], new_value
    ):
        return _BAD_ASSIGNEE
    return _TASKS.update_fast(tables, table, task_id, field, new_value, "Field not valid.")
