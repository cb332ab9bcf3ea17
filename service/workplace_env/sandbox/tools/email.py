"""The email toolkit (6 tools) over the ``email._emails`` table.

Source: REFERENCE.md f.2-f.7 and the goldens (``tool_calls_public.jsonl``, ``tool-email-*`` and the
replays). The reference is pandas code; the expressions here are chosen so that odd argument types
fail with the same pandas/CPython texts (comparing the id column to a list gives ``('Lengths must
match to compare', (500,), (1,))``, a numeric recipient gives ``argument of type 'int' is not
iterable``, and so on).

Writes rebind ``tables[EMAILS]`` to a new frame: a send appends with ``ignore_index=True`` (the
whole table is renumbered ``0..n-1``), a delete keeps the remaining rows' labels.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from workplace_env.sandbox.tables import EMAILS, SessionTables
from workplace_env.sandbox.tools.registry import tool

#: The reference's fixed clock: every email sent in a session carries this timestamp.
SENT_DATETIME = "2023-11-30 23:59:00"

_SUBJECT = "subject"
_BODY = "body"
_PARTY = "sender/recipient"
_DATETIME = "sent_datetime"
_ID = "email_id"

#: Per-value caches for the search: pure functions of immutable cell values, so they are safe
#: across sessions and frames. A session's copy of the table shares the base frame's string
#: objects, whose hashes Python caches, so a lookup costs far less than recomputing.
_TEXT_CACHE: dict[tuple[str, str, str], str] = {}
_STAMP_CACHE: dict[str, int] = {}
_CACHE_LIMIT = 50_000  # entries per cache; cleared when full (bounds memory)


def _cached_text(key: tuple[Any, Any, Any]) -> str | None:
    """The cached search text of one row, or None (also for an unhashable row)."""
    try:
        return _TEXT_CACHE.get(key)
    except TypeError:
        return None


def _search_texts(subjects: list[Any], bodies: list[Any], parties: list[Any]) -> list[str]:
    """Per row, the lower-cased ``"<subject> <body> <sender/recipient>"`` query words must be in.

    Only all-string rows are cached: numbers that compare equal (``1``, ``1.0``, ``True``) format
    differently, so they must not share an entry. A lookup with a non-string cell therefore
    misses (or raises TypeError for an unhashable list), and the row is formatted afresh.
    """
    keys = list(zip(subjects, bodies, parties, strict=True))
    try:
        texts = list(map(_TEXT_CACHE.get, keys))
    except TypeError:  # an unhashable cell somewhere: look the rows up one by one
        texts = list(map(_cached_text, keys))
    for i, text in enumerate(texts):
        if text is None:
            subject, body, party = key = keys[i]
            texts[i] = text = f"{subject} {body} {party}".lower()
            if type(subject) is str and type(body) is str and type(party) is str:
                if len(_TEXT_CACHE) >= _CACHE_LIMIT:
                    _TEXT_CACHE.clear()
                _TEXT_CACHE[key] = text
    return texts


def _timestamps(values: list[Any]) -> np.ndarray:
    """``sent_datetime`` values as a ``datetime64[ns]`` array, as ``pd.to_datetime`` parses them."""
    try:
        stamps = list(map(_STAMP_CACHE.__getitem__, values))
    except (KeyError, TypeError):
        parsed = pd.to_datetime(pd.Series(values, dtype=object)).to_numpy(dtype="datetime64[ns]")
        if len(_STAMP_CACHE) + len(values) >= _CACHE_LIMIT:
            _STAMP_CACHE.clear()
        for value, stamp in zip(values, parsed.view("int64").tolist(), strict=True):
            if type(value) is str:
                _STAMP_CACHE[value] = stamp
        return parsed
    return np.array(stamps, dtype="int64").view("datetime64[ns]")


def _newest_first(stamps: np.ndarray) -> np.ndarray:
    """Positions ordered as pandas ``sort_values(ascending=False)`` orders them.

    Ties must come out exactly as in the reference, which sorts with numpy's default, unstable
    quicksort (goldens README): pandas reverses the values, argsorts them, maps the positions back
    and reverses the result; missing values go last. Argsorting a ``datetime64`` array keeps numpy
    on the same sort routine as the reference's.
    """
    positions = np.arange(len(stamps))
    missing = np.isnat(stamps)
    if missing.any():  # never with tool-written data, kept for pandas' semantics
        valid = positions[~missing][::-1]
        ordered = valid[stamps[~missing][::-1].argsort(kind="quicksort")][::-1]
        return np.concatenate([ordered, positions[missing]])
    return positions[::-1][stamps[::-1].argsort(kind="quicksort")][::-1]


def _records(frame: pd.DataFrame, positions: list[int]) -> list[dict[str, Any]]:
    """The rows at ``positions`` as ``{column: value}`` dicts in column order (missing -> NaN)."""
    columns = list(frame.columns)
    rows = frame.to_numpy(dtype=object)[positions].tolist()
    return [dict(zip(columns, row, strict=True)) for row in rows]


def _id_mask(frame: pd.DataFrame, email_id: Any) -> np.ndarray:
    """``frame["email_id"] == email_id`` as a bool array, with pandas' errors for odd types.

    A string is compared on the numpy array directly (the same element-wise ``==``, without
    pandas' overhead); anything else goes through pandas, so a list raises ``('Lengths must match
    to compare', (500,), (1,))`` and a number or bool simply matches nothing.
    """
    if type(email_id) is str:
        return frame[_ID].to_numpy() == email_id
    return (frame[_ID] == email_id).to_numpy()


def _find(frame: pd.DataFrame, email_id: Any) -> int | None:
    """Position of the first row whose id equals ``email_id``, or None."""
    matches = np.flatnonzero(_id_mask(frame, email_id))
    return int(matches[0]) if len(matches) else None


@tool(
    name="email_get_email_information_by_id",
    qualname="EmailTool.get_email_information_by_id",
    description="Retrieves specific details of an email by its ID.",
    parameters={
        "type": "object",
        "properties": {
            "email_id": {"type": "string", "description": "Unique ID of the email"},
            "field": {
                "type": "string",
                "description": "Specific field to return. Available fields: 'email_id', "
                "'inbox/outbox', 'sender/recipient', 'subject', 'sent_datetime', 'body'",
            },
        },
        "required": ["email_id", "field"],
        "additionalProperties": False,
    },
)
def get_email_information_by_id(
    tables: SessionTables, email_id: Any = None, field: Any = None
) -> dict[str, Any] | str:
    """``{field: value}`` of the email ``email_id`` (REFERENCE.md f.2).

    Strings: ``"Email ID not provided."``, ``"Field not provided."``, ``"Email not found."``,
    ``"Field '<field>' not found. Available fields: email_id, ..."`` (checked once the email is
    found), ``"Error retrieving email information: <e>"``. Ids match exactly (a number never does).
    """
    if not email_id:
        return "Email ID not provided."
    if not field:
        return "Field not provided."
    try:
        frame = tables[EMAILS]
        position = _find(frame, email_id)
        if position is None:
            return "Email not found."
        columns = list(frame.columns)
        # A hashed lookup like the reference's: an unhashable field (a list) raises TypeError.
        if field not in dict.fromkeys(columns):
            return f"Field '{field}' not found. Available fields: {', '.join(columns)}"
        return {field: frame[field].to_numpy(dtype=object)[position]}
    except Exception as exc:
        return f"Error retrieving email information: {exc}"


@tool(
    name="email_search_emails",
    qualname="EmailTool.search_emails",
    description="Searches for emails matching the given query across subject, body, or sender "
    "fields. The function matches an email if all words in the query appear in any of these "
    "fields.",
    parameters={
        "type": "object",
        "properties": {
            "query": {
                "type": "string",
                "description": "Search query, matching terms in subject, body, or "
                "sender/recipient fields",
            },
            "date_min": {
                "type": "string",
                "description": "Lower date limit for the email's sent date (inclusive). "
                "Format: YYYY-MM-DD",
            },
            "date_max": {
                "type": "string",
                "description": "Upper date limit for the email's sent date (inclusive). "
                "Format: YYYY-MM-DD",
            },
            "page": {"type": "integer", "description": "Page number of results to return"},
            "page_size": {"type": "integer", "description": "Number of emails per page"},
        },
        "required": [],
        "additionalProperties": False,
    },
)
def search_emails(
    tables: SessionTables,
    query: Any = "",
    date_min: Any = None,
    date_max: Any = None,
    page: Any = 1,
    page_size: Any = 5,
) -> dict[str, Any] | str:
    """One page of the emails containing every query word, newest first (REFERENCE.md f.3).

    Returns ``{"emails": [...], "pagination": {total_emails, page, page_size, total_pages}}``,
    ``"No emails found."``, or ``"Error searching emails: <e>"``. Words are plain substrings of
    ``"<subject> <body> <sender/recipient>"`` (lower-cased). Date bounds are inclusive by calendar
    day and parsed with ``pd.Timestamp``; the query filter runs first, so a bad date with no
    query match is just ``"No emails found."``. Paging is the reference's arithmetic, unguarded.
    """
    try:
        words = query.lower().split()
        frame = tables[EMAILS]
        matched = list(range(len(frame)))
        if words:
            texts = _search_texts(
                frame[_SUBJECT].tolist(), frame[_BODY].tolist(), frame[_PARTY].tolist()
            )
            for word in words:  # every word must occur: narrow the candidates word by word
                matched = [i for i in matched if word in texts[i]]
        if not matched:
            # Inferred from the goldens: no date is parsed when the query matches nothing.
            return "No emails found."
        sent = frame[_DATETIME].tolist()
        if len(matched) < len(sent):
            sent = [sent[i] for i in matched]
        stamps = _timestamps(sent)
        # Sort all query matches before the date filter: that fixes the order among ties.
        order = _newest_first(stamps)
        positions = np.array(matched, dtype=np.intp)[order]
        stamps = stamps[order]
        days = stamps.astype("datetime64[D]")
        keep = np.ones(len(positions), dtype=bool)
        if date_min:
            keep &= days >= np.datetime64(pd.Timestamp(date_min).date(), "D")
        if date_max:
            keep &= days <= np.datetime64(pd.Timestamp(date_max).date(), "D")
        selected = positions[keep].tolist()
        if not selected:
            return "No emails found."
        total_emails = len(selected)
        # The reference's paging, including what it does with 0, negatives, floats and strings.
        total_pages = (total_emails + page_size - 1) // page_size
        page = max(1, min(page, total_pages))
        start = (page - 1) * page_size
        end = start + page_size
        return {
            "emails": _records(frame, selected[start:end]),
            "pagination": {
                "total_emails": total_emails,
                "page": page,
                "page_size": page_size,
                "total_pages": total_pages,
            },
        }
    except Exception as exc:
        return f"Error searching emails: {exc}"


def _max_id(frame: pd.DataFrame) -> Any:
    """``frame["email_id"].max()``: the lexicographic max of the (string) ids."""
    ids = frame[_ID].tolist()
    if ids and all(type(i) is str for i in ids):
        return max(ids)  # same answer as pandas, without its reduction overhead
    return frame[_ID].max()


def _append(frame: pd.DataFrame, row: list[Any]) -> pd.DataFrame:
    """``pd.concat([frame, <row as a one-row frame>], ignore_index=True)``: renumbers 0..n.

    Any JSON value (a list body included) is stored as one cell. When every column is already
    object dtype the result is built directly (same values, dtypes and labels, a third of the
    cost); otherwise pandas' own concat decides the dtypes.
    """
    if len(frame) and all(frame[c].dtype.kind == "O" for c in frame.columns):
        values = np.empty((len(frame) + 1, len(frame.columns)), dtype=object)
        values[:-1] = frame.to_numpy(dtype=object)
        for j, value in enumerate(row):
            values[-1, j] = value  # item assignment keeps a list value as a single cell
        return pd.DataFrame(values, columns=frame.columns, copy=False)
    new_row = pd.DataFrame([row], columns=frame.columns)
    return pd.concat([frame, new_row], ignore_index=True)


@tool(
    name="email_send_email",
    qualname="EmailTool.send_email",
    description="Sends an email to the specified recipient.",
    parameters={
        "type": "object",
        "properties": {
            "recipient": {"type": "string", "description": "Email address of the recipient"},
            "subject": {"type": "string", "description": "Subject line of the email"},
            "body": {"type": "string", "description": "Body content of the email"},
        },
        "required": ["recipient", "subject", "body"],
        "additionalProperties": False,
    },
    writes=(EMAILS,),
)
def send_email(
    tables: SessionTables, recipient: Any = None, subject: Any = None, body: Any = None
) -> str:
    """Append an outbox email (REFERENCE.md f.4).

    Strings: ``"Recipient, subject, or body not provided."``, ``"Invalid recipient email
    address."`` (needs "@" and "."), ``"Email sent successfully."``, ``"Error sending email: <e>"``.
    The address check runs outside the error handler, so a numeric recipient raises ``argument
    of type 'int' is not iterable``. Subject and body are stored as sent (any JSON type).
    """
    if not recipient or not subject or not body:
        return "Recipient, subject, or body not provided."
    if "@" not in recipient or "." not in recipient:
        return "Invalid recipient email address."
    try:
        frame = tables[EMAILS]
        # The max id is lexicographic and the new id is not zero-padded: "00000499" -> "500",
        # then "500" is the max, so "501" (REFERENCE.md c.7).
        email_id = str(int(_max_id(frame)) + 1)
        row = [email_id, "outbox", recipient.lower(), subject, SENT_DATETIME, body]
        tables[EMAILS] = _append(frame, row)
        return "Email sent successfully."
    except Exception as exc:
        return f"Error sending email: {exc}"


@tool(
    name="email_delete_email",
    qualname="EmailTool.delete_email",
    description="Deletes an email by its ID.",
    parameters={
        "type": "object",
        "properties": {
            "email_id": {"type": "string", "description": "Unique ID of the email to be deleted"}
        },
        "required": ["email_id"],
        "additionalProperties": False,
    },
    writes=(EMAILS,),
)
def delete_email(tables: SessionTables, email_id: Any = None) -> str:
    """Delete the email ``email_id``; other rows keep their labels (REFERENCE.md f.5).

    Strings: ``"Email ID not provided."``, ``"Email deleted successfully."``, ``"Email not
    found."``, ``"Error deleting email: <e>"``.
    """
    if not email_id:
        return "Email ID not provided."
    try:
        frame = tables[EMAILS]
        mask = _id_mask(frame, email_id)
        if not mask.any():
            return "Email not found."
        tables[EMAILS] = frame[~mask]
        return "Email deleted successfully."
    except Exception as exc:
        return f"Error deleting email: {exc}"


def _relay(result: str, success: str) -> str:
    """Forward/reply report the inner send's failure when it says "Error" or "Invalid"."""
    return result if "Error" in result or "Invalid" in result else success


@tool(
    name="email_forward_email",
    qualname="EmailTool.forward_email",
    description="Forwards an email to the specified recipient.",
    parameters={
        "type": "object",
        "properties": {
            "email_id": {
                "type": "string",
                "description": "Unique ID of the email to be forwarded",
            },
            "recipient": {"type": "string", "description": "Email address of the recipient"},
        },
        "required": ["email_id", "recipient"],
        "additionalProperties": False,
    },
    writes=(EMAILS,),
)
def forward_email(tables: SessionTables, email_id: Any = None, recipient: Any = None) -> str:
    """Send ``"FW: <subject>"`` with the original body to ``recipient`` (REFERENCE.md f.6).

    Strings: ``"Email ID or recipient not provided."``, ``"Invalid recipient email address."``,
    ``"Email not found."``, ``"Email forwarded successfully."``, ``"Error forwarding email: <e>"``,
    or the inner send's text when it contains "Error" or "Invalid". The address check runs
    outside the error handler (a numeric recipient raises).
    """
    if not email_id or not recipient:
        return "Email ID or recipient not provided."
    if "@" not in recipient or "." not in recipient:
        return "Invalid recipient email address."
    try:
        frame = tables[EMAILS]
        position = _find(frame, email_id)
        if position is None:
            return "Email not found."
        subject = frame[_SUBJECT].to_numpy(dtype=object)[position]
        body = frame[_BODY].to_numpy(dtype=object)[position]
        # The inner send may quietly send nothing (an empty original body): still a success.
        result = send_email(tables, recipient, f"FW: {subject}", body)
        return _relay(result, "Email forwarded successfully.")
    except Exception as exc:
        return f"Error forwarding email: {exc}"


@tool(
    name="email_reply_email",
    qualname="EmailTool.reply_email",
    description="Replies to an email by its ID.",
    parameters={
        "type": "object",
        "properties": {
            "email_id": {
                "type": "string",
                "description": "Unique ID of the email to be replied",
            },
            "body": {"type": "string", "description": "Body content of the email"},
        },
        "required": ["email_id", "body"],
        "additionalProperties": False,
    },
    writes=(EMAILS,),
)
def reply_email(tables: SessionTables, email_id: Any = None, body: Any = None) -> str:
    """Send ``"RE: <subject>"`` with ``body`` to the email's sender/recipient (REFERENCE.md f.7).

    Strings: ``"Email ID or body not provided."``, ``"Email not found."``, ``"Email replied
    successfully."``, ``"Error replying to email: <e>"``, or the inner send's text when it
    contains "Error" or "Invalid".
    """
    if not email_id or not body:
        return "Email ID or body not provided."
    try:
        frame = tables[EMAILS]
        position = _find(frame, email_id)
        if position is None:
            return "Email not found."
        subject = frame[_SUBJECT].to_numpy(dtype=object)[position]
        party = frame[_PARTY].to_numpy(dtype=object)[position]
        result = send_email(tables, party, f"RE: {subject}", body)
        return _relay(result, "Email replied successfully.")
    except Exception as exc:
        return f"Error replying to email: {exc}"
