"""Argument generators for the project management and CRM tools (fast path vs pandas).

Most draws are what a model sends: ids, names, assignees (in any case) and enum values taken from
the session's current tables, dates, small int pages. The rest are odd on purpose: numbers, bools,
lists and None where strings are expected, empty strings, regex metacharacters, enum values in
the wrong case, fields that are not columns (or the id column), ids that never existed or were
deleted, missing required arguments, unusual pages and page sizes.
"""

from __future__ import annotations

from collections.abc import Callable
from random import Random
from typing import Any

from workplace_env.sandbox.tables import CRM, TASKS, SessionTables

_LISTS = ["Backlog", "In Progress", "In Review", "Completed"]
_BOARDS = ["Back end", "Front end", "Design"]
_STATUSES = ["Qualified", "Won", "Lost", "Lead", "Proposal"]
_PRODUCTS = ["Software", "Hardware", "Services", "Consulting", "Training"]
_TASK_FIELDS = ["task_id", "task_name", "assigned_to_email", "list_name", "due_date", "board"]
_CRM_FIELDS = [
    "customer_id",
    "assigned_to_email",
    "customer_name",
    "customer_email",
    "customer_phone",
    "last_contact_date",
    "product_interest",
    "status",
    "follow_up_by",
    "notes",
]
_ODD = [0, 1, 149, 2.0, 0.5, True, False, None, [], ["x"], {}, {"a": 1}, "", " "]
_PATTERNS = [
    "(",
    ")",
    "[",
    "C++",
    "^add",
    "s3|aws",
    ".",
    ".*",
    "^t.*n$",
    "a{2}",
    "\\d+",
    "end$",
    "(?=add)carousel",
    "(?i)FRONT",
    "*",
    "?",
    "\\",
    "[a-",
    "(a)(b)",
    "ſ",
    "K",
    "ı",
    "İ",
    "café",
    "ß",
    "ANIMATION",
    "in progress",
    "2023-11-2[78]",
    "x{1,",
    "-",
    "@",
    " ",
]
_DATES = [
    "2023-10-01",
    "2023-11-01",
    "2023-11-27",
    "2023-11-30",
    "2023-11-30 23:59:00",
    "2023-12-01",
    "2023-12-07",
    "2023-12-14 23:59:00",
    "2023-12-31",
    "2024-01-15",
    "2023",
    "2023-12",
    "",
    "zzz",
]


def _cases(rng: Random, text: str) -> str:
    """``text`` as sent, lower-cased, upper-cased, or with random letters re-cased."""
    roll = rng.random()
    if roll < 0.4:
        return text
    if roll < 0.55:
        return text.lower()
    if roll < 0.7:
        return text.upper()
    return "".join(c.upper() if rng.random() < 0.5 else c.lower() for c in text)


def _column(tables: SessionTables, key: str, column: str) -> list[Any]:
    return tables.table(key).data[column]


def _pick(rng: Random, cells: list[Any], default: Any) -> Any:
    """A cell of the column (maybe not a str: tools store values as sent), or ``default``."""
    return rng.choice(cells) if cells else default


def _fragment(rng: Random, cells: list[Any]) -> Any:
    """A search value: a word or a slice of a cell, a regex, an odd value, or empty."""
    roll = rng.random()
    cell = _pick(rng, cells, "add")
    if roll < 0.5 and isinstance(cell, str) and cell:
        words = cell.split()
        if words and rng.random() < 0.6:
            return _cases(rng, rng.choice(words))
        start = rng.randrange(len(cell))
        return _cases(rng, cell[start : start + rng.randint(1, 12)])
    if roll < 0.65 and isinstance(cell, str):
        return _cases(rng, cell)
    if roll < 0.85:
        return rng.choice(_PATTERNS)
    if roll < 0.93:
        return rng.choice(["zzz", "parity", "nothing matches this"])
    return rng.choice(_ODD)


def _id(rng: Random, tables: SessionTables, key: str, column: str) -> Any:
    """An existing id mostly; else one that never existed or was maybe deleted, or odd."""
    roll = rng.random()
    if roll < 0.7:
        return _pick(rng, _column(tables, key, column), "00000001")
    if roll < 0.85:
        return f"{rng.randint(0, 320):08d}"
    if roll < 0.9:
        return rng.choice(["00000999", "149", "00000149 ", "abc"])
    cell = _pick(rng, _column(tables, key, column), "00000001")
    odd = [*_ODD, [cell], [cell, cell]]
    if isinstance(cell, str) and cell.isdigit():
        odd.append(int(cell))
    return rng.choice(odd)


def _assignee(rng: Random, tables: SessionTables, key: str) -> Any:
    roll = rng.random()
    if roll < 0.8:
        email = _pick(rng, _column(tables, key, "assigned_to_email"), "a@atlas.com")
        return _cases(rng, email) if isinstance(email, str) else email
    if roll < 0.9:
        return rng.choice(["nobody@atlas.com", "not-an-email", "a@b", "x@y.io", "İ@atlas.com"])
    return rng.choice(_ODD)


def _enum(rng: Random, values: list[str]) -> Any:
    roll = rng.random()
    if roll < 0.75:
        return rng.choice(values)
    if roll < 0.9:
        return _cases(rng, rng.choice(values))
    return rng.choice(["Done", "Backend", "x", *_ODD])


def _date(rng: Random) -> Any:
    return rng.choice(_DATES) if rng.random() < 0.92 else rng.choice(_ODD)


def _maybe_drop(rng: Random, arguments: dict[str, Any], p: float = 0.08) -> dict[str, Any]:
    """Sometimes drop an argument (required or not), sometimes add an unexpected one."""
    if arguments and rng.random() < p:
        del arguments[rng.choice(list(arguments))]
    if rng.random() < 0.02:
        arguments["comment"] = "x"
    return arguments


# -- project management ------------------------------------------------------------------------


def _get_task(rng: Random, tables: SessionTables) -> dict[str, Any]:
    roll = rng.random()
    field = (
        rng.choice(_TASK_FIELDS) if roll < 0.85 else rng.choice(["Task_Name", "priority", *_ODD])
    )
    return _maybe_drop(rng, {"task_id": _id(rng, tables, TASKS, "task_id"), "field": field})


def _search_tasks(rng: Random, tables: SessionTables) -> dict[str, Any]:
    arguments: dict[str, Any] = {}
    for name in rng.sample(
        ["task_name", "assigned_to_email", "list_name", "due_date", "board"], rng.randint(0, 3)
    ):
        if name == "assigned_to_email":
            arguments[name] = _assignee(rng, tables, TASKS)
        elif name in ("list_name", "board") and rng.random() < 0.5:
            arguments[name] = _cases(rng, rng.choice(_LISTS if name == "list_name" else _BOARDS))
        else:
            arguments[name] = _fragment(rng, _column(tables, TASKS, name))
    return _maybe_drop(rng, arguments, 0.02)


def _create_task(rng: Random, tables: SessionTables) -> dict[str, Any]:
    arguments = {
        "task_name": _pick(rng, _column(tables, TASKS, "task_name"), "New task")
        if rng.random() < 0.5
        else rng.choice(["Write parity tests", "Fix login bug", "C++ port", "Zoë's task"]),
        "assigned_to_email": _assignee(rng, tables, TASKS),
        "list_name": _enum(rng, _LISTS),
        "due_date": _date(rng),
        "board": _enum(rng, _BOARDS),
    }
    if rng.random() < 0.05:
        arguments[rng.choice(list(arguments))] = rng.choice(_ODD)
    return _maybe_drop(rng, arguments)


def _delete_task(rng: Random, tables: SessionTables) -> dict[str, Any]:
    return _maybe_drop(rng, {"task_id": _id(rng, tables, TASKS, "task_id")}, 0.03)


def _update_task(rng: Random, tables: SessionTables) -> dict[str, Any]:
    roll = rng.random()
    field = (
        rng.choice(_TASK_FIELDS) if roll < 0.85 else rng.choice(["Task_Name", "priority", *_ODD])
    )
    if field == "assigned_to_email":
        value = _assignee(rng, tables, TASKS)
    elif field == "list_name":
        value = _enum(rng, _LISTS)
    elif field == "board":
        value = _enum(rng, _BOARDS)
    elif field == "due_date":
        value = _date(rng)
    elif field == "task_id":
        value = _id(rng, tables, TASKS, "task_id")
    else:
        value = (
            rng.choice(["Renamed task", "x", "Ünïcode ☕", "", "Kelvin K ſtreet ıi"])
            if rng.random() < 0.9
            else 5
        )
    if rng.random() < 0.05:
        value = rng.choice(_ODD)
    arguments = {"task_id": _id(rng, tables, TASKS, "task_id"), "field": field, "new_value": value}
    return _maybe_drop(rng, arguments)


# -- customer relationship manager -------------------------------------------------------------


def _page(rng: Random) -> Any:
    roll = rng.random()
    if roll < 0.85:
        return rng.randint(-1, 5)
    return rng.choice([0, "2", 2.0, 1.5, 0.5, True, False, None, [1]])


def _page_size(rng: Random) -> Any:
    roll = rng.random()
    if roll < 0.85:
        return rng.randint(1, 12)
    return rng.choice([0, -1, -3, "2", 2.0, 0.5, True, None])


def _search_customers(rng: Random, tables: SessionTables) -> dict[str, Any]:
    arguments: dict[str, Any] = {}
    names = [
        "customer_name",
        "customer_email",
        "product_interest",
        "status",
        "assigned_to_email",
        "last_contact_date_min",
        "last_contact_date_max",
        "follow_up_by_min",
        "follow_up_by_max",
    ]
    for name in rng.sample(names, rng.randint(0, 3)):
        if name in ("product_interest", "status") and rng.random() < 0.6:
            values = _PRODUCTS if name == "product_interest" else _STATUSES
            arguments[name] = _cases(rng, rng.choice(values))
        elif name.endswith(("_min", "_max")):
            cells = _column(tables, CRM, name[:-4])
            arguments[name] = _pick(rng, cells, "2023-11-30") if rng.random() < 0.3 else _date(rng)
        else:
            arguments[name] = _fragment(rng, _column(tables, CRM, name))
    if rng.random() < 0.5:
        arguments["page"] = _page(rng)
    if rng.random() < 0.5:
        arguments["page_size"] = _page_size(rng)
    return _maybe_drop(rng, arguments, 0.02)


def _update_customer(rng: Random, tables: SessionTables) -> dict[str, Any]:
    roll = rng.random()
    field = rng.choice(_CRM_FIELDS) if roll < 0.85 else rng.choice(["phone", "Status", *_ODD])
    if field == "assigned_to_email":
        value = _assignee(rng, tables, CRM)
    elif field == "status":
        value = _enum(rng, _STATUSES)
    elif field == "product_interest":
        value = _enum(rng, _PRODUCTS)
    elif field in ("last_contact_date", "follow_up_by"):
        value = _date(rng)
    elif field == "customer_id":
        value = _id(rng, tables, CRM, "customer_id")
    elif field == "customer_email":
        value = rng.choice(["Taylor.J@NanoLabs.io", "ROBIN@PARITY.IO", "x@y", "TAYLOR.JÄCKSON@X"])
    else:
        value = rng.choice(["555-0100", "Updated note", "Zoë Ångström", "x", ""])
    if rng.random() < 0.06:
        value = rng.choice(_ODD)
    arguments = {
        "customer_id": _id(rng, tables, CRM, "customer_id"),
        "field": field,
        "new_value": value,
    }
    return _maybe_drop(rng, arguments)


def _add_customer(rng: Random, tables: SessionTables) -> dict[str, Any]:
    arguments: dict[str, Any] = {
        "customer_name": rng.choice(
            ["Robin Parity", "Zoë Ångström", "Alex Davis", "Taylor Jackson"]
        ),
        "assigned_to_email": _assignee(rng, tables, CRM),
        "status": _enum(rng, _STATUSES),
    }
    optional: dict[str, Callable[[], Any]] = {
        "customer_email": lambda: rng.choice(["Robin@Parity.IO", "a@b.com", "", "NO.AT.SIGN"]),
        "customer_phone": lambda: rng.choice(["555-0100", "724-857-2625", ""]),
        "last_contact_date": lambda: _date(rng),
        "product_interest": lambda: _enum(rng, _PRODUCTS),
        "notes": lambda: rng.choice(["", "met at fair", "日本語のメモ"]),
        "follow_up_by": lambda: _date(rng),
    }
    for name, make in optional.items():
        roll = rng.random()
        if roll < 0.45:
            arguments[name] = make()
        elif roll < 0.55:
            arguments[name] = None  # verify replay keeps JSON nulls
        elif roll < 0.58:
            arguments[name] = rng.choice(_ODD)
    if rng.random() < 0.05:
        arguments[rng.choice(["customer_name", "assigned_to_email", "status"])] = rng.choice(_ODD)
    return _maybe_drop(rng, arguments, 0.06)


def _delete_customer(rng: Random, tables: SessionTables) -> dict[str, Any]:
    return _maybe_drop(rng, {"customer_id": _id(rng, tables, CRM, "customer_id")}, 0.03)


ARGUMENTS: dict[str, Callable[[Random, SessionTables], dict[str, Any]]] = {
    "project_management_get_task_information_by_id": _get_task,
    "project_management_search_tasks": _search_tasks,
    "project_management_create_task": _create_task,
    "project_management_delete_task": _delete_task,
    "project_management_update_task": _update_task,
    "customer_relationship_manager_search_customers": _search_customers,
    "customer_relationship_manager_update_customer": _update_customer,
    "customer_relationship_manager_add_customer": _add_customer,
    "customer_relationship_manager_delete_customer": _delete_customer,
}
