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

from workplace_env.sandbox.tables import COLUMNS, TASKS, SessionTables
from workplace_env.sandbox.tools.common import (
    FieldRule,
    IdRecords,
    NewRow,
    append_text_row,
    equals_lowered,
    filtered_rows,
    frame_append,
    frame_records,
    matches_pattern,
    narrow,
    text_table,
)
from workplace_env.sandbox.tools.registry import FALLBACK, Toolkit, listing, string

_KIT = Toolkit("project_management")

_LISTS = ("Backlog", "In Progress", "In Review", "Completed")
_BOARDS = ("Back end", "Front end", "Design")
# The search's assignee must look like an address before it is matched (exactly, any case).
_EMAIL_FORMAT = r"^[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\.[a-zA-Z]{2,}$"
_email_format_match = re.compile(_EMAIL_FORMAT).match

_BAD_LIST = listing("List not valid. Please choose from: ", _LISTS) + "."
_BAD_BOARD = listing("Board not valid. Please choose from: ", _BOARDS) + "."
_BAD_ASSIGNEE = "Assignee email not valid. Please choose from the list of team members."
#: What an update (and a create) requires of the list, board and assignee values.
_RULES = {
    "list_name": FieldRule(_LISTS, _BAD_LIST),
    "board": FieldRule(_BOARDS, _BAD_BOARD),
    "assigned_to_email": FieldRule(refusal=_BAD_ASSIGNEE, lower=True, known=True),
}
_ID = string("8-digit ID of the task")
_TASKS = IdRecords(TASKS, "Task", _ID, COLUMNS[TASKS][1:], _RULES, "Field not valid.")

#: The create's checks: every argument truthy, then the update's rules for the assignee
#: (lower-cased, a non-str fails on ``lower``; known to the table), the list and the board.
_NEW = NewRow(
    COLUMNS[TASKS][1:], "Missing task details.", ("assigned_to_email", "list_name", "board")
)
_NAME = string("Name of the task")
_ASSIGNEE = string("Email address of the person assigned to the task")
_DUE = string("Due date of the task in YYYY-MM-DD format")
_LIST = "Name of the list the task belongs to"
_BOARD = "Name of the board the task belongs to"


# -- the tools' advertised parameters (their schema's properties), by method -----------------------

_GET_TASK_INFORMATION_BY_ID = {
    "task_id": _ID,
    "field": string(listing("Field to return. Available fields are: ", COLUMNS[TASKS])),
}
_SEARCH_TASKS = {
    "task_name": _NAME,
    "assigned_to_email": _ASSIGNEE,
    "list_name": string(_LIST),
    "due_date": _DUE,
    "board": string(_BOARD),
}
_CREATE_TASK = {
    **_SEARCH_TASKS,
    "list_name": string(listing(f"{_LIST}. One of: ", _LISTS)),
    "board": string(listing(f"{_BOARD}. One of: ", _BOARDS)),
}


def _search_filters(filters: dict[str, Any]) -> list[tuple[str, Any]] | str:
    """The search's (column, value) filters in the reference's order, falsy values left out, or
    the message refusing them: none at all, an assignee that does not look like an address (a
    non-str one fails in ``re``: black-box)."""
    found = [(column, filters[column]) for column in COLUMNS[TASKS][1:] if filters.get(column)]
    if not found:
        return "No search parameters provided."
    assignee = filters.get("assigned_to_email")
    if assignee and not _email_format_match(assignee):
        return "Invalid email format for assigned_to_email."
    return found


@_KIT.tool("Returns the task information for a given ID.", _GET_TASK_INFORMATION_BY_ID)
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


@_KIT.fast_path("get_task_information_by_id")
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


@_KIT.tool("Searches for tasks based on the given parameters.", _SEARCH_TASKS, required=())
def search_tasks(tables: SessionTables, **filters: Any) -> list[dict[str, Any]] | str:
    """The tasks passing every given filter, as row dicts in table order (REFERENCE.md f.20).

    ``filters`` as :func:`_search_filters` reads and checks them. Then the filters narrow the
    table in parameter order: the assignee is an exact case-insensitive match, the others
    case-insensitive regular expressions (pandas ``str.contains``), so their pattern errors, the
    NA-mask error of a non-text cell and the ``.str`` accessor's error on a column left without
    text are the outputs (goldens; black-box for the last).
    """
    found = _search_filters(filters)
    if type(found) is str:
        return found
    steps = [
        (
            column,
            equals_lowered(value.lower())
            if column == "assigned_to_email"
            else matches_pattern(value),
        )
        for column, value in found
    ]
    tasks = tables[TASKS]
    return frame_records(tasks, narrow(tasks, steps))


@_KIT.fast_path("search_tasks")
def _search_tasks_fast(tables: SessionTables, **filters: Any) -> Any:
    """Every outcome for str filters (falsy ones ignored) on a text-only table.

    Filters narrow the rows in the reference's order; a regex filter meeting a missing cell is
    pandas' NA-mask error. Falls back for a non-str truthy filter and a pattern that does not
    compile (pandas' error text decides).
    """
    if any(value and type(value) is not str for value in filters.values()):
        return FALLBACK
    found = _search_filters(filters)
    if type(found) is str:
        return found
    table = tables.table(TASKS)
    if not table.text_only:
        return FALLBACK
    # The assignee is an exact case-insensitive match, the others regex searches.
    tests = [
        (column, ("=", value.lower()) if column == "assigned_to_email" else value)
        for column, value in found
    ]
    rows = filtered_rows("project_management_search_tasks", table, tests)
    if rows is FALLBACK or type(rows) is str:
        return rows
    return table.records(rows)


@_KIT.tool("Creates a new task.", _CREATE_TASK, writes=(TASKS,))
def create_task(tables: SessionTables, **arguments: Any) -> str:
    """Append a task and return its id, the next 8-digit one (REFERENCE.md f.21).

    ``arguments`` as :data:`_NEW` has them checked (name and due date kept as sent); the table
    is renumbered 0..n (:func:`~workplace_env.sandbox.tools.common.frame_append`).
    """
    cells = _TASKS.new_cells(_NEW, arguments, lambda name: tables[TASKS][name].tolist())
    if type(cells) is str:
        return cells
    return frame_append(tables, TASKS, cells)


@_KIT.fast_path("create_task")
def _create_task_fast(tables: SessionTables, **arguments: Any) -> Any:
    """Every outcome for str arguments on a text-only table; appends and renumbers 0..n-1.

    Falls back for a non-str argument (stored as sent, or failing on ``lower``), a missing id
    (pandas' max skips it) and ids whose maximum is not a number.
    """
    if any(type(value) is not str for value in arguments.values()):
        return FALLBACK
    table = text_table(tables, TASKS)
    if table is None:
        return FALLBACK
    cells = _TASKS.new_cells(_NEW, arguments, table.data.__getitem__)
    if type(cells) is str:
        return cells
    return append_text_row(tables, TASKS, cells)


_TASKS.declare_delete(_KIT, "task", "f.22")
_TASKS.declare_update(_KIT, "task", "f.23")
