"""The company directory toolkit (1 tool): look up colleagues' addresses by name.

Source: REFERENCE.md f.1 and the goldens (``tool_calls_public.jsonl``, ``tool-directory-*``).
"""

from __future__ import annotations

import re
from typing import Any

from workplace_env.sandbox.tables import DIRECTORY, SessionTables
from workplace_env.sandbox.tools.registry import FALLBACK, Toolkit, string

_KIT = Toolkit("company_directory")


# -- the tools' advertised parameters (their schema's properties), by method -----------------------

_FIND_EMAIL_ADDRESS = {"name": string("Name or partial name to search for in email addresses")}


@_KIT.tool(
    "Finds all email addresses containing the given name (case-insensitive search).",
    _FIND_EMAIL_ADDRESS,
    required=(),
)
def find_email_address(tables: SessionTables, name: str = "") -> list[str] | str:
    """Every directory address the lower-cased ``name`` matches, in table order (REFERENCE.md f.1).

    The name is a case-insensitive Python regular expression (``"(?=a)"`` is valid, ``"("`` raises
    ``re.error``, which the caller turns into the tool error string). Returns a list of strings
    (possibly empty) or ``"Name not provided."`` for an empty name. Any name that is not a
    string, falsy ones (``0``, ``false``, ``[]``, ``{}``) included, raises ``'<type>' object has
    no attribute 'lower'``: the name is lower-cased before it is checked (observed on the
    reference; a JSON null is dropped by the route, leaving the default ``""``).
    """
    # The lower-cased name is then matched ignoring case, as pandas' str.contains(case=False)
    # does: re.search with re.IGNORECASE (so the Kelvin sign matches "k").
    lowered = name.lower()
    if not lowered:
        return "Name not provided."
    pattern = re.compile(lowered, flags=re.IGNORECASE)
    addresses = tables[DIRECTORY]["email_address"].tolist()
    return [address for address in addresses if pattern.search(address) is not None]


@_KIT.fast_path("find_email_address")
def find_email_address_fast(tables: SessionTables, name: Any = "") -> Any:
    """The same search on the plain table, for a string ``name``.

    Handles the empty name ("Name not provided.") and every string that compiles as a pattern.
    Falls back for a non-string name, falsy or not (the reference's AttributeError text), a
    pattern ``re`` rejects (its error text), and a directory with a missing cell.
    """
    if type(name) is not str:
        return FALLBACK
    if not name:
        return "Name not provided."
    table = tables.table(DIRECTORY)
    if not table.text_only:
        return FALLBACK
    try:
        pattern = re.compile(name.lower(), flags=re.IGNORECASE)
    except Exception:  # re.error, OverflowError...: pandas' path words the error
        return FALLBACK
    search = pattern.search
    try:
        return [address for address in table.data["email_address"] if search(address) is not None]
    except TypeError:  # a missing (None/NaN) address: the pandas path raises the reference's text
        return FALLBACK
