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
    FieldRule,
    IdRecords,
    NewRow,
    Predicate,
    all_text,
    append_text_row,
    filtered_rows,
    frame_append,
    frame_records,
    matches_pattern,
    narrow,
    paginate,
    regex_keep,
)
from workplace_env.sandbox.tools.registry import FALLBACK, Toolkit, integer, listing, string

_KIT = Toolkit("customer_relationship_manager")

_STATUSES = ("Qualified", "Won", "Lost", "Lead", "Proposal")
_PRODUCTS = ("Software", "Hardware", "Services", "Consulting", "Training")
#: The fields an update may name, in the order its schema and its refusal list them.
_UPDATABLE = (
    "customer_name",
    "assigned_to_email",
    "customer_email",
    "customer_phone",
    "last_contact_date",
    "product_interest",
    "status",
    "notes",
    "follow_up_by",
)
_ID = string("ID of the customer")
_NO_SEARCH = "No search parameters provided. Please provide at least one parameter."
_CUSTOMERS = IdRecords(
    CRM,
    "Customer",
    _ID,
    _UPDATABLE,
    {
        "status": FieldRule(
            _STATUSES, listing("Status not valid. Please choose from: ", _STATUSES)
        ),
        "product_interest": FieldRule(
            _PRODUCTS, listing("Product interest not valid. Please choose from: ", _PRODUCTS)
        ),
        "customer_email": FieldRule(lower=True),
        "assigned_to_email": FieldRule(lower=True),
    },
    listing("Field not valid. Please choose from: ", _UPDATABLE),
)

#: The add's checks: status and product are not validated; the assignee is lower-cased, then a
#: truthy customer email (a non-str fails on ``lower``, the assignee's first).
_ADD_REQUIRED = ("customer_name", "assigned_to_email", "status")
_NEW = NewRow(
    _ADD_REQUIRED,
    f"Please provide all required fields: {', '.join(_ADD_REQUIRED)}.",
    ("assigned_to_email", "customer_email"),
    {"notes": ""},
)
_NAME = string("Name of the customer")
_EMAIL = string("Email address of the customer")
_ASSIGNEE = string("Email address of the person assigned to the customer")


#: The search's regex filters and date bounds, in the reference's order: argument names, and
#: for a bound its column and comparison.
_TEXT_FILTERS = (
    "customer_name",
    "customer_email",
    "product_interest",
    "status",
    "assigned_to_email",
)
_BOUNDS = (
    ("last_contact_date_min", "last_contact_date", ">="),
    ("last_contact_date_max", "last_contact_date", "<="),
    ("follow_up_by_min", "follow_up_by", ">="),
    ("follow_up_by_max", "follow_up_by", "<="),
)


# -- the tools' advertised parameters (their schema's properties), by method -----------------------

_SEARCH_CUSTOMERS = {
    "customer_name": _NAME,
    "customer_email": _EMAIL,
    "product_interest": string("Product interest of the customer"),
    "status": string("Current status of the customer"),
    "assigned_to_email": _ASSIGNEE,
    "last_contact_date_min": string("Minimum last contact date. Format: YYYY-MM-DD"),
    "last_contact_date_max": string("Maximum last contact date. Format: YYYY-MM-DD"),
    "follow_up_by_min": string("Minimum follow up date. Format: YYYY-MM-DD"),
    "follow_up_by_max": string("Maximum follow up date. Format: YYYY-MM-DD"),
    "page": integer("Page number of results to return"),
    "page_size": integer("Number of customers per page"),
}
_ADD_CUSTOMER = {
    "customer_name": _NAME,
    "assigned_to_email": _ASSIGNEE,
    "status": string(listing("Current status of the customer. One of: ", _STATUSES)),
    "customer_email": _EMAIL,
    "customer_phone": string("Phone number of the customer"),
    "last_contact_date": string("The last date the customer was contacted. Format: YYYY-MM-DD"),
    "product_interest": string(listing("Product interest of the customer. One of: ", _PRODUCTS)),
    "notes": string("Notes about the customer"),
    "follow_up_by": string("Date for the next follow up. Format: YYYY-MM-DD"),
}


def _search_filters(
    filters: dict[str, Any],
) -> tuple[list[tuple[str, Any]], list[tuple[str, str, Any]]]:
    """The search's ``filters`` (its arguments but the paging ones) in the reference's order,
    falsy values left out: (column, pattern) regex filters, then (column, ">=" or "<=", bound)
    date bounds."""
    texts = [(column, filters[column]) for column in _TEXT_FILTERS if filters.get(column)]
    bounds = [(column, op, filters[name]) for name, column, op in _BOUNDS if filters.get(name)]
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


@_KIT.tool(
    "Searches for customers based on the given parameters with pagination support.",
    _SEARCH_CUSTOMERS,
    required=(),
)
def search_customers(
    tables: SessionTables, page: Any = 1, page_size: Any = 5, **filters: Any
) -> dict[str, Any] | str:
    """One page of the matching customers, in table order (REFERENCE.md f.24).

    ``filters`` as :func:`_search_filters` reads them. Text filters are case-insensitive regular
    expressions (Python ``re``); date bounds compare the stored strings (``"2023-11-30 23:59:00"
    >= "2023-11-30"``), inclusive; a missing cell never passes a bound. Returns ``{customers:
    [...], pagination: {total_customers, page, page_size, total_pages}}`` with ``page`` clamped
    to ``[1, total_pages]``. Strings: ``"No search parameters provided. Please provide at least
    one parameter."``, ``"No customers found."``.
    """
    texts, bounds = _search_filters(filters)
    if not texts and not bounds:
        return _NO_SEARCH
    crm = tables[CRM]
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


@_KIT.fast_path("search_customers")
def _search_customers_fast(
    tables: SessionTables, page: Any = 1, page_size: Any = 5, **filters: Any
) -> Any:
    """Every outcome for str filters (falsy ones ignored), an int ``page`` and an int
    ``page_size`` >= 1 on a text-only table.

    Regex filters narrow the rows in the reference's order (one meeting a missing cell is
    pandas' NA-mask error), then the date bounds (a missing cell never passes a bound, as
    pandas' object comparison has it). Falls back for a non-str truthy filter, a bool/float/str
    page or page size, a page size below 1 and a pattern that does not compile.
    """
    texts, bounds = _search_filters(filters)
    if not texts and not bounds:
        return _NO_SEARCH
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


_CUSTOMERS.declare_update(_KIT, "customer record", "f.25")


@_KIT.tool("Adds a new customer record.", _ADD_CUSTOMER, required=_ADD_REQUIRED, writes=(CRM,))
def add_customer(tables: SessionTables, **arguments: Any) -> str:
    """Append a customer and return its id, the next 8-digit one (REFERENCE.md f.26).

    ``arguments`` as :data:`_NEW` has them checked, the addresses lower-cased before the id is
    computed (black-box: on an emptied table the ``lower`` error wins over the id's NaN error);
    the table is renumbered 0..n.
    """
    cells = _CUSTOMERS.new_cells(_NEW, arguments)
    if type(cells) is str:
        return cells
    return frame_append(tables, CRM, cells)


@_KIT.fast_path("add_customer")
def _add_customer_fast(tables: SessionTables, **arguments: Any) -> Any:
    """Every outcome for str-or-None arguments on a text-only table; appends the row (None kept
    as None) and renumbers the index 0..n-1.

    Falls back for any other argument type (stored as sent, or failing on ``lower``), a
    missing cell in the id column and ids whose maximum is not a number.
    """
    if any(value is not None and type(value) is not str for value in arguments.values()):
        return FALLBACK
    cells = _CUSTOMERS.new_cells(_NEW, arguments)
    if type(cells) is str:
        return cells
    return append_text_row(tables, CRM, cells)


_CUSTOMERS.declare_delete(_KIT, "customer record", "f.27")
