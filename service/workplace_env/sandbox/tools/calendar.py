"""Calendar tools (REFERENCE.md f.8-f.12): the ``calendar._calendar_events`` table.

Five tools over one object-dtype table (``event_id, event_name, participant_email, event_start,
duration``). Each tool has a pandas implementation that behaves as the reference's pandas code,
including how it fails on odd argument types, because those failures are model-visible text
(``"Error executing tool ..."``, added by the registry), and a fast path over the session's
plain-list table for well-typed arguments on text cells, which returns ``FALLBACK`` (before
changing anything) whenever pandas must decide. Behaviour:

* ids must be ``str`` of length 8 with ``str.isdigit()`` true (so fullwidth digits and ``"²"``
  pass the format check and then are simply not found);
* dates are validated with ``pd.Timestamp`` and only its ``ValueError`` becomes the "Invalid ...
  format" text (a list raises ``TypeError``, which surfaces as a tool error);
* durations are validated with ``int()`` (``30.5`` and ``True`` pass, ``"30.5"`` does not) and
  stored exactly as sent;
* the search filters are case-insensitive regular expressions (``Series.str.contains``), the
  order is newest first by ``pd.Timestamp(event_start)`` with a stable sort (ties keep table
  order), and paging is plain Python arithmetic and list slicing;
* a create appends with ``pd.concat`` and does not renumber the index (the new label is ``0``);
  a delete keeps the remaining labels.
"""

from __future__ import annotations

import re
from operator import itemgetter
from typing import Any

import numpy as np
import pandas as pd
from pandas.api.types import infer_dtype

from workplace_env.memo import BoundedMemo
from workplace_env.sandbox.tables import CALENDAR
from workplace_env.sandbox.tools.common import (
    contains_search,
    delete_where,
    frame_append,
    next_id,
    only_str,
    paginate,
)
from workplace_env.sandbox.tools.registry import FALLBACK, Toolkit, integer, string

_KIT = Toolkit("calendar")

_ID_FORMAT_ERROR = "Invalid event ID format. Expected 8-digit ID."
_START_FORMAT_ERROR = "Invalid event_start format. Expected YYYY-MM-DD HH:MM:SS."
_DURATION_POSITIVE_ERROR = "Duration must be a positive number of minutes."
_DURATION_FORMAT_ERROR = "Invalid duration format. Expected a number of minutes."
_NO_UPDATE_ARGUMENT = "Event ID, field, or new value not provided."

_EVENT_ID = string("8-digit ID of the event")  # schema property

_GET_FIELDS = ("event_id", "event_name", "participant_email", "event_start", "duration")
_UPDATE_FIELDS = ("event_name", "participant_email", "event_start", "duration")

# pd.Timestamp is slow (~µs per string) and the search parses every candidate's start; strings
# in the canonical date/datetime forms parse the same way every time, so their results are
# memoised. Anything else (e.g. "now", "10:00", which depend on the clock) is parsed afresh.
_CANONICAL = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}(?: [0-9]{2}:[0-9]{2}(?::[0-9]{2})?)?")
_TIMESTAMPS: BoundedMemo[str, pd.Timestamp] = BoundedMemo(65536)


# -- the tools' advertised parameters (their schema's properties), by method -----------------------

_GET_EVENT_INFORMATION_BY_ID = {
    "event_id": _EVENT_ID,
    "field": string(
        "Field to return. Available fields are: 'event_id', "
        "'event_name', 'participant_email', 'event_start', 'duration'"
    ),
}
_SEARCH_EVENTS = {
    "query": string(
        "Query to search for. Terms will be matched in the event_name and participant_email fields"
    ),
    "time_min": string(
        "Lower bound (inclusive) for an event's end time to filter by. Format: YYYY-MM-DD HH:MM:SS"
    ),
    "time_max": string(
        "Upper bound (inclusive) for an event's start time to filter by. "
        "Format: YYYY-MM-DD HH:MM:SS"
    ),
    "page": integer("Page number of results to return"),
    "page_size": integer("Number of events per page"),
}
_CREATE_EVENT = {
    "event_name": string("Name of the event"),
    "participant_email": string("Email of the participant"),
    "event_start": string("Start time of the event. Format: YYYY-MM-DD HH:MM:SS"),
    "duration": string("Duration of the event in minutes"),
}
_DELETE_EVENT = {"event_id": _EVENT_ID}
_UPDATE_EVENT = {
    "event_id": _EVENT_ID,
    "field": string(
        "Field to update. Available fields are: 'event_name', "
        "'participant_email', 'event_start', 'duration'"
    ),
    "new_value": string("New value for the field"),
}


def _timestamp(value: Any) -> pd.Timestamp:
    """``pd.Timestamp(value)``, memoised for canonical date strings (same result, same errors)."""
    if type(value) is str:
        cached = _TIMESTAMPS.entries.get(value)
        if cached is not None:
            return cached
        parsed = pd.Timestamp(value)
        if _CANONICAL.fullmatch(value):
            _TIMESTAMPS.put(value, parsed)
        return parsed
    return pd.Timestamp(value)


# -- argument checks shared by both implementations (pure Python, exact for any JSON value) ----


def _valid_id(event_id: Any) -> bool:
    """The reference's id check: a str of 8 characters that ``str.isdigit`` accepts."""
    return isinstance(event_id, str) and len(event_id) == 8 and event_id.isdigit()


def _duration_problem(duration: Any) -> str | None:
    """The duration check shared by create and update: ``int()`` must give a positive number.

    Only ``ValueError`` is a format message; ``int([...])`` raises ``TypeError`` to the caller.
    """
    try:
        if int(duration) <= 0:
            return _DURATION_POSITIVE_ERROR
    except ValueError:
        return _DURATION_FORMAT_ERROR
    return None


def _start_problem(event_start: Any) -> str | None:
    """The event_start message when ``pd.Timestamp`` refuses it (its ``TypeError`` propagates)."""
    try:
        _timestamp(event_start)
    except ValueError:
        return _START_FORMAT_ERROR
    return None


def _get_problem(event_id: Any, field: Any) -> str | None:
    """The get tool's argument messages, in the reference's order."""
    if not event_id:
        return "Event ID not provided."
    if not field:
        return "Field not provided."
    if not _valid_id(event_id):
        return _ID_FORMAT_ERROR
    if field not in _GET_FIELDS:
        return f"Invalid field. Available fields are: {', '.join(_GET_FIELDS)}"
    return None


def _parse_bounds(time_min: Any, time_max: Any) -> tuple[Any, Any] | str:
    """The search's bounds as Timestamps (a falsy bound stays as is), or the format message of
    the first one ``pd.Timestamp`` refuses with ValueError (its TypeError propagates)."""
    bounds = []
    for name, value in (("time_min", time_min), ("time_max", time_max)):
        try:
            bounds.append(_timestamp(value) if value else value)
        except ValueError:
            return f"Invalid {name} format. Expected YYYY-MM-DD HH:MM:SS."
    return bounds[0], bounds[1]


def _create_problem(
    event_name: Any, participant_email: Any, event_start: Any, duration: Any
) -> str | None:
    """The create tool's argument messages, in the reference's order (falsy values first)."""
    if not event_name:
        return "Event name not provided."
    if not participant_email:
        return "Participant email not provided."
    if not event_start:
        return "Event start not provided."
    if not duration:
        return "Event duration not provided."
    return _start_problem(event_start) or _duration_problem(duration)


def _update_problem(event_id: Any, field: Any, new_value: Any) -> str | None:
    """The update tool's argument messages; values are validated before the lookup."""
    if not event_id or not field or not new_value:
        return _NO_UPDATE_ARGUMENT
    if not _valid_id(event_id):
        return _ID_FORMAT_ERROR
    if field not in _UPDATE_FIELDS:
        return f"Invalid field. Available fields are: {', '.join(_UPDATE_FIELDS)}"
    if field == "event_start":
        return _start_problem(new_value)
    if field == "duration":
        return _duration_problem(new_value)
    return None


def _paginate(rows: list[Any], page: Any, page_size: Any) -> tuple[list[Any], dict[str, Any]]:
    """The reference's paging over a non-empty list, errors included (:func:`paginate`)."""
    start, end, pagination = paginate("total_events", len(rows), page, page_size)
    return rows[start:end], pagination


def _matches(frame: pd.DataFrame, event_id: str) -> np.ndarray:
    """Boolean mask of the rows whose ``event_id`` equals ``event_id`` (a valid 8-digit str)."""
    return np.asarray(frame["event_id"].to_numpy() == event_id, dtype=bool)


# The inferred dtypes for which pandas allows the .str accessor (StringMethods._validate).
_STR_ACCESSOR_TYPES = frozenset({"string", "empty", "mixed", "mixed-integer"})


def _contains(column: pd.Series, query: Any) -> np.ndarray:
    """``column.str.contains(query, case=False, na=False)`` as a numpy bool array.

    Same checks in the same order as pandas 2.3.2 (the ``.str`` accessor's dtype check, then
    ``re.compile(query)``, whose errors are golden outputs), then a plain loop instead of
    pandas' generic mapping: a str cell matches when the case-insensitive pattern is found in
    it, any other cell (number, None, list) is False. Unusual columns go through pandas itself.
    """
    values = column.to_numpy()
    if values.dtype != object or infer_dtype(values, skipna=True) not in _STR_ACCESSOR_TYPES:
        # Non-object columns, bytes, all-number columns: let pandas raise or answer.
        return np.asarray(column.str.contains(query, case=False, na=False), dtype=bool)
    search = contains_search(query)
    return np.fromiter(
        (isinstance(v, str) and search(v) is not None for v in values),
        dtype=bool,
        count=len(values),
    )


# -- the tools ---------------------------------------------------------------------------------


@_KIT.tool("Returns the event for a given ID.", _GET_EVENT_INFORMATION_BY_ID)
def get_event_information_by_id(tables, event_id=None, field=None):
    """``{field: value}`` of the event (the value as stored, e.g. an int duration stays an int).

    Strings, in check order: "Event ID not provided.", "Field not provided.", the 8-digit
    message, "Invalid field. Available fields are: ...", "Event not found." (REFERENCE.md f.8).
    The reference's "Field not found." is unreachable after its field check.
    """
    problem = _get_problem(event_id, field)
    if problem is not None:
        return problem
    frame = tables[CALENDAR]
    hits = np.flatnonzero(_matches(frame, event_id))
    if len(hits) == 0:
        return "Event not found."
    return {field: frame[field].to_numpy()[hits[0]]}


@_KIT.fast_path("get_event_information_by_id")
def _get_event_information_by_id_fast(tables, event_id=None, field=None):
    problem = _get_problem(event_id, field)
    if problem is not None:
        return problem
    table = tables.table(CALENDAR)
    i = table.first("event_id", event_id)
    if i is None:
        return "Event not found."
    return {field: table.data[field][i]}


@_KIT.tool(
    "Returns the events for a given query with pagination support.", _SEARCH_EVENTS, required=()
)
def search_events(tables, query="", time_min=None, time_max=None, page=1, page_size=5):
    """``{"events": [...], "pagination": {...}}`` newest first, or "No events found.".

    ``query`` is a case-insensitive regex over event_name or participant_email (non-string cells
    never match); both time bounds apply to ``event_start`` (despite the schema's wording) and
    are inclusive. Strings: "Invalid time_min format. Expected YYYY-MM-DD HH:MM:SS." (and
    time_max). Paging errors are Python's (division by zero, slice indices, str/int operands)
    (REFERENCE.md f.9).
    """
    # The bounds are validated before the query runs, so a bad bound wins over a bad regex.
    bounds = _parse_bounds(time_min, time_max)
    if type(bounds) is str:
        return bounds
    time_min, time_max = bounds

    frame = tables[CALENDAR]
    # Both columns are searched before either result is used, as `a | b` of two masks does.
    in_name = _contains(frame["event_name"], query)
    in_email = _contains(frame["participant_email"], query)
    rows = np.flatnonzero(in_name | in_email).tolist()

    # Each candidate's start is parsed once (the reference re-parses per pass, same values).
    starts = frame["event_start"].to_numpy()
    dated = [(r, _timestamp(starts[r])) for r in rows]
    if time_min:
        dated = [item for item in dated if item[1] >= time_min]
    if time_max:
        dated = [item for item in dated if item[1] <= time_max]
    if not dated:
        return "No events found."

    # list.sort is stable, also with reverse=True: equal starts keep table order. Comparing
    # Timestamps (not strings) also reproduces the tz-naive/aware TypeError.
    dated.sort(key=itemgetter(1), reverse=True)
    page_rows, pagination = _paginate([r for r, _ in dated], page, page_size)

    columns = list(frame.columns)
    arrays = [frame[c].to_numpy() for c in columns]
    events = [{c: a[r] for c, a in zip(columns, arrays, strict=True)} for r in page_rows]
    return {"events": events, "pagination": pagination}


@_KIT.fast_path("search_events")
def _search_events_fast(tables, query="", time_min=None, time_max=None, page=1, page_size=5):
    # Only str queries and bounds and positive int paging; everything else is pandas' to decide.
    if type(query) is not str or type(page) is not int or type(page_size) is not int:
        return FALLBACK
    if page_size <= 0 or (time_min and type(time_min) is not str):
        return FALLBACK
    if time_max and type(time_max) is not str:
        return FALLBACK
    bounds = _parse_bounds(time_min, time_max)
    if type(bounds) is str:
        return bounds
    time_min, time_max = bounds

    table = tables.table(CALENDAR)
    names = table.data["event_name"]
    emails = table.data["participant_email"]
    starts = table.data["event_start"]
    if not (table.text_only or (table.all_object() and only_str(starts))):
        return FALLBACK
    try:
        search = contains_search(query)
    except Exception:  # an invalid pattern: pandas raises the reference's error text
        return FALLBACK
    rows = [
        r
        for r in range(len(names))
        if (isinstance(names[r], str) and search(names[r]) is not None)
        or (isinstance(emails[r], str) and search(emails[r]) is not None)
    ]
    try:
        dated = [(r, _timestamp(starts[r])) for r in rows]
        if time_min:
            dated = [item for item in dated if item[1] >= time_min]
        if time_max:
            dated = [item for item in dated if item[1] <= time_max]
        dated.sort(key=itemgetter(1), reverse=True)
    except Exception:  # e.g. tz-aware vs naive starts: pandas gives the error text
        return FALLBACK
    if not dated:
        return "No events found."
    page_rows, pagination = _paginate([r for r, _ in dated], page, page_size)
    return {"events": table.records(page_rows), "pagination": pagination}


@_KIT.tool("Creates a new event.", _CREATE_EVENT, writes=(CALENDAR,))
def create_event(tables, event_name=None, participant_email=None, event_start=None, duration=None):
    """Append an event and return its id, the next 8-digit one (REFERENCE.md f.10).

    The argument messages come first (:func:`_create_problem`, shared with the fast path), then
    the participant is lower-cased (a non-str fails on ``lower``, before the id: black-box on an
    emptied table), then the id is computed (NaN error on an empty table: goldens). Name, start
    and duration are stored as sent. The row is appended with label 0, nothing renumbered.
    """
    problem = _create_problem(event_name, participant_email, event_start, duration)
    if problem is not None:
        return problem
    cells = (event_name, participant_email.lower(), event_start, duration)
    return frame_append(tables, CALENDAR, cells, renumber=False)


@_KIT.fast_path("create_event")
def _create_event_fast(
    tables, event_name=None, participant_email=None, event_start=None, duration=None
):
    texts = (event_name, participant_email, event_start)
    if any(type(v) is not str for v in texts) or type(duration) not in (str, int):
        return FALLBACK
    problem = _create_problem(event_name, participant_email, event_start, duration)
    if problem is not None:
        return problem
    table = tables.table(CALENDAR)
    ids = table.data["event_id"]
    # pandas' result is only this simple for a non-empty all-object table whose index cannot
    # extend a RangeIndex with the new label 0.
    if not ids or not table.all_object() or not only_str(ids):
        return FALLBACK
    if table.range_index is not None and table.index[-1] + table.range_index[2] == 0:
        return FALLBACK
    event_id = next_id(ids)
    if event_id is None:
        return FALLBACK
    values = {
        "event_id": event_id,
        "event_name": event_name,
        "participant_email": participant_email.lower(),
        "event_start": event_start,
        "duration": duration,  # an int stays an int (an int64 cell cast to object by concat)
    }
    table = tables.writable(CALENDAR)
    # Unlike the other toolkits' appends, no renumbering: the new row keeps its one-row
    # frame's label 0 (concat without ignore_index), so labels end ..., 299, 0.
    table.append_row(tuple(values[column] for column in table.columns), label=0)
    return event_id


@_KIT.tool("Deletes an event.", _DELETE_EVENT, writes=(CALENDAR,))
def delete_event(tables, event_id=None):
    """ "Event deleted successfully." or "Event not found." (REFERENCE.md f.11).

    Also "Event ID not provided." and the 8-digit message (an int id is invalid). The remaining
    rows keep their index labels.
    """
    if not event_id:
        return "Event ID not provided."
    if not _valid_id(event_id):
        return _ID_FORMAT_ERROR
    frame = tables[CALENDAR]
    hit = _matches(frame, event_id)
    if not hit.any():
        return "Event not found."
    # take() keeps labels and dtypes like boolean indexing, without a SettingWithCopy link.
    tables[CALENDAR] = frame.take(np.flatnonzero(~hit))
    return "Event deleted successfully."


@_KIT.fast_path("delete_event")
def _delete_event_fast(tables, event_id=None):
    if not event_id:
        return "Event ID not provided."
    if not _valid_id(event_id):
        return _ID_FORMAT_ERROR
    # No text-only check (unlike PM/CRM/email): a valid id is a str, compared with == whatever
    # the cells, and take() keeps the other rows' cells and labels as they are.
    if not delete_where(tables, CALENDAR, "event_id", event_id):
        return "Event not found."
    return "Event deleted successfully."


@_KIT.tool("Updates an event.", _UPDATE_EVENT, writes=(CALENDAR,))
def update_event(tables, event_id=None, field=None, new_value=None):
    """ "Event updated successfully." or "Event not found." (REFERENCE.md f.12).

    Checks, in order: any argument falsy -> "Event ID, field, or new value not provided.";
    the 8-digit message; "Invalid field. Available fields are: event_name, participant_email,
    event_start, duration"; the event_start / duration messages of create (validated before the
    event is looked up); then the lookup. participant_email is lower-cased; the value is stored
    as sent otherwise (an int stays an int).
    """
    problem = _update_problem(event_id, field, new_value)
    if problem is not None:
        return problem
    frame = tables[CALENDAR]
    hit = _matches(frame, event_id)
    if not hit.any():
        return "Event not found."
    if field == "participant_email":
        new_value = new_value.lower()
    frame.loc[hit, field] = new_value
    return "Event updated successfully."


@_KIT.fast_path("update_event")
def _update_event_fast(tables, event_id=None, field=None, new_value=None):
    if type(new_value) is not str or type(field) is not str:
        return FALLBACK
    problem = _update_problem(event_id, field, new_value)
    if problem is not None:
        return problem
    table = tables.table(CALENDAR)
    if table.dtype(field) != "object":
        return FALLBACK  # pandas would upcast the column
    hits = table.positions("event_id", event_id)
    if not hits:
        return "Event not found."
    if field == "participant_email":
        new_value = new_value.lower()
    tables.writable(CALENDAR).set_cells(hits, field, new_value)
    return "Event updated successfully."
