"""Customer relationship manager tools (4) over the CRM table (``..._crm_data``).

Behaviour, texts and argument defaults are the reference's (REFERENCE.md f.24-27, goldens README).
Odd inputs must fail the way the reference's pandas code fails, so the filters, lookups and writes
use the same pandas operations (``.str.contains(pat, case=False)``, ``column >= bound`` on the date
strings, ``value in column.values``, ``.loc[mask, field] = value``, ``pd.concat``) and the same
pagination arithmetic: their exception texts are golden outputs (``integer division or modulo by
zero`` for ``page_size`` 0, ``'<' not supported between instances of 'int' and 'str'`` for a string
``page``, ...). Missing CSV cells (phone, notes) are NaN and come out as JSON null.

Speed: each tool also has a registered fast path over the session's plain-Python table, for
string arguments (and int pages) on a text-only table; it hands anything else to the pandas
implementation, the exact one, before changing anything. Its helpers are the shared ones of
:mod:`~workplace_env.sandbox.tools.common`. Inside the pandas search, filters also avoid frame
copies when every filter value and cell involved is a string.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from workplace_env.sandbox.tables import CRM, SessionTables
from workplace_env.sandbox.tools.common import (
    IdRecords,
    Predicate,
    all_text,
    filtered_rows,
    frame_next_id,
    frame_records,
    matches_pattern,
    narrow,
    next_id,
    paginate,
    regex_keep,
    text_table,
    with_row,
)
from workplace_env.sandbox.tools.registry import FALLBACK, fast_path, tool

_STATUSES = ["Qualified", "Won", "Lost", "Lead", "Proposal"]
_PRODUCTS = ["Software", "Hardware", "Services", "Consulting", "Training"]

_BAD_STATUS = "Status not valid. Please choose from: 'Qualified', 'Won', 'Lost', 'Lead', 'Proposal'"
_BAD_PRODUCT = (
    "Product interest not valid. Please choose from: 'Software', 'Hardware', 'Services', "
    "'Consulting', 'Training'"
)
_BAD_FIELD = (
    "Field not valid. Please choose from: 'customer_name', 'assigned_to_email', 'customer_email', "
    "'customer_phone', 'last_contact_date', 'product_interest', 'status', 'notes', 'follow_up_by'"
)

_CUSTOMERS = IdRecords(CRM, "customer_id", "Customer")

_ID = {"type": "string", "description": "ID of the customer"}
_NAME = {"type": "string", "description": "Name of the customer"}
_EMAIL = {"type": "string", "description": "Email address of the customer"}
_ASSIGNEE = {
    "type": "string",
    "description": "Email address of the person assigned to the customer",
}


def _string(description: str) -> dict[str, str]:
    return {"type": "string", "description": description}


def _search_filters(
    customer_name: Any,
    customer_email: Any,
    product_interest: Any,
    status: Any,
    assigned_to_email: Any,
    last_contact_date_min: Any,
    last_contact_date_max: Any,
    follow_up_by_min: Any,
    follow_up_by_max: Any,
) -> tuple[list[tuple[str, Any]], list[tuple[str, str, Any]]]:
    """The search's filters in the reference's order, falsy values left out: (column, pattern)
    regex filters, then (column, ">=" or "<=", bound) date bounds."""
    texts = [
        (column, pattern)
        for column, pattern in (
            ("customer_name", customer_name),
            ("customer_email", customer_email),
            ("product_interest", product_interest),
            ("status", status),
            ("assigned_to_email", assigned_to_email),
        )
        if pattern
    ]
    bounds = [
        (column, op, bound)
        for column, op, bound in (
            ("last_contact_date", ">=", last_contact_date_min),
            ("last_contact_date", "<=", last_contact_date_max),
            ("follow_up_by", ">=", follow_up_by_min),
            ("follow_up_by", "<=", follow_up_by_max),
        )
        if bound
    ]
    return texts, bounds


def _matching_rows(crm: pd.DataFrame, texts: list[tuple[str, Any]], bounds: list) -> np.ndarray:
    """Positions of the rows passing every filter, or the pandas exception the reference raises.

    ``texts`` are (column, pattern) regex filters, ``bounds`` (column, ">="/"<=", value) string
    comparisons, both in the reference's order. String patterns and bounds over all-string
    columns take a fast path with the same result (no pandas NA-mask or comparison errors can
    arise there); anything else runs the reference's pandas operations on the narrowed frame.
    """
    columns = {column for column, _ in texts} | {column for column, _, _ in bounds}
    values = [value for _, value in texts] + [value for _, _, value in bounds]
    if all(isinstance(v, str) for v in values) and all(all_text(crm, c) for c in columns):
        rows = np.arange(len(crm))
        for column, pattern in texts:
            rows = rows[regex_keep(crm[column].to_numpy()[rows], pattern)]
        for column, op, bound in bounds:
            cells = crm[column].to_numpy()[rows].tolist()
            if op == ">=":
                keep = [cell >= bound for cell in cells]
            else:
                keep = [cell <= bound for cell in cells]
            rows = rows[np.array(keep, dtype=bool)]
        return rows
    # Filters narrow the frame one after another, as the reference does: a later filter only sees
    # the rows left (which decides whether a missing or non-string cell makes the mask NaN).
    steps = [(column, matches_pattern(pattern)) for column, pattern in texts]
    steps += [(column, _bound_test(op, bound)) for column, op, bound in bounds]
    return np.asarray(narrow(crm, steps), dtype=np.intp)


def _bound_test(op: str, bound: Any) -> Predicate:
    """Cells ``>=`` or ``<=`` the bound, as pandas compares an object column with a value."""
    if op == ">=":
        return lambda cells: cells >= bound
    return lambda cells: cells <= bound


@tool(
    name="customer_relationship_manager_search_customers",
    qualname="CustomerRelationshipManagerTool.search_customers",
    description="Searches for customers based on the given parameters with pagination support.",
    parameters={
        "type": "object",
        "properties": {
            "customer_name": _NAME,
            "customer_email": _EMAIL,
            "product_interest": _string("Product interest of the customer"),
            "status": _string("Current status of the customer"),
            "assigned_to_email": _ASSIGNEE,
            "last_contact_date_min": _string("Minimum last contact date. Format: YYYY-MM-DD"),
            "last_contact_date_max": _string("Maximum last contact date. Format: YYYY-MM-DD"),
            "follow_up_by_min": _string("Minimum follow up date. Format: YYYY-MM-DD"),
            "follow_up_by_max": _string("Maximum follow up date. Format: YYYY-MM-DD"),
            "page": {"type": "integer", "description": "Page number of results to return"},
            "page_size": {"type": "integer", "description": "Number of customers per page"},
        },
        "required": [],
        "additionalProperties": False,
    },
)
def search_customers(
    tables: SessionTables,
    customer_name: Any = None,
    customer_email: Any = None,
    product_interest: Any = None,
    status: Any = None,
    assigned_to_email: Any = None,
    last_contact_date_min: Any = None,
    last_contact_date_max: Any = None,
    follow_up_by_min: Any = None,
    follow_up_by_max: Any = None,
    page: Any = 1,
    page_size: Any = 5,
) -> dict[str, Any] | str:
    """One page of the matching customers, in table order (REFERENCE.md f.24).

    Text filters are case-insensitive regular expressions (Python ``re``); date bounds compare the
    stored strings (``"2023-11-30 23:59:00" >= "2023-11-30"``), inclusive; a missing cell never
    passes a bound. Returns ``{customers: [...], pagination: {total_customers, page, page_size,
    total_pages}}`` with ``page`` clamped to ``[1, total_pages]``. Strings: ``"No search parameters
    provided. Please provide at least one parameter."``, ``"No customers found."``.
    """
    if not any(
        [
            customer_name,
            customer_email,
            product_interest,
            status,
            assigned_to_email,
            last_contact_date_min,
            last_contact_date_max,
            follow_up_by_min,
            follow_up_by_max,
        ]
    ):
        return "No search parameters provided. Please provide at least one parameter."
    crm = tables[CRM]
    texts, bounds = _search_filters(
        customer_name,
        customer_email,
        product_interest,
        status,
        assigned_to_email,
        last_contact_date_min,
        last_contact_date_max,
        follow_up_by_min,
        follow_up_by_max,
    )
    rows = _matching_rows(crm, texts, bounds)

    # The reference pages before it checks for results: odd page/page_size values (0, negative,
    # bool, float, string) give its results or its exception texts even when nothing matched.
    total = len(rows)
    start, end, pagination = paginate("total_customers", total, page, page_size)
    if total <= 0:
        return "No customers found."
    # The reference slices its list of records; slicing the positions list behaves the same.
    return {
        "customers": frame_records(crm, rows.tolist()[start:end]),
        "pagination": pagination,
    }


@fast_path("customer_relationship_manager_search_customers")
def _search_customers_fast(
    tables: SessionTables,
    customer_name: Any = None,
    customer_email: Any = None,
    product_interest: Any = None,
    status: Any = None,
    assigned_to_email: Any = None,
    last_contact_date_min: Any = None,
    last_contact_date_max: Any = None,
    follow_up_by_min: Any = None,
    follow_up_by_max: Any = None,
    page: Any = 1,
    page_size: Any = 5,
) -> Any:
    """Every outcome for str filters (falsy ones ignored), an int ``page`` and an int
    ``page_size`` >= 1 on a text-only table.

    Regex filters narrow the rows in the reference's order (one meeting a missing cell is
    pandas' NA-mask error), then the date bounds (a missing cell never passes a bound, as
    pandas' object comparison has it). Falls back for a non-str truthy filter, a bool/float/str
    page or page size, a page size below 1 and a pattern that does not compile.
    """
    texts, bounds = _search_filters(
        customer_name,
        customer_email,
        product_interest,
        status,
        assigned_to_email,
        last_contact_date_min,
        last_contact_date_max,
        follow_up_by_min,
        follow_up_by_max,
    )
    if not texts and not bounds:
        return "No search parameters provided. Please provide at least one parameter."
    if type(page) is not int or type(page_size) is not int or page_size < 1:
        return FALLBACK
    if any(type(value) is not str for _, value in texts) or any(
        type(bound) is not str for _, _, bound in bounds
    ):
        return FALLBACK
    table = tables.table(CRM)
    if not table.text_only:
        return FALLBACK
    rows = filtered_rows("customer_relationship_manager_search_customers", table, texts)
    if rows is FALLBACK or type(rows) is str:
        return rows
    if rows is None:
        rows = range(len(table.index))
    for column, op, bound in bounds:
        cells = table.data[column]
        if op == ">=":
            rows = [i for i in rows if type(cells[i]) is str and cells[i] >= bound]
        else:
            rows = [i for i in rows if type(cells[i]) is str and cells[i] <= bound]

    # With int page and page_size >= 1 the paging cannot fail, so "no results" may come first.
    total = len(rows)
    if total == 0:
        return "No customers found."
    start, end, pagination = paginate("total_customers", total, page, page_size)
    return {"customers": table.records(rows[start:end]), "pagination": pagination}


@tool(
    name="customer_relationship_manager_update_customer",
    qualname="CustomerRelationshipManagerTool.update_customer",
    description="Updates a customer record by ID.",
    parameters={
        "type": "object",
        "properties": {
            "customer_id": _ID,
            "field": _string(
                "Field to update. Available fields are: 'customer_name', 'assigned_to_email', "
                "'customer_email', 'customer_phone', 'last_contact_date', 'product_interest', "
                "'status', 'notes', 'follow_up_by'"
            ),
            "new_value": _string("New value for the field"),
        },
        "required": ["customer_id", "field", "new_value"],
        "additionalProperties": False,
    },
    writes=(CRM,),
)
def update_customer(
    tables: SessionTables, customer_id: Any = None, field: Any = None, new_value: Any = None
) -> str:
    """Set ``field`` of every customer with this id to ``new_value`` (REFERENCE.md f.25).

    Checks, in order (fast path; black-box for odd types): all three truthy; a status or product
    value must be one of the fixed names (before the lookup); an email value (customer or
    assignee) is lower-cased (a non-str fails on ``lower``); the customer must exist
    (:func:`~workplace_env.sandbox.tools.common.id_rows`); the field must be a column, the id
    column included (an unhashable field fails there). The value is stored with pandas
    ``.loc[rows, field] = value``: any type, a one-item list is unpacked, a dict stores a missing
    cell, a longer list fails (black-box and goldens).
    """
    if not customer_id or not field or not new_value:
        return "Customer ID, field, or new value not provided."
    if field == "status" and new_value not in _STATUSES:
        return _BAD_STATUS
    if field == "product_interest" and new_value not in _PRODUCTS:
        return _BAD_PRODUCT
    if field in ("customer_email", "assigned_to_email"):
        new_value = new_value.lower()
    return _CUSTOMERS.update(tables[CRM], customer_id, field, new_value, _BAD_FIELD)


@fast_path("customer_relationship_manager_update_customer")
def _update_customer_fast(
    tables: SessionTables, customer_id: Any = None, field: Any = None, new_value: Any = None
) -> Any:
    """Every outcome for str arguments on a text-only table (any column, ``customer_id`` too).

    Falls back for a non-str argument (an int value is stored as sent, an int id compares in
    numpy, ``lower`` fails on an int email) and for a table holding non-text cells.
    """
    if not customer_id or not field or not new_value:
        return "Customer ID, field, or new value not provided."
    if type(customer_id) is not str or type(field) is not str or type(new_value) is not str:
        return FALLBACK
    if field == "status" and new_value not in _STATUSES:
        return _BAD_STATUS
    if field == "product_interest" and new_value not in _PRODUCTS:
        return _BAD_PRODUCT
    if field in ["customer_email", "assigned_to_email"]:
        new_value = new_value.lower()
    table = tables.table(CRM)
    if not table.text_only:
        return FALLBACK
    return _CUSTOMERS.update_fast(tables, table, customer_id, field, new_value, _BAD_FIELD)


@tool(
    name="customer_relationship_manager_add_customer",
    qualname="CustomerRelationshipManagerTool.add_customer",
    description="Adds a new customer record.",
    parameters={
        "type": "object",
        "properties": {
            "customer_name": _NAME,
            "assigned_to_email": _ASSIGNEE,
            "status": _string(
                "Current status of the customer. One of: 'Qualified', 'Won', 'Lost', 'Lead', "
                "'Proposal'"
            ),
            "customer_email": _EMAIL,
            "customer_phone": _string("Phone number of the customer"),
            "last_contact_date": _string(
                "The last date the customer was contacted. Format: YYYY-MM-DD"
            ),
            "product_interest": _string(
                "Product interest of the customer. One of: 'Software', 'Hardware', 'Services', "
                "'Consulting', 'Training'"
            ),
            "notes": _string("Notes about the customer"),
            "follow_up_by": _string("Date for the next follow up. Format: YYYY-MM-DD"),
        },
        "required": ["customer_name", "assigned_to_email", "status"],
        "additionalProperties": False,
    },
    writes=(CRM,),
)
def add_customer(
    tables: SessionTables,
    customer_name: Any = None,
    assigned_to_email: Any = None,
    status: Any = None,
    customer_email: Any = None,
    customer_phone: Any = None,
    last_contact_date: Any = None,
    product_interest: Any = None,
    notes: Any = "",
    follow_up_by: Any = None,
) -> str:
    """Append a customer and return its id, the next 8-digit one (REFERENCE.md f.26).

    Status and product are not validated. The assignee is lower-cased, then a truthy customer
    email (a non-str fails on ``lower``, the assignee's first), both before the id is computed
    (black-box: on an emptied table the ``lower`` error wins over the id's NaN error). Other
    values are stored as sent, an omitted optional as None; the table is renumbered 0..n.
    """
    if not all([customer_name, assigned_to_email, status]):
        return "Please provide all required fields: customer_name, assigned_to_email, status."
    assignee = assigned_to_email.lower()
    if customer_email:
        customer_email = customer_email.lower()
    crm = tables[CRM]
    customer_id = frame_next_id(crm["customer_id"])
    row = {
        "customer_id": customer_id,
        "assigned_to_email": assignee,
        "customer_name": customer_name,
        "customer_email": customer_email,
        "customer_phone": customer_phone,
        "last_contact_date": last_contact_date,
        "product_interest": product_interest,
        "status": status,
        "follow_up_by": follow_up_by,
        "notes": notes,
    }
    tables[CRM] = with_row(crm, row, renumber=True)
    return customer_id


@fast_path("customer_relationship_manager_add_customer")
def _add_customer_fast(
    tables: SessionTables,
    customer_name: Any = None,
    assigned_to_email: Any = None,
    status: Any = None,
    customer_email: Any = None,
    customer_phone: Any = None,
    last_contact_date: Any = None,
    product_interest: Any = None,
    notes: Any = "",
    follow_up_by: Any = None,
) -> Any:
    """Every outcome for str required arguments and str-or-None optional ones on a text-only
    table; appends the row (None kept as None) and renumbers the index 0..n-1.

    Falls back for any other argument type (stored as sent, or failing on ``lower``), a
    missing cell in the id column and ids whose maximum is not a number.
    """
    if not all([customer_name, assigned_to_email, status]):
        return "Please provide all required fields: customer_name, assigned_to_email, status."
    if type(customer_name) is not str or type(assigned_to_email) is not str:
        return FALLBACK
    if type(status) is not str:
        return FALLBACK
    optional = (customer_email, customer_phone, last_contact_date, product_interest, notes)
    if any(value is not None and type(value) is not str for value in (*optional, follow_up_by)):
        return FALLBACK
    table = text_table(tables, CRM)
    if table is None:
        return FALLBACK
    customer_id = next_id(table.data["customer_id"])
    if customer_id is None:
        return FALLBACK
    if customer_email:
        customer_email = customer_email.lower()
    row = (
        customer_id,
        assigned_to_email.lower(),
        customer_name,
        customer_email,
        customer_phone,
        last_contact_date,
        product_interest,
        status,
        follow_up_by,
        notes,
    )
    tables.writable(CRM).append_row(row)
    return customer_id


@tool(
    name="customer_relationship_manager_delete_customer",
    qualname="CustomerRelationshipManagerTool.delete_customer",
    description="Deletes a customer record by ID.",
    parameters={
        "type": "object",
        "properties": {"customer_id": _ID},
        "required": ["customer_id"],
        "additionalProperties": False,
    },
    writes=(CRM,),
)
def delete_customer(tables: SessionTables, customer_id: Any = None) -> str:
    """Remove every customer with this id (REFERENCE.md f.27); the other rows keep their labels.

    The id is looked up as :func:`~workplace_env.sandbox.tools.common.id_rows` does (a list id
    fails there; another type than the stored ids is not found).
    """
    return _CUSTOMERS.delete(tables, customer_id)


@fast_path("customer_relationship_manager_delete_customer")
def _delete_customer_fast(tables: SessionTables, customer_id: Any = None) -> Any:
    """Every outcome for a str ``customer_id`` on a text-only table (rows keep their labels).

    Falls back for other id types (a list broadcasts in numpy, an int compares) and for a table
    holding non-text cells.
    """
    return _CUSTOMERS.delete_fast(tables, customer_id)
