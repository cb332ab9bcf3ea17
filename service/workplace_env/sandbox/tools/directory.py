"""The company directory toolkit (1 tool): look up colleagues' addresses by name.

Source: REFERENCE.md f.1 and the goldens (``tool_calls_public.jsonl``, ``tool-directory-*``).
"""

from __future__ import annotations

import re

from workplace_env.sandbox.tables import DIRECTORY, SessionTables
from workplace_env.sandbox.tools.registry import tool


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
