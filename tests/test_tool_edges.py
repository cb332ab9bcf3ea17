"""Tool edge cases observed on the reference (NeMo Gym 0.7.0, pandas 2.3.2) as a black box.

Each case is a call sequence on one fresh WorkBench session with the output the reference's HTTP
route gave for each call (recorded from black-box runs; none of these inputs is in the goldens).
They pin the rules behind issue 14's classes beyond the goldens' examples, on the fast paths and
on the pandas implementations alike.
"""

from __future__ import annotations

import csv
import json

import pytest

from tests.conftest import WORKBENCH, needs_shared
from workplace_env.sandbox.tables import SessionTables
from workplace_env.sandbox.tools import drop_nulls, encode_output, execute

SEARCH = "email_search_emails"


def _call(tool: str, expected: object, **arguments: object) -> tuple[str, dict, object]:
    return tool, arguments, expected


#: (name, arguments, the reference's output), each on a fresh session.
SINGLE_CALLS = [
    # A non-string name is lower-cased before the emptiness check: falsy ones raise too.
    *(
        _call(
            "company_directory_find_email_address",
            "Error executing tool 'company_directory_find_email_address': "
            f"'{kind}' object has no attribute 'lower'",
            name=value,
        )
        for kind, value in (("list", []), ("int", 0), ("bool", False), ("dict", {}))
    ),
    _call("company_directory_find_email_address", "Name not provided.", name=""),
    # Paging is computed before "no hit" is reported, also after a date filter left nothing.
    _call(
        SEARCH,
        "Error searching emails: integer division or modulo by zero",
        query="budget",
        date_min="2030-01-01",
        page_size=0,
    ),
    _call(
        SEARCH,
        "Error searching emails: '<' not supported between instances of 'int' and 'str'",
        query="budget",
        date_min="2030-01-01",
        page="x",
        page_size=-1,
    ),
    _call(
        SEARCH,
        "Error searching emails: integer division or modulo by zero",
        query="zzqq",
        date_min="garbage",
        page_size=0,
    ),
    _call(SEARCH, "No emails found.", query="zzqq", date_min="garbage"),
    _call(SEARCH, "No emails found.", query="zzqq", page=1.5, page_size=2.0),
    # An id list is first tested element-wise (numpy broadcasting), then looked up (pandas).
    _call(
        "email_reply_email",
        "Error replying to email: operands could not be broadcast together with shapes (500,) "
        "(2,) ",
        email_id=["alpha", "beta"],
        body="x",
    ),
    _call("email_reply_email", "Email not found.", email_id=["alpha"], body="x"),
    _call("email_delete_email", "Email not found.", email_id=["alpha"]),
    _call("email_forward_email", "Email not found.", email_id=["alpha"], recipient="a@b.c"),
    _call(
        "email_get_email_information_by_id",
        "Error retrieving email information: ('Lengths must match to compare', (500,), (1,))",
        email_id=["alpha"],
        field="subject",
    ),
    # The forward lower-cases the recipient itself: its own error prefix.
    _call(
        "email_forward_email",
        "Error forwarding email: 'dict' object has no attribute 'lower'",
        email_id="00000489",
        recipient={"@": 1, ".": 2},
    ),
    _call(
        "email_forward_email",
        "Error forwarding email: 'list' object has no attribute 'lower'",
        email_id=["00000489"],
        recipient=["@", "."],
    ),
    _call("email_forward_email", "Email not found.", email_id="zzz", recipient=["@", "."]),
    _call(
        "email_send_email",
        "Error sending email: 'dict' object has no attribute 'lower'",
        recipient={"@": 1, ".": 2},
        subject="s",
        body="b",
    ),
]

EMPTY_EMAIL_TABLE = [
    # Any search of an email table without rows fails on the timestamp column ...
    *(
        _call(SEARCH, "Error searching emails: 'sent_datetime'", **arguments)
        for arguments in (
            {"query": ""},
            {"query": "a b"},
            {"page": "x"},
            {"query": "", "page": 1, "page_size": 0},
            {"query": "x", "date_min": "garbage"},
        )
    ),
    # ... once the query itself is read.
    _call(SEARCH, "Error searching emails: 'int' object has no attribute 'lower'", query=5),
    _call(
        "email_forward_email",
        "Error forwarding email: operands could not be broadcast together with shapes (0,) (2,) ",
        email_id=["a", "b"],
        recipient="a@b.c",
    ),
    _call("email_forward_email", "Email not found.", email_id=["a"], recipient="a@b.c"),
    # The first id of an empty table is "1".
    _call("email_send_email", "Email sent successfully.", recipient="a@b.c", subject="s", body="b"),
    _call("email_get_email_information_by_id", {"email_id": "1"}, email_id="1", field="email_id"),
]


def _run(tables: SessionTables, name: str, arguments: dict, fast: bool) -> object:
    return json.loads(encode_output(execute(tables, name, drop_nulls(arguments), fast=fast)))


@needs_shared
@pytest.mark.parametrize("fast", [True, False], ids=["fast", "pandas"])
@pytest.mark.parametrize("name, arguments, expected", SINGLE_CALLS)
def test_single_calls_match_the_reference(name, arguments, expected, fast, workbench_tables):
    assert _run(SessionTables(workbench_tables), name, arguments, fast) == expected


@needs_shared
@pytest.mark.parametrize("fast", [True, False], ids=["fast", "pandas"])
def test_calls_on_an_emptied_email_table_match_the_reference(fast, workbench_tables):
    tables = SessionTables(workbench_tables)
    with (WORKBENCH / "emails.csv").open(encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            assert _run(tables, "email_delete_email", {"email_id": row["email_id"]}, fast) == (
                "Email deleted successfully."
            )
    for name, arguments, expected in EMPTY_EMAIL_TABLE:
        assert _run(tables, name, arguments, fast) == expected, (name, arguments)
