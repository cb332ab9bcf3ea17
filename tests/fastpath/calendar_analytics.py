"""Argument generators for the calendar and analytics tools (fast path vs pandas).

Most draws are what a model sends: event ids, names, participants and starts taken from the
session's current tables, canonical dates and times, valid fields, plot values and types, small
int pages. The rest are odd on purpose: wrong JSON types, empty strings, ids that are not 8
digits (or are fullwidth digits), regex metacharacters, dates pandas parses differently or not
at all, durations that are floats, bools, zero or negative, pages and page sizes pandas judges.
"""

from __future__ import annotations

from collections.abc import Callable
from random import Random
from typing import Any

from workplace_env.sandbox.tables import ANALYTICS, CALENDAR, SessionTables

_ODD: tuple[Any, ...] = (None, "", " ", 0, 1, -1, 30.5, True, False, [], ["x"], {}, {"a": 1})
_EVENT_FIELDS = ("event_id", "event_name", "participant_email", "event_start", "duration")
_PATTERNS = ("(", "[", "*", "?", "\\", ".*", "^sync", "review$", "a|b", "(a)(b)", "K", "ſ", "İ")
_STARTS = (
    "2023-11-30 09:00:00",
    "2023-12-01 14:30:00",
    "2023-08-01 09:00:00",
    "2023-11-30",
    "2023-11-30 09:00",
    "2023/11/30 09:00:00",
    "2023-02-30 10:00:00",
    "2023-13-01 10:00:00",
    "30 Nov 2023",
    "tomorrow",
    "not a date",
)
_DAYS = ("2023-10-01", "2023-11-01", "2023-11-15", "2023-11-30", "2023-12-31", "2023-11", "2023")
_PLOT_VALUES = (
    "total_visits",
    "session_duration_seconds",
    "user_engaged",
    "visits_direct",
    "visits_referral",
    "visits_search_engine",
    "visits_social_media",
)
_PLOT_TYPES = ("bar", "line", "scatter", "histogram")
_SOURCES = ("direct", "referral", "search engine", "social media")


def _column(tables: SessionTables, key: str, column: str) -> list[Any]:
    return tables.table(key).data[column]


def _pick(rng: Random, cells: list[Any], default: Any) -> Any:
    return rng.choice(cells) if cells else default


def _recase(rng: Random, text: str) -> str:
    roll = rng.random()
    if roll < 0.6:
        return text
    if roll < 0.8:
        return text.upper()
    return "".join(c.upper() if rng.random() < 0.5 else c for c in text)


def _maybe_drop(rng: Random, arguments: dict[str, Any], p: float = 0.05) -> dict[str, Any]:
    """Sometimes drop an argument (required or not), rarely add one the tool does not take."""
    if arguments and rng.random() < p:
        del arguments[rng.choice(list(arguments))]
    if rng.random() < p / 4:
        arguments["priority"] = 1
    return arguments


# -- calendar ----------------------------------------------------------------------------------


def _event_id(rng: Random, tables: SessionTables) -> Any:
    roll = rng.random()
    if roll < 0.7:
        return _pick(rng, _column(tables, CALENDAR, "event_id"), "00000001")
    if roll < 0.82:
        return f"{rng.randint(0, 400):08d}"
    if roll < 0.9:
        return rng.choice(("0000001", "000000001", "abcdefgh", "\uff10" * 8, "0000000\u00b2"))
    return rng.choice(_ODD)


def _start(rng: Random, tables: SessionTables) -> Any:
    roll = rng.random()
    if roll < 0.4:
        return _pick(rng, _column(tables, CALENDAR, "event_start"), "2023-11-30 09:00:00")
    if roll < 0.9:
        return rng.choice(_STARTS)
    return rng.choice(_ODD)


def _duration(rng: Random) -> Any:
    roll = rng.random()
    if roll < 0.6:
        return rng.choice(("30", "60", "90", "15"))
    if roll < 0.75:
        return rng.choice((30, 45, 120))
    return rng.choice(("0", "-5", "30.5", "abc", 0, -10, 30.5, True, False, None, [30]))


def _query(rng: Random, tables: SessionTables) -> Any:
    roll = rng.random()
    if roll < 0.15:
        return ""
    if roll < 0.6:
        column = rng.choice(("event_name", "participant_email"))
        cell = _pick(rng, _column(tables, CALENDAR, column), "sync")
        if isinstance(cell, str) and cell:
            start = rng.randrange(len(cell))
            return _recase(rng, cell[start : start + rng.randint(1, 10)])
    if roll < 0.8:
        return rng.choice(("sync", "review", "atlas", "zzz", "1:1", "@"))
    if roll < 0.92:
        return rng.choice(_PATTERNS)
    return rng.choice(_ODD)


def _bound(rng: Random, tables: SessionTables) -> Any:
    roll = rng.random()
    if roll < 0.35:
        return _pick(rng, _column(tables, CALENDAR, "event_start"), "2023-11-30 09:00:00")
    if roll < 0.85:
        return rng.choice((*_STARTS, *_DAYS))
    return rng.choice(_ODD)


def _page(rng: Random) -> Any:
    if rng.random() < 0.85:
        return rng.randint(-1, 6)
    return rng.choice((0, "2", 2.0, 1.5, True, False, None, [1], 10**12))


def _page_size(rng: Random) -> Any:
    if rng.random() < 0.85:
        return rng.randint(1, 12)
    return rng.choice((0, -1, -3, "2", 2.0, 0.5, True, None, 100))


def _get_event(rng: Random, tables: SessionTables) -> dict[str, Any]:
    roll = rng.random()
    field = rng.choice(_EVENT_FIELDS) if roll < 0.85 else rng.choice(("Event_Name", *_ODD))
    return _maybe_drop(rng, {"event_id": _event_id(rng, tables), "field": field})


def _search_events(rng: Random, tables: SessionTables) -> dict[str, Any]:
    arguments: dict[str, Any] = {}
    if rng.random() < 0.85:
        arguments["query"] = _query(rng, tables)
    if rng.random() < 0.35:
        arguments["time_min"] = _bound(rng, tables)
    if rng.random() < 0.35:
        arguments["time_max"] = _bound(rng, tables)
    if rng.random() < 0.5:
        arguments["page"] = _page(rng)
    if rng.random() < 0.5:
        arguments["page_size"] = _page_size(rng)
    return _maybe_drop(rng, arguments, 0.02)


def _create_event(rng: Random, tables: SessionTables) -> dict[str, Any]:
    participant = _pick(rng, _column(tables, CALENDAR, "participant_email"), "a@atlas.com")
    arguments: dict[str, Any] = {
        "event_name": rng.choice(("sync up", "Parity review", "Zoë's 1:1", "")),
        "participant_email": _recase(rng, participant)
        if isinstance(participant, str)
        else participant,
        "event_start": _start(rng, tables),
        "duration": _duration(rng),
    }
    if rng.random() < 0.05:
        arguments[rng.choice(list(arguments))] = rng.choice(_ODD)
    return _maybe_drop(rng, arguments)


def _delete_event(rng: Random, tables: SessionTables) -> dict[str, Any]:
    return _maybe_drop(rng, {"event_id": _event_id(rng, tables)}, 0.03)


def _update_event(rng: Random, tables: SessionTables) -> dict[str, Any]:
    roll = rng.random()
    field = rng.choice(_EVENT_FIELDS[1:]) if roll < 0.85 else rng.choice(("event_id", *_ODD))
    if field == "event_start":
        value = _start(rng, tables)
    elif field == "duration":
        value = _duration(rng)
    elif field == "participant_email":
        value = rng.choice(("New.Person@Atlas.COM", "x@y.z", "İ@atlas.com"))
    else:
        value = rng.choice(("Renamed", "sync up", "Ünïcode ☕", ""))
    if rng.random() < 0.05:
        value = rng.choice(_ODD)
    arguments = {"event_id": _event_id(rng, tables), "field": field, "new_value": value}
    return _maybe_drop(rng, arguments)


# -- analytics ---------------------------------------------------------------------------------


def _day(rng: Random, tables: SessionTables) -> Any:
    roll = rng.random()
    if roll < 0.4:
        return _pick(rng, _column(tables, ANALYTICS, "date_of_visit"), "2023-11-01")
    if roll < 0.88:
        return rng.choice((*_DAYS, "bad", "2023-11-30 23:59:00"))
    return rng.choice(_ODD)


def _range(rng: Random, tables: SessionTables) -> dict[str, Any]:
    arguments: dict[str, Any] = {}
    if rng.random() < 0.6:
        arguments["time_min"] = _day(rng, tables)
    if rng.random() < 0.6:
        arguments["time_max"] = _day(rng, tables)
    return arguments


def _get_visitor(rng: Random, tables: SessionTables) -> dict[str, Any]:
    roll = rng.random()
    if roll < 0.75:
        visitor: Any = _pick(rng, _column(tables, ANALYTICS, "visitor_id"), "0860")
    elif roll < 0.9:
        visitor = rng.choice(("0000", "9999", "860", "abc"))
    else:
        visitor = rng.choice(_ODD)
    return _maybe_drop(rng, {"visitor_id": visitor})


def _create_plot(rng: Random, tables: SessionTables) -> dict[str, Any]:
    arguments = {
        **_range(rng, tables),
        "value_to_plot": rng.choice(_PLOT_VALUES)
        if rng.random() < 0.85
        else rng.choice(("Total_Visits", "visits", *_ODD)),
        "plot_type": rng.choice(_PLOT_TYPES)
        if rng.random() < 0.85
        else rng.choice(("Bar", "pie", *_ODD)),
    }
    return _maybe_drop(rng, arguments)


def _counts(rng: Random, tables: SessionTables) -> dict[str, Any]:
    return _maybe_drop(rng, _range(rng, tables), 0.02)


def _traffic_source(rng: Random, tables: SessionTables) -> dict[str, Any]:
    arguments = _range(rng, tables)
    if rng.random() < 0.8:
        roll = rng.random()
        if roll < 0.75:
            arguments["traffic_source"] = rng.choice(_SOURCES)
        elif roll < 0.9:
            arguments["traffic_source"] = rng.choice(("Direct", "email", ""))
        else:
            arguments["traffic_source"] = rng.choice(_ODD)
    return _maybe_drop(rng, arguments, 0.02)


ARGUMENTS: dict[str, Callable[[Random, SessionTables], dict[str, Any]]] = {
    "calendar_get_event_information_by_id": _get_event,
    "calendar_search_events": _search_events,
    "calendar_create_event": _create_event,
    "calendar_delete_event": _delete_event,
    "calendar_update_event": _update_event,
    "analytics_get_visitor_information_by_id": _get_visitor,
    "analytics_create_plot": _create_plot,
    "analytics_total_visits_count": _counts,
    "analytics_engaged_users_count": _counts,
    "analytics_traffic_source_count": _traffic_source,
    "analytics_get_average_session_duration": _counts,
}
