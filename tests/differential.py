"""Differential testing against the reference: generated tool-call sequences, both sides compared.

The generator (:func:`sequences`) draws, with a fixed seed, sequences of 3-8 calls over all 27
tools. Every parameter of the chosen tool gets a valid value taken from the real WorkBench rows,
then usually one of them is swapped for a type confusion (numbers, bools, empty and odd strings,
lists, dicts, regex metacharacters, other date layouts, JSON null). Some calls get a misspelt or
unknown argument, a few a body that is not a JSON object. State edges come from the sequence:
a sequence may first delete the row with the largest id of a table, creates are often repeated,
writes are followed by reads of the same row or a search.

Three classes are drawn on purpose, as the interpreter and pandas decide them: date and time
arguments pandas reads as NaT (``"nan"``, ``"NaT"``, JSON ``NaN``) or cannot represent
(infinities, huge floats); digits of other scripts (:func:`unicode_digits`, including those
Unicode 15 added, decimal only on Python 3.13) in dates and numeric strings; and long
write/read sequences on one table (:func:`long_sequence`): creates with such dates (rows the
reference stores and later reads as NaT), updates of date fields, deletes and re-creates of the
ids around the largest one, and reads listing the whole table.

Each sequence runs on one fresh session of the reference, NeMo Gym 0.7.0's own
``workplace_assistant`` server (pandas 2.3.2) driven only through its HTTP routes as a black box
(``/seed_session``, then ``POST /<tool>`` with the body), and on one fresh session of ours
in-process, once with the fast paths and once with the pandas implementations only. Outputs are
compared as JSON values; a body the reference refuses (HTTP 422) must be refused here
(``InvalidToolArgumentsError``).

The tests run a bounded number of sequences (tests/parity/test_differential.py). The longer run::

    WORKPLACE_ENV_NEMO_VENV=/tmp/nemo-probe .venv/bin/python -m tests.differential \\
        --sequences 3000 --seed 1

prints every difference and a count by tool, and exits 1 when there is one.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import tempfile
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from random import Random
from typing import Any

import httpx

from workplace_env.parity import json_values_equal
from workplace_env.sandbox.tables import BaseTables, SessionTables
from workplace_env.sandbox.tools import TOOLS, drop_nulls, encode_output, execute
from workplace_env.sandbox.tools.registry import InvalidToolArgumentsError, parse_arguments

REFUSED = "<refused>"  # the output of a body refused before any tool ran (HTTP 422)

#: Values any parameter may receive instead of a valid one.
CONFUSIONS: tuple[Any, ...] = (
    7,
    -1,
    0,
    2.0,
    2.5,
    True,
    False,
    "",
    " ",
    " \t\n",
    [],
    ["alpha", "beta"],
    ["@", "."],
    {},
    {"value": 1},
    "2",
    "-1",
    "0",
    "x" * 300,
    "Zoë Ångström ☕ 会议",
    "İ",
    "(",
    "[",
    ".*",
    "\\",
    "2023/11/30",
    "2023-11-30",
    "2023-11-30T10:00:00",
    "2023-13-45 25:61:61",
    None,
    10**9,
)

#: The zero of each decimal digit script drawn: ASCII, Arabic-Indic, Devanagari, fullwidth,
#: mathematical bold, and two added in Unicode 15 (Kawi, Nag Mundari).
DIGIT_ZEROS = (0x30, 0x660, 0x966, 0xFF10, 0x1D7CE, 0x11F50, 0x1E4F0)
#: Digits that are ``isdigit`` but not decimal (superscripts), by value.
SUPERSCRIPT_DIGITS = "\u2070\u00b9\u00b2\u00b3\u2074\u2075\u2076\u2077\u2078\u2079"
#: Date and time values pandas reads as NaT or cannot represent as a timestamp.
NAT_DATES: tuple[Any, ...] = (
    "nan",
    "NaN",
    "NaT",
    "nat",
    "NAT",
    float("nan"),
    float("inf"),
    float("-inf"),
    1e30,
    1.5e9,
    "inf",
    "1e400",
    "",
    "None",
    "null",
    " ",
    "0",
    0,
    7,
    2.5,
    1700000000,
    "10:00",
    "10:00:00",
    "now",
    "today",
    "9999-12-31",
    "0001-01-01",
    "2262-04-12",
    "1677-09-21",
    "2023-11-30 10:00:00+00:00",
    "2023-11-30T10:00:00Z",
    "2023-11-30 10:00:00.5",
    " 2023-11-30 10:00:00 ",
    "2023",
)
#: Durations of odd types and values (``int()`` decides, the cell keeps what was sent).
ODD_DURATIONS: tuple[Any, ...] = (30, 30.5, True, "030", " 30 ", "1e2", "nan", 10**20, "-5")
#: Parameters holding a date or a time (searches' bounds, creates' and updates' dates).
DATE_PARAMS = frozenset(
    {
        "date_min",
        "date_max",
        "time_min",
        "time_max",
        "event_start",
        "due_date",
        "last_contact_date",
        "follow_up_by",
        "last_contact_date_min",
        "last_contact_date_max",
        "follow_up_by_min",
        "follow_up_by_max",
    }
)
#: Numeric strings whose digits :func:`unicode_digits` may swap.
NUMERIC_PARAMS = frozenset({"duration", "email_id", "event_id", "task_id", "customer_id"})
#: The date fields an update may set, per update tool.
DATE_FIELDS = {
    "calendar_update_event": ("event_start",),
    "project_management_update_task": ("due_date",),
    "customer_relationship_manager_update_customer": ("last_contact_date", "follow_up_by"),
}


def unicode_digits(rng: Random, text: str) -> str:
    """``text`` with its ASCII digits written in other scripts: one script for all (usually),
    else one per digit; sometimes superscripts (digits, not decimals)."""
    roll = rng.random()
    if roll < 0.1:
        return "".join(
            SUPERSCRIPT_DIGITS[int(c)] if c.isascii() and c.isdigit() else c for c in text
        )
    one = rng.choice(DIGIT_ZEROS)
    return "".join(
        chr((one if roll < 0.8 else rng.choice(DIGIT_ZEROS)) + int(c))
        if c.isascii() and c.isdigit()
        else c
        for c in text
    )


def hostile_value(rng: Random, param: str, valid: Any) -> Any:
    """A date a parser reads as NaT or oddly, an odd duration, or ``valid`` with other digits,
    for a date or numeric ``param``; ``valid`` itself for other parameters or non-text values."""
    if param in DATE_PARAMS and rng.random() < 0.5:
        return rng.choice(NAT_DATES)
    if param == "duration" and rng.random() < 0.3:
        return rng.choice(ODD_DURATIONS)
    if isinstance(valid, str) and (param in DATE_PARAMS or param in NUMERIC_PARAMS):
        return unicode_digits(rng, valid)
    return valid


_FIELDS = {
    "email": ["email_id", "inbox/outbox", "sender/recipient", "subject", "sent_datetime", "body"],
    "calendar": ["event_id", "event_name", "participant_email", "event_start", "duration"],
    "project_management": [
        "task_id",
        "task_name",
        "assigned_to_email",
        "list_name",
        "due_date",
        "board",
    ],
    "customer_relationship_manager": [
        "customer_name",
        "assigned_to_email",
        "customer_email",
        "customer_phone",
        "last_contact_date",
        "product_interest",
        "status",
        "notes",
        "follow_up_by",
    ],
}
_ENUMS = {
    "list_name": ["Backlog", "In Progress", "In Review", "Completed"],
    "board": ["Back end", "Front end", "Design"],
    "status": ["Qualified", "Won", "Lost", "Lead", "Proposal"],
    "product_interest": ["Software", "Hardware", "Services", "Consulting", "Training"],
    "value_to_plot": [
        "total_visits",
        "session_duration_seconds",
        "user_engaged",
        "visits_direct",
        "visits_referral",
        "visits_search_engine",
        "visits_social_media",
    ],
    "plot_type": ["bar", "line", "scatter", "histogram"],
    "traffic_source": ["direct", "referral", "search engine", "social media"],
}
#: The id of the row with the largest id, and the delete that removes it, per table.
_MAX_ID_DELETES = (
    ("email_delete_email", "email_id", "00000499"),
    ("calendar_delete_event", "event_id", "00000299"),
    ("project_management_delete_task", "task_id", "00000299"),
    ("customer_relationship_manager_delete_customer", "customer_id", "00000199"),
)


def _rows(data_dir: Path, name: str) -> list[dict[str, str]]:
    with (data_dir / name).open(encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


class ValidValues:
    """Valid values for each parameter name, drawn from the real rows of ``data_dir``."""

    def __init__(self, data_dir: Path) -> None:
        emails = _rows(data_dir, "emails.csv")
        events = _rows(data_dir, "calendar_events.csv")
        tasks = _rows(data_dir, "project_tasks.csv")
        crm = _rows(data_dir, "customer_relationship_manager_data.csv")
        visits = _rows(data_dir, "analytics_data.csv")
        people = (data_dir / "email_addresses.csv").read_text(encoding="utf-8").split()
        words = [w for e in emails for w in e["subject"].split()][:400]
        self.pools: dict[str, list[Any]] = {
            "email_id": [e["email_id"] for e in emails],
            "event_id": [e["event_id"] for e in events],
            "task_id": [t["task_id"] for t in tasks],
            "customer_id": [c["customer_id"] for c in crm],
            "visitor_id": [v["visitor_id"] for v in visits],
            "name": [p.split(".")[0] for p in people],
            "query": [*words, ""],
            "recipient": people,
            "participant_email": people,
            "assigned_to_email": [t["assigned_to_email"] for t in tasks],
            "customer_email": [c["customer_email"] for c in crm],
            "subject": [e["subject"] for e in emails],
            "body": ["Thanks, noted.", "See you then."],
            "event_name": [e["event_name"] for e in events],
            "task_name": [t["task_name"] for t in tasks],
            "customer_name": [c["customer_name"] for c in crm],
            "customer_phone": ["555-0100", ""],
            "notes": ["Called back.", ""],
            "event_start": [e["event_start"] for e in events],
            "duration": ["30", "60", "90"],
            "due_date": [t["due_date"] for t in tasks],
            "date": [v["date_of_visit"] for v in visits],
            "datetime": [e["event_start"] for e in events],
            "page": [1, 2, 3],
            "page_size": [1, 2, 5, 10],
        }

    def draw(self, rng: Random, tool: str, param: str) -> Any:
        """A valid value of ``param`` for ``tool``."""
        if param == "field":
            prefix = next(p for p in _FIELDS if tool.startswith(p))
            return rng.choice(_FIELDS[prefix])
        if param in _ENUMS:
            return rng.choice(_ENUMS[param])
        if param == "new_value":
            return rng.choice(self.pools["event_name"] + _ENUMS["status"] + ["30", "a@b.com"])
        if param in ("date_min", "date_max", "time_min", "time_max") and tool.startswith(
            "analytics"
        ):
            return rng.choice(self.pools["date"])
        if param in ("time_min", "time_max"):
            return rng.choice(self.pools["datetime"])
        if param.startswith(("date_", "last_contact_date", "follow_up_by")):
            return rng.choice(self.pools["date"])
        return rng.choice(self.pools.get(param, ["x"]))


@dataclass(frozen=True)
class Call:
    """One call: the tool name and the exact request body (JSON text, usually an object)."""

    name: str
    body: str


def _misspelt(rng: Random, param: str) -> str:
    return rng.choice([param[:-1], param.capitalize(), param + "s", param.upper(), "extra"])


def _call(rng: Random, valid: ValidValues, name: str) -> Call:
    tool = TOOLS[name]
    required = set(tool.schema["parameters"].get("required", []))
    arguments = {
        p: valid.draw(rng, name, p) for p in tool.params if p in required or rng.random() < 0.5
    }
    if tool.params and rng.random() < 0.7:
        arguments[rng.choice(tool.params)] = rng.choice(CONFUSIONS)
    hostile = [p for p in tool.params if p in DATE_PARAMS or p in NUMERIC_PARAMS]
    if hostile and rng.random() < 0.3:
        param = rng.choice(hostile)
        arguments[param] = hostile_value(rng, param, valid.draw(rng, name, param))
    if name in DATE_FIELDS and rng.random() < 0.3:
        field = rng.choice(DATE_FIELDS[name])
        arguments.update(
            field=field, new_value=hostile_value(rng, field, valid.draw(rng, name, field))
        )
    roll = rng.random()
    if roll < 0.06 and tool.params:
        arguments[_misspelt(rng, rng.choice(tool.params))] = rng.choice(["x", 1, None])
    elif roll < 0.09:
        return Call(name, rng.choice(["[]", "null", "5", '"x"', "{", "", json.dumps([arguments])]))
    return Call(name, json.dumps(arguments))


def sequences(count: int, seed: int, data_dir: Path) -> Iterator[list[Call]]:
    """``count`` call sequences drawn with ``seed`` (the same seed, the same sequences)."""
    rng = Random(seed)
    valid = ValidValues(data_dir)
    names = sorted(TOOLS)
    for _ in range(count):
        if rng.random() < 0.15:
            yield long_sequence(rng, valid)
            continue
        calls: list[Call] = []
        if rng.random() < 0.2:  # state edge: the next create reuses the largest id
            name, param, value = rng.choice(_MAX_ID_DELETES)
            calls.append(Call(name, json.dumps({param: value})))
        for _ in range(rng.randint(3, 8)):
            call = _call(rng, valid, rng.choice(names))
            calls.append(call)
            if TOOLS[call.name].writes:
                if rng.random() < 0.3:
                    calls.append(call)  # the same write twice
                calls.append(_read_back(rng, valid, call))
        yield calls


#: Per table: its create, update, delete, lookup by id and id parameter, the ids around its
#: largest (kept, deleted, then created again), and the reads listing the whole table.
_TABLES = {
    "calendar": (
        "calendar_create_event",
        "calendar_update_event",
        "calendar_delete_event",
        "calendar_get_event_information_by_id",
        "event_id",
        [f"{n:08d}" for n in range(297, 304)],
        [
            ("calendar_search_events", {"query": "", "page_size": 1000}),
            ("calendar_search_events", {"time_min": "2023-11-01", "page_size": 1000}),
            ("calendar_search_events", {"time_max": "2023-12-01 00:00:00", "page_size": 1000}),
            ("calendar_search_events", {"query": "a", "page": 2, "page_size": 7}),
            ("calendar_search_events", {"time_min": "1970-01-01", "time_max": "2262-04-11"}),
            ("calendar_search_events", {"time_min": "2023-11-30 10:00:00", "page_size": 1000}),
        ],
    ),
    "project_management": (
        "project_management_create_task",
        "project_management_update_task",
        "project_management_delete_task",
        "project_management_get_task_information_by_id",
        "task_id",
        [f"{n:08d}" for n in range(297, 304)],
        [
            ("project_management_search_tasks", {}),
            ("project_management_search_tasks", {"due_date": "2023-11-30"}),
            ("project_management_search_tasks", {"task_name": "."}),
        ],
    ),
    "customer_relationship_manager": (
        "customer_relationship_manager_add_customer",
        "customer_relationship_manager_update_customer",
        "customer_relationship_manager_delete_customer",
        "",
        "customer_id",
        [f"{n:08d}" for n in range(197, 204)],
        [
            ("customer_relationship_manager_search_customers", {"page_size": 1000}),
            (
                "customer_relationship_manager_search_customers",
                {"last_contact_date_min": "2023-11-01", "page_size": 1000},
            ),
            (
                "customer_relationship_manager_search_customers",
                {"follow_up_by_max": "2024-01-01", "page_size": 1000},
            ),
        ],
    ),
    "email": (
        "email_send_email",
        "email_reply_email",
        "email_delete_email",
        "email_get_email_information_by_id",
        "email_id",
        ["00000497", "00000498", "00000499", "500", "501", "502"],
        [
            ("email_search_emails", {"query": "", "page_size": 1000}),
            ("email_search_emails", {"query": "", "date_min": "2023-11-01", "page_size": 1000}),
        ],
    ),
}


def long_sequence(rng: Random, valid: ValidValues) -> list[Call]:
    """20-40 writes and reads on one table: creates (dates often hostile, see
    :func:`hostile_value`), updates (often of a date field), deletes and lookups of the ids
    around the largest one, and reads listing the table, ending with every listing read."""
    prefix = rng.choice(sorted(_TABLES))
    create, update, delete, lookup, id_param, ids, listings = _TABLES[prefix]
    calls: list[Call] = []
    for _ in range(rng.randint(20, 40)):
        roll = rng.random()
        if roll < 0.35:
            arguments = {
                p: valid.draw(rng, create, p)
                for p in TOOLS[create].params
                if p in TOOLS[create].schema["parameters"].get("required", []) or rng.random() < 0.7
            }
            dated = [p for p in arguments if p in DATE_PARAMS or p == "duration"]
            if dated and rng.random() < 0.6:
                param = rng.choice(dated)
                arguments[param] = hostile_value(rng, param, arguments[param])
            calls.append(Call(create, json.dumps(arguments)))
        elif roll < 0.5:
            calls.append(Call(delete, json.dumps({id_param: rng.choice(ids)})))
        elif roll < 0.65:
            if update == "email_reply_email":
                arguments = {id_param: rng.choice(ids), "body": "Noted."}
            else:
                field = rng.choice(DATE_FIELDS[update] + (valid.draw(rng, update, "field"),))
                value = hostile_value(rng, field, valid.draw(rng, update, field))
                arguments = {id_param: rng.choice(ids), "field": field, "new_value": value}
            calls.append(Call(update, json.dumps(arguments)))
        elif roll < 0.75 and lookup:
            field = valid.draw(rng, lookup, "field")
            calls.append(Call(lookup, json.dumps({id_param: rng.choice(ids), "field": field})))
        else:
            name, arguments = rng.choice(listings)
            calls.append(Call(name, json.dumps(arguments)))
    calls.extend(Call(name, json.dumps(arguments)) for name, arguments in listings)
    return calls


#: The read that shows what a write of each toolkit stored: (lookup by id, id parameter, search).
_READS = {
    "email": ("email_get_email_information_by_id", "email_id", "email_search_emails"),
    "calendar": ("calendar_get_event_information_by_id", "event_id", "calendar_search_events"),
    "project_management": (
        "project_management_get_task_information_by_id",
        "task_id",
        "project_management_search_tasks",
    ),
    "customer_relationship_manager": ("", "", "customer_relationship_manager_search_customers"),
    "analytics": ("", "", "analytics_get_average_session_duration"),
}


def _read_back(rng: Random, valid: ValidValues, write: Call) -> Call:
    """A read of the row ``write`` touched (same id, any field), else a search of its table."""
    prefix = next(p for p in _READS if write.name.startswith(p))
    lookup, id_param, search = _READS[prefix]
    try:
        written = json.loads(write.body)
    except ValueError:
        written = None
    if id_param and isinstance(written, dict) and id_param in written:
        field = valid.draw(rng, lookup, "field")
        return Call(lookup, json.dumps({id_param: written[id_param], "field": field}))
    if prefix == "customer_relationship_manager":
        return Call(search, json.dumps({"customer_name": ".", "page_size": 500}))
    if prefix == "project_management":
        return Call(search, json.dumps({"task_name": "."}))
    if prefix == "analytics":
        return Call(search, "{}")
    return Call(search, json.dumps({"query": "", "page_size": 3}))


# -- running both sides -----------------------------------------------------------------------


def reference_outputs(base_url: str, calls: list[Call]) -> list[Any]:
    """The outputs of ``calls`` on one fresh reference session (HTTP routes only)."""
    outputs: list[Any] = []
    with httpx.Client(base_url=base_url, timeout=120) as client:
        seeded = client.post("/seed_session", json={})
        seeded.raise_for_status()
        for call in calls:
            response = client.post(
                f"/{call.name}",
                content=call.body.encode("utf-8"),
                headers={"content-type": "application/json"},
            )
            if response.status_code == 422 or _unrendered_refusal(response):
                outputs.append(REFUSED)
            elif response.status_code != 200:  # a difference of its own, never ours to mimic
                outputs.append(f"<HTTP {response.status_code}>")
            else:
                outputs.append(response.json()["output"])
    return outputs


def _unrendered_refusal(response: httpx.Response) -> bool:
    """True for the reference's HTTP 500 on a refusal it could not write: its 422 echoes the
    body, and a NaN or infinity in a body that is not an object fails JSON encoding (black-box:
    ``[NaN]`` answers 500 ``ValueError('Out of range float values are not JSON compliant:
    nan')``). Ours answers that refusal as a 422, never a 500."""
    return response.status_code == 500 and "Out of range float values" in response.text


def our_outputs(base: BaseTables, calls: list[Call], fast: bool) -> list[Any]:
    """The outputs of ``calls`` on one fresh session of ours, as the HTTP route runs them."""
    tables = SessionTables(base)
    outputs: list[Any] = []
    for call in calls:
        try:
            arguments = drop_nulls(parse_arguments(call.body))
        except InvalidToolArgumentsError:
            outputs.append(REFUSED)
            continue
        outputs.append(json.loads(encode_output(execute(tables, call.name, arguments, fast=fast))))
    return outputs


@dataclass(frozen=True)
class Difference:
    """A call whose output differs: where, the call, and both outputs."""

    sequence: int
    position: int
    side: str  # "fast" | "pandas"
    call: Call
    reference: Any
    ours: Any

    def __str__(self) -> str:
        return (
            f"sequence {self.sequence} call {self.position} ({self.side}) "
            f"{self.call.name} {self.call.body[:200]}\n"
            f"  reference: {json.dumps(self.reference)[:400]}\n"
            f"  ours:      {json.dumps(self.ours)[:400]}"
        )


def compare(
    base_url: str, base: BaseTables, all_calls: list[list[Call]]
) -> tuple[int, list[Difference]]:
    """Run every sequence on both sides; the number of calls made and every difference."""
    differences: list[Difference] = []
    made = 0
    for number, calls in enumerate(all_calls):
        expected = reference_outputs(base_url, calls)
        made += len(calls)
        for side, fast in (("fast", True), ("pandas", False)):
            actual = our_outputs(base, calls, fast)
            for position, (want, got) in enumerate(zip(expected, actual, strict=True)):
                if not json_values_equal(want, got):
                    call = calls[position]
                    differences.append(Difference(number, position, side, call, want, got))
    return made, differences


def main(argv: list[str] | None = None) -> int:
    """The longer differential run (see the module docstring)."""
    from tests.conftest import WORKBENCH
    from tests.nemo.servers import NemoStack, reference_resources
    from tests.nemo.venv import nemo_python

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sequences", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--data-dir", type=Path, default=WORKBENCH)
    args = parser.parse_args(argv)
    all_calls = list(sequences(args.sequences, args.seed, args.data_dir))
    base = BaseTables.from_directory(args.data_dir)
    with (
        tempfile.TemporaryDirectory() as work,
        NemoStack(nemo_python(), [reference_resources()], Path(work)) as stack,
    ):
        made, differences = compare(stack.url("workplace_assistant"), base, all_calls)
    for difference in differences:
        print(difference)
    by_tool = Counter(d.call.name for d in differences)
    print(f"{len(all_calls)} sequences, {made} calls, {len(differences)} differences")
    for name, count in by_tool.most_common():
        print(f"  {name}: {count}")
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main())
