"""Tool edge cases observed on the reference (NeMo Gym 0.7.0, pandas 2.3.2) as a black box.

Each case is a call sequence on one fresh WorkBench session with the output the reference's HTTP
route gave for each call (recorded from black-box runs; none of these inputs is in the goldens).
They pin the rules behind the classes beyond the goldens' examples, on the fast paths and
on the pandas implementations alike.
"""

from __future__ import annotations

import csv
import json
import re
import sys
import unicodedata

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

#: Dates written with digits Unicode 15 added (Kawi U+11F50.., Nag Mundari U+1E4F0..): decimal
#: digits on the reference's Python 3.13 (Unicode 15.1), so pandas and dateutil read them.
KAWI_2023 = "\U00011f52\U00011f50\U00011f52\U00011f53"
NAG_MUNDARI_2023 = "\U0001e4f2\U0001e4f0\U0001e4f2\U0001e4f3"
#: pandas' error comparing dates with a bound it reads as NaT.
NAT_ERROR = "Error searching emails: Cannot compare NaT with datetime.date object"

#: (name, arguments, the reference's output) of date arguments read as NaT or in other digits.
DATE_READINGS = [
    *(
        _call(SEARCH, NAT_ERROR, query="budget", **{bound: value})
        for bound in ("date_min", "date_max")
        for value in ("nan", "NaT", "nat", float("nan"))
    ),
    # The min bound is compared (and fails) before the max is parsed ...
    _call(SEARCH, NAT_ERROR, query="", date_min="NaN", date_max="garbage"),
    _call(SEARCH, NAT_ERROR, query="", date_min="nan", page_size=0),
    # ... and a NaT bound only fails against rows still left.
    _call(SEARCH, "No emails found.", query="", date_min="2030-01-01", date_max="nan"),
    # ... as any max bound: one that cannot be read is not read once the min left no row.
    *(
        _call(SEARCH, "No emails found.", query="", date_min="2030-01-01", date_max=value)
        for value in ("Zo\u00eb \u00c5ngstr\u00f6m \u2615 \u4f1a\u8bae", "garbage", float("inf"))
    ),
    _call(
        SEARCH,
        "Error searching emails: Unknown datetime string format, unable to parse: garbage",
        query="",
        date_min="2000-01-01",
        date_max="garbage",
    ),
    _call(SEARCH, "No emails found.", query="zzzzqqq", date_min="nan"),
    _call(
        SEARCH,
        "Error searching emails: Unknown datetime string format, unable to parse: -nan",
        query="",
        date_min="-nan",
    ),
    _call(
        SEARCH,
        "Error searching emails: cannot convert input -inf with the unit 'None'",
        query="",
        date_min=float("-inf"),
    ),
    _call(SEARCH, "No emails found.", query="budget", date_min=f"{NAG_MUNDARI_2023}-11-30"),
    _call(
        SEARCH,
        {
            "emails": [
                {
                    "email_id": "00000353",
                    "inbox/outbox": "inbox",
                    "sender/recipient": "chenwei.zhang@atlas.com",
                    "subject": "Update on Annual Budget Planning Session",
                    "sent_datetime": "2023-10-01 09:40:01",
                    "body": "Sam,\\n\\nEncountered a few challenges while working on the Annual "
                    "Budget Planning Session. Could use your advice.\\n\\nCheers,\\nChenwei",
                }
            ],
            "pagination": {"total_emails": 1, "page": 1, "page_size": 1, "total_pages": 1},
        },
        query="budget",
        date_max=f"{KAWI_2023}-10-01",
        page_size=1,
    ),
    # Superscripts are digits but not decimals: no parser reads them.
    _call(
        SEARCH,
        "Error searching emails: Unknown datetime string format, unable to parse: "
        "\u00b2\u2070\u00b2\u00b3-10-01",
        query="budget",
        date_max="\u00b2\u2070\u00b2\u00b3-10-01",
    ),
    _call(
        "calendar_search_events",
        {
            "events": [
                {
                    "event_id": "00000170",
                    "event_name": "Board of Directors Conclave",
                    "participant_email": "chenwei.zhang@atlas.com",
                    "event_start": "2023-12-21 15:30:00",
                    "duration": "90",
                }
            ],
            "pagination": {"total_events": 8, "page": 1, "page_size": 1, "total_pages": 8},
        },
        query="",
        time_min=f"{KAWI_2023}-12-20 00:00:00",
        page_size=1,
    ),
    _call(
        "calendar_create_event",
        "00000300",
        event_name="x",
        participant_email="a@b.com",
        event_start=f"{NAG_MUNDARI_2023}-12-30 10:00:00",
        duration="30",
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
@pytest.mark.parametrize("name, arguments, expected", DATE_READINGS)
def test_dates_read_as_nat_or_in_other_digits_match_the_reference(
    name, arguments, expected, fast, workbench_tables
):
    assert _run(SessionTables(workbench_tables), name, arguments, fast) == expected


def test_the_interpreter_reads_digits_as_the_reference_does():
    """The reference's Python 3.13 (Unicode 15.1): Kawi and Nag Mundari digits are decimal (not
    on 3.11), superscripts digits only; int() and regex \\d follow."""
    assert sys.version_info[:2] == (3, 13)
    assert unicodedata.unidata_version == "15.1.0"
    for year in (KAWI_2023, NAG_MUNDARI_2023):
        assert year.isdecimal() and year.isdigit() and year.isnumeric()
        assert int(year) == 2023 and float(year) == 2023.0
        assert re.fullmatch(r"\d{4}", year)
    assert "\u00b2".isdigit() and not "\u00b2".isdecimal()
    assert not re.fullmatch(r"\d", "\u00b2")


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
