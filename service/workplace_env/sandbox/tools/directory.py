"""The company directory toolkit (1 tool): look up colleagues' addresses by name.

Source: REFERENCE.md f.1 and the goldens (``tool_calls_public.jsonl``, ``tool-directory-*``).
"""

from __future__ import annotations

import re
from typing import Any

from workplace_env.sandbox.tables import DIRECTORY, SessionTables
from workplace_env.sandbox.tools.registry import FALLBACK, fast_path, tool


@tool(
    name="company_directory_find_email_address",
    qualname="CompanyDirectoryTool.find_email_address",
    description="Finds all email addresses containing the given name (case-insensitive search).",
    parameters={
        "type": "object",
        "properties": {
            "name": {
                "type": "string",
                "description": "Name or partial name to search for in email addresses",
            }
        },
        "required": [],
        "additionalProperties": False,
    },
)
def find_email_address(tables: SessionTables, name: str = "") -> list[str] | str:
    """Every directory address the lower-cased ``name`` matches, in table order (REFERENCE.md f.1).

    The name is a case-insensitive Python regular expression (``"(?=a)"`` is valid, ``"("`` raises
    ``re.error``, which the caller turns into the tool error string). Returns a list of strings
    (possibly empty) or ``"Name not provided."`` for an empty name. A non-string name raises
    ``'<type>' object has no attribute 'lower'`` (the reference lower-cases it first).
    """
    if not name:
        return "Name not provided."
    # The reference lower-cases the name before using it as a pattern (hence the AttributeError
    # text for numbers and lists) and matches it ignoring case, as pandas' str.contains(case=False)
    # does: re.search with re.IGNORECASE (so the Kelvin sign matches "k").
    pattern = re.compile(name.lower(), flags=re.IGNORECASE)
    addresses = tables[DIRECTORY]["email_address"].tolist()
    return [address for address in addresses if pattern.search(address) is not None]


@fast_path("company_directory_find_email_address")
def find_email_address_fast(tables: SessionTables, name: Any = "") -> Any:
    """The same search on the plain table, for a string ``name``.

    Handles any falsy name ("Name not provided.") and every string that compiles as a pattern.
    Falls back for a non-string name (the reference's AttributeError text), a pattern ``re``
    rejects (its error text), and a directory with a missing cell.
    """
    if not name:
        return "Name not provided."
    if type(name) is not str:
        return FALLBACK
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
