"""Argument generators for the company directory and email tools (fast path vs pandas).

Most draws are what a model sends: ids, names, words and dates taken from the session's current
tables. About one in five is odd on purpose: wrong JSON types, empty strings, regex
metacharacters, missing or null required arguments, pages and sizes pandas must judge, ids that
do not exist or were deleted earlier in the session.
"""

from __future__ import annotations

from random import Random
from typing import Any

from workplace_env.sandbox.tables import DIRECTORY, EMAILS, SessionTables

_ODD_VALUES: tuple[Any, ...] = (
    None,
    "",
    " ",
    0,
    1,
    373,
    -1,
    True,
    False,
    2.0,
    0.5,
    [],
    ["00000373"],
    {},
    {"a": 1},
    "null",
    10**30,
)
_REGEX_NAMES = ("(", ")", "[", "C++", ".*", "a|b", "^a", "com$", "\\", "(?=a)", "a{2}", "*", "?")
_UNICODE = ("é", "É", "\u212a", "İ", "ß", "Σ", "日本", "😀", "naïve")
_FIELDS = ("email_id", "inbox/outbox", "sender/recipient", "subject", "sent_datetime", "body")


def _odd(rng: Random) -> Any:
    return rng.choice(_ODD_VALUES)


def _emails(tables: SessionTables) -> dict[str, list[Any]]:
    return tables.table(EMAILS).data


def _addresses(tables: SessionTables) -> list[str]:
    return [a for a in tables.table(DIRECTORY).data["email_address"] if isinstance(a, str)]


def _recase(rng: Random, text: str) -> str:
    roll = rng.random()
    if roll < 0.6:
        return text
    if roll < 0.75:
        return text.upper()
    if roll < 0.9:
        return text.title()
    return "".join(c.upper() if rng.random() < 0.5 else c for c in text)


def _email_id(rng: Random, tables: SessionTables) -> Any:
    """Mostly an id of the current table; else a deleted one, an unknown one or an odd value."""
    ids = [i for i in _emails(tables)["email_id"] if isinstance(i, str)]
    roll = rng.random()
    if roll < 0.72 and ids:
        return rng.choice(ids)
    if roll < 0.8:
        base = tables.base.tables[EMAILS].data["email_id"]
        gone = sorted(set(base) - set(ids))
        return rng.choice(gone) if gone else rng.choice(base)
    if roll < 0.88:
        return rng.choice(("00000999", "00001000", "499", "500", "501", "502", "0", "abc"))
    if roll < 0.92 and ids:
        return rng.choice(ids).lstrip("0") or "0"
    return _odd(rng)


def _recipient(rng: Random, tables: SessionTables) -> Any:
    roll = rng.random()
    if roll < 0.75:
        return _recase(rng, rng.choice(_addresses(tables) or ["a@b.com"]))
    if roll < 0.85:
        return rng.choice(("a@b.com", "x@y.z", "New.Person@Example.ORG", "é@ü.com", "a@b@c.d"))
    if roll < 0.92:
        return rng.choice(("no-at-sign.com", "no@dot", "", "@.", "plain"))
    return _odd(rng)


def _text(rng: Random, tables: SessionTables, column: str) -> Any:
    roll = rng.random()
    if roll < 0.45:
        cells = [c for c in _emails(tables)[column] if isinstance(c, str)]
        if cells:
            return rng.choice(cells)
    if roll < 0.8:
        words = ("Hello", "Update", "meeting", "Got it, thank you!", "Re: plan", "sam", "x")
        return " ".join(rng.choice(words) for _ in range(rng.randint(1, 4)))
    if roll < 0.9:
        return rng.choice(_UNICODE) + " " + rng.choice(("note", "\n", "\\n", "a,b", '"q"'))
    if roll < 0.97:
        return rng.choice(("", " ", None))
    return _odd(rng)


def _maybe_drop(rng: Random, arguments: dict[str, Any], p: float = 0.04) -> dict[str, Any]:
    """Sometimes drop a key (a missing argument) or add one the tool does not take."""
    if arguments and rng.random() < p:
        arguments.pop(rng.choice(list(arguments)))
    if rng.random() < p / 4:
        arguments[rng.choice(("priority", "emailid", "page_no"))] = 1
    return arguments


def find_email_address(rng: Random, tables: SessionTables) -> dict[str, Any]:
    roll = rng.random()
    addresses = _addresses(tables)
    if roll < 0.6 and addresses:
        address = rng.choice(addresses)
        local, _, domain = address.partition("@")
        part = rng.choice([*local.split("."), local, domain, address, local[:3], "atlas"])
        name: Any = _recase(rng, part)
    elif roll < 0.72:
        name = rng.choice(("chen", "a", "z", "zz", ".", "@", "atlas.com", "sam", "o"))
    elif roll < 0.82:
        name = rng.choice(_REGEX_NAMES)
    elif roll < 0.88:
        name = rng.choice(_UNICODE)
    else:
        name = _odd(rng)
    return _maybe_drop(rng, {"name": name})


def get_email_information_by_id(rng: Random, tables: SessionTables) -> dict[str, Any]:
    roll = rng.random()
    if roll < 0.8:
        field: Any = rng.choice(_FIELDS)
    elif roll < 0.9:
        field = rng.choice(("Subject", "date", "sender", "", "email id", "body "))
    else:
        field = _odd(rng)
    return _maybe_drop(rng, {"email_id": _email_id(rng, tables), "field": field})


def _query(rng: Random, tables: SessionTables) -> Any:
    data = _emails(tables)
    roll = rng.random()
    if roll < 0.15:
        return ""
    if roll < 0.55:
        column = rng.choice(("subject", "body", "sender/recipient"))
        cells = [c for c in data[column] if isinstance(c, str)]
        if cells:
            words = cells[rng.randrange(len(cells))].replace("\\n", " ").split()
            if words:
                start = rng.randrange(len(words))
                return _recase(rng, " ".join(words[start : start + rng.randint(1, 3)]))
    if roll < 0.7:
        addresses = _addresses(tables)
        if addresses:
            return _recase(rng, rng.choice(addresses).split("@")[0].split(".")[0])
    if roll < 0.85:
        return rng.choice(
            (
                "update",
                "task update",
                "re:",
                "fw:",
                "a@b.com",
                "sam",
                "zzzz",
                "\\n",
                "update update",
            )
        )
    if roll < 0.93:
        return rng.choice((*_REGEX_NAMES, *_UNICODE, "  ", "\t"))
    return _odd(rng)


def _date(rng: Random, tables: SessionTables) -> Any:
    roll = rng.random()
    if roll < 0.5:
        cells = [c for c in _emails(tables)["sent_datetime"] if isinstance(c, str)]
        if cells:
            cell = rng.choice(cells)
            return cell if rng.random() < 0.3 else cell[:10]
    if roll < 0.75:
        month = rng.randint(9, 12)
        return f"2023-{month:02d}-{rng.randint(1, 30 if month in (9, 11) else 31):02d}"
    if roll < 0.85:
        return rng.choice(("2023-11-30", "2023-12-01", "2022-01-01", "2024-02-29", "1999-12-31"))
    if roll < 0.93:
        return rng.choice(
            ("2023-13-01", "2023-02-30", "2023/10/01", "2023-1-5", "20231001", "yesterday", "")
        )
    return _odd(rng)


def _page(rng: Random, low: int, high: int) -> Any:
    roll = rng.random()
    if roll < 0.85:
        return rng.randint(low, high)
    if roll < 0.9:
        return rng.choice((10**12, -(10**12), 0, -1))
    return rng.choice(("2", 2.0, 1.5, 0.5, True, False, None, [1]))


def search_emails(rng: Random, tables: SessionTables) -> dict[str, Any]:
    arguments: dict[str, Any] = {"query": _query(rng, tables)}
    if rng.random() < 0.35:
        arguments["date_min"] = _date(rng, tables)
    if rng.random() < 0.35:
        arguments["date_max"] = _date(rng, tables)
    if rng.random() < 0.5:
        arguments["page"] = _page(rng, -1, 8)
    if rng.random() < 0.5:
        arguments["page_size"] = _page(rng, -1, 12) if rng.random() < 0.9 else 100
    if rng.random() < 0.1:
        arguments.pop("query")
    return _maybe_drop(rng, arguments, p=0.02)


def send_email(rng: Random, tables: SessionTables) -> dict[str, Any]:
    arguments = {
        "recipient": _recipient(rng, tables),
        "subject": _text(rng, tables, "subject"),
        "body": _text(rng, tables, "body"),
    }
    return _maybe_drop(rng, arguments)


def delete_email(rng: Random, tables: SessionTables) -> dict[str, Any]:
    return _maybe_drop(rng, {"email_id": _email_id(rng, tables)})


def forward_email(rng: Random, tables: SessionTables) -> dict[str, Any]:
    arguments = {"email_id": _email_id(rng, tables), "recipient": _recipient(rng, tables)}
    return _maybe_drop(rng, arguments)


def reply_email(rng: Random, tables: SessionTables) -> dict[str, Any]:
    arguments = {"email_id": _email_id(rng, tables), "body": _text(rng, tables, "body")}
    return _maybe_drop(rng, arguments)


ARGUMENTS = {
    "company_directory_find_email_address": find_email_address,
    "email_get_email_information_by_id": get_email_information_by_id,
    "email_search_emails": search_emails,
    "email_send_email": send_email,
    "email_delete_email": delete_email,
    "email_forward_email": forward_email,
    "email_reply_email": reply_email,
}
