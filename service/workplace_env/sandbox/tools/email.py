"""The email toolkit (6 tools) over the ``email._emails`` table.

Source: REFERENCE.md f.2-f.7 and the goldens (``tool_calls_public.jsonl``, ``tool-email-*`` and the
replays). The reference is pandas code; the expressions here are chosen so that odd argument types
fail with the same pandas/CPython texts (comparing the id column to a list gives ``('Lengths must
match to compare', (500,), (1,))``, a numeric recipient gives ``argument of type 'int' is not
iterable``, and so on).

Writes rebind ``tables[EMAILS]`` to a new frame: a send appends with ``ignore_index=True`` (the
whole table is renumbered ``0..n-1``), a delete keeps the remaining rows' labels.

Each tool also has a fast path over the session's plain :class:`Table` (right after its pandas
implementation). They handle string arguments on a ``text_only`` table with the standard columns
and fall back to pandas for anything else; writes edit the private table in place exactly as
``Table.from_frame`` would store the pandas result. The search keeps a per-table-version
:class:`_SearchIndex` (row texts, timestamps, cached word hits and orders).
"""

from __future__ import annotations

import re
from datetime import date
from itertools import repeat
from operator import contains
from typing import Any

import numpy as np
import pandas as pd

from workplace_env.memo import BoundedMemo, MemoPolicy
from workplace_env.sandbox.table import Table
from workplace_env.sandbox.tables import EMAILS, SessionTables
from workplace_env.sandbox.tools.common import frame_records, next_id, paginate, text_table
from workplace_env.sandbox.tools.registry import FALLBACK, Toolkit, integer, string

_KIT = Toolkit("email")

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
_CACHE_LIMIT = 50_000  # entries per cache; cleared when full (bounds memory)
_TEXT_CACHE: BoundedMemo[tuple[str, str, str], str] = BoundedMemo(_CACHE_LIMIT)
_STAMP_CACHE: BoundedMemo[str, int] = BoundedMemo(_CACHE_LIMIT)


# -- the tools' advertised parameters (their schema's properties), by method -----------------------

_GET_EMAIL_INFORMATION_BY_ID = {
    "email_id": string("Unique ID of the email"),
    "field": string(
        "Specific field to return. Available fields: 'email_id', "
        "'inbox/outbox', 'sender/recipient', 'subject', 'sent_datetime', 'body'"
    ),
}
_SEARCH_EMAILS = {
    "query": string("Search query, matching terms in subject, body, or sender/recipient fields"),
    "date_min": string(
        "Lower date limit for the email's sent date (inclusive). Format: YYYY-MM-DD"
    ),
    "date_max": string(
        "Upper date limit for the email's sent date (inclusive). Format: YYYY-MM-DD"
    ),
    "page": integer("Page number of results to return"),
    "page_size": integer("Number of emails per page"),
}
_SEND_EMAIL = {
    "recipient": string("Email address of the recipient"),
    "subject": string("Subject line of the email"),
    "body": string("Body content of the email"),
}
_DELETE_EMAIL = {"email_id": string("Unique ID of the email to be deleted")}
_FORWARD_EMAIL = {
    "email_id": string("Unique ID of the email to be forwarded"),
    "recipient": string("Email address of the recipient"),
}
_REPLY_EMAIL = {
    "email_id": string("Unique ID of the email to be replied"),
    "body": string("Body content of the email"),
}


def _cached_text(key: tuple[Any, Any, Any]) -> str | None:
    """The cached search text of one row, or None (also for an unhashable row)."""
    try:
        return _TEXT_CACHE.entries.get(key)
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
        texts = list(map(_TEXT_CACHE.entries.get, keys))
    except TypeError:  # an unhashable cell somewhere: look the rows up one by one
        texts = list(map(_cached_text, keys))
    plain = _TEXT_CACHE.has_room(len(keys))
    for i, text in enumerate(texts):
        if text is None:
            subject, body, party = key = keys[i]
            texts[i] = text = f"{subject} {body} {party}".lower()
            if type(subject) is str and type(body) is str and type(party) is str:
                if plain:
                    _TEXT_CACHE.entries[key] = text
                else:
                    _TEXT_CACHE.put(key, text)
    return texts


def _timestamps(values: list[Any]) -> np.ndarray:
    """``sent_datetime`` values as a ``datetime64[ns]`` array, as ``pd.to_datetime`` parses them."""
    try:
        stamps = list(map(_STAMP_CACHE.entries.__getitem__, values))
    except (KeyError, TypeError):
        parsed = pd.to_datetime(pd.Series(values, dtype=object)).to_numpy(dtype="datetime64[ns]")
        _STAMP_CACHE.make_room(len(values))
        for value, stamp in zip(values, parsed.view("int64").tolist(), strict=True):
            if type(value) is str:
                _STAMP_CACHE.entries[value] = stamp
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


def _id_mask(frame: pd.DataFrame, email_id: Any) -> np.ndarray:
    """``frame["email_id"] == email_id`` as a bool array, with pandas' errors for odd types.

    A string is compared on the numpy array directly (the same element-wise ``==``, without
    pandas' overhead); anything else goes through pandas, so a list raises ``('Lengths must match
    to compare', (500,), (1,))`` and a number or bool simply matches nothing.
    """
    if type(email_id) is str:
        return frame[_ID].to_numpy() == email_id
    return (frame[_ID] == email_id).to_numpy()


def _listed(frame: pd.DataFrame, email_id: Any) -> bool:
    """Whether ``email_id`` is among the ids, tested the way numpy's ``in`` tests an array.

    Delete, forward and reply check this before they look the row up (observed on the
    reference): the id is compared with the whole column element by element, with numpy's
    broadcasting. So a list of one id stands for that id, and a list of any other length
    (except the row count) raises ``operands could not be broadcast together with shapes
    (500,) (2,) ``; a number, bool or dict is simply absent.
    """
    return bool(email_id in frame[_ID].to_numpy(dtype=object))


def _find(frame: pd.DataFrame, email_id: Any) -> int | None:
    """Position of the first row whose id equals ``email_id``, or None."""
    matches = np.flatnonzero(_id_mask(frame, email_id))
    return int(matches[0]) if len(matches) else None


# -- fast paths' helpers ---------------------------------------------------------------------
#
# They read the table from common.text_table(tables, EMAILS): str/missing cells, standard columns.


_DAY_NS = 86_400 * 10**9
_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
_STAMP_FORMAT = re.compile(r"(\d{4})-(\d{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2})", re.ASCII)
_DAY_FORMAT = re.compile(r"(\d{4})-(\d{2})-(\d{2})(?: (\d{2}):(\d{2}):(\d{2}))?", re.ASCII)
_FAST_STAMPS: BoundedMemo[str, int | None] = BoundedMemo(_CACHE_LIMIT)


def _strict_stamp(value: str) -> int | None:
    """Nanoseconds since the epoch of ``"YYYY-MM-DD HH:MM:SS"``, or None for anything else.

    When every value it parses has this layout, ``pd.to_datetime`` infers it and gives exactly
    these values. Other layouts (which can change the inferred format or fail), impossible
    dates and years outside 1970-2261 (day flooring, nanosecond bounds) are left to pandas.
    """
    match = _STAMP_FORMAT.fullmatch(value)
    if match is None:
        return None
    year, month, day, hour, minute, second = map(int, match.groups())
    if not (1970 <= year <= 2261 and hour < 24 and minute < 60 and second < 60):
        return None
    try:
        days = date(year, month, day).toordinal() - _EPOCH_ORDINAL
    except ValueError:
        return None
    return (days * 86_400 + hour * 3_600 + minute * 60 + second) * 10**9


def _stamps(values: list[Any]) -> list[int | None]:
    """:func:`_strict_stamp` of each cell (None for a non-string), through a bounded cache."""
    cache = _FAST_STAMPS.entries
    try:
        return list(map(cache.__getitem__, values))
    except (KeyError, TypeError):  # a value not seen yet (or not a string): one by one
        pass
    out: list[int | None] = []
    plain = _FAST_STAMPS.has_room(len(values))
    for value in values:
        if type(value) is not str:
            out.append(None)
            continue
        stamp = cache.get(value, -1)
        if stamp == -1:
            stamp = _strict_stamp(value)
            if plain:
                cache[value] = stamp
            else:
                _FAST_STAMPS.put(value, stamp)
        out.append(stamp)
    return out


def _bound_day(value: str) -> int | None:
    """``pd.Timestamp(value).date()`` as days since the epoch, or None when not sure.

    Only ``"YYYY-MM-DD"`` and ``"YYYY-MM-DD HH:MM:SS"`` with a real date and time in pandas'
    nanosecond range are read here; everything else (other layouts, errors) is pandas' call.
    """
    match = _DAY_FORMAT.fullmatch(value)
    if match is None:
        return None
    year, month, day = int(match[1]), int(match[2]), int(match[3])
    if not 1678 <= year <= 2261:
        return None
    if match[4] is not None and not (
        int(match[4]) < 24 and int(match[5]) < 60 and int(match[6]) < 60
    ):
        return None
    try:
        return date(year, month, day).toordinal() - _EPOCH_ORDINAL
    except ValueError:
        return None


# Bounds on the search caches (positions are int64 arrays: 4 KB for a word in every row).
_INDEX_LIMIT = 256  # session tables with a search index (~50 KB each; oldest dropped first)
_BASE_LIMIT = 8  # base tables with a search index (kept apart: every session extends them)
_HITS_LIMIT = 64  # cached words per session index
_BASE_HITS_LIMIT = 1024  # cached words per base index (shared by every session)
_ORDERS_LIMIT = 32  # cached queries per index
_INDEXED = (_SUBJECT, _BODY, _PARTY, _DATETIME)
_UNSURE = object()  # cached "a matched row's date needs pandas"
_NO_ROWS = np.zeros(0, dtype=np.intp)


class _SearchIndex:
    """What searching one version of an emails table needs, derived from four columns.

    ``columns``: private copies of the subject, body, sender/recipient and sent_datetime cells,
    to check the index still describes the table (list equality, element identity first).
    ``texts``: each row's lower-cased search text. ``stamps``: each row's :func:`_strict_stamp`
    as int64, ``unsure`` marking the rows pandas must parse. ``hits``: word -> ascending
    positions of the rows containing it. ``orders``: query words -> the positions of the
    matches newest first, or ``_UNSURE``. ``inherited``: ``(hits, orders, appended, removed)``
    of the index this one was derived from: that index plus rows appended from position
    ``appended`` on, or less the row at position ``removed``; its cached entries are carried
    over on demand. Indexes of base tables are shared by sessions: they only ever gain cache
    entries, which threads may race to add harmlessly.
    """

    __slots__ = (
        "columns",
        "hits",
        "inherited",
        "orders",
        "stamps",
        "table",
        "texts",
        "unsure",
    )

    def __init__(
        self,
        table: Table,
        columns: tuple[list[Any], ...],
        texts: list[str],
        stamps: tuple[np.ndarray, np.ndarray],
        inherited: tuple[dict[str, np.ndarray], dict[tuple[str, ...], Any], int, int] | None = None,
    ) -> None:
        self.table = table
        self.columns = columns
        self.texts = texts
        self.stamps, self.unsure = stamps
        self.hits: BoundedMemo[str, np.ndarray] = BoundedMemo(_HITS_LIMIT)
        self.orders: BoundedMemo[tuple[str, ...], Any] = BoundedMemo(_ORDERS_LIMIT)
        self.inherited = inherited

    @classmethod
    def build(cls, table: Table) -> _SearchIndex:
        """The index of ``table`` from scratch."""
        columns = tuple(list(table.data[c]) for c in _INDEXED)
        texts = _search_texts(columns[0], columns[1], columns[2])
        return cls(table, columns, texts, _stamp_arrays(columns[3]))

    def describes(self, table: Table) -> bool:
        """True when ``table``'s indexed columns hold exactly the cells indexed here."""
        data = table.data
        return all(mine == data[c] for mine, c in zip(self.columns, _INDEXED, strict=True))

    def extended_to(self, table: Table) -> _SearchIndex | None:
        """A new index for ``table`` when it is this one's content plus appended rows, else None."""
        data = table.data
        known = len(self.texts)
        current = [data[c] for c in _INDEXED]
        if len(current[0]) <= known:
            return None
        if not all(
            cells[:known] == mine for cells, mine in zip(current, self.columns, strict=True)
        ):
            return None
        new = [cells[known:] for cells in current]
        texts = self.texts + _search_texts(new[0], new[1], new[2])
        stamps, unsure = _stamp_arrays(new[3])
        stamps = (np.concatenate([self.stamps, stamps]), np.concatenate([self.unsure, unsure]))
        columns = tuple(mine + added for mine, added in zip(self.columns, new, strict=True))
        return _SearchIndex(
            table, columns, texts, stamps, (self.hits.entries, self.orders.entries, known, -1)
        )

    def without(self, table: Table, position: int) -> _SearchIndex:
        """A new index for ``table``: this one's content less the row at ``position``."""
        lists = [*self.columns, self.texts]
        for i, cells in enumerate(lists):
            lists[i] = cells = cells.copy()
            del cells[position]
        after = position + 1
        stamps = tuple(
            np.concatenate((a[:position], a[after:])) for a in (self.stamps, self.unsure)
        )
        texts = lists.pop()
        inherited = (self.hits.entries, self.orders.entries, len(texts), position)
        return _SearchIndex(table, tuple(lists), texts, stamps, inherited)

    def rows_with(self, word: str) -> np.ndarray:
        """Ascending positions of the rows whose text contains ``word`` (cached)."""
        hits = self.hits.entries.get(word)
        if hits is not None:
            return hits
        texts = self.texts
        inherited = self.inherited
        known = inherited[0].get(word) if inherited is not None else None
        if known is not None:
            _, _, appended, removed = inherited
            if removed >= 0:
                known = known[known != removed]
                hits = known - (known > removed)
            else:
                added = [i for i in range(appended, len(texts)) if word in texts[i]]
                hits = np.concatenate([known, np.array(added, dtype=np.intp)]) if added else known
        else:
            found = np.fromiter(map(contains, texts, repeat(word)), dtype=bool, count=len(texts))
            hits = np.flatnonzero(found)
        self.hits.put(word, hits)
        return hits

    def newest_first(self, words: list[str]) -> Any:
        """Positions of the rows matching every word, ordered as ``search_emails`` orders them
        before the date filter; ``_UNSURE`` when a match's date needs pandas."""
        key = tuple(words)
        found = self.orders.entries.get(key)
        if found is not None:
            return found
        if self.inherited is not None:
            found = self._carried_order(key, words)
        if found is None:
            found = self._order(self._matching(words))
        self.orders.put(key, found)
        return found

    def _carried_order(self, key: tuple[str, ...], words: list[str]) -> np.ndarray | None:
        """The inherited order of ``words`` when it still holds, else None.

        The matches' stamps reach the sort in the same sequence when no appended row matches
        or the removed row was not a match, so the sort gives the same order.
        """
        _, orders, appended, removed = self.inherited
        order = orders.get(key)
        if not isinstance(order, np.ndarray):
            return None
        if removed >= 0:
            if (order == removed).any():
                return None
            return order - (order > removed)
        texts = self.texts
        for i in range(appended, len(texts)):
            if all(word in texts[i] for word in words):
                return None
        return order

    def _order(self, matched: np.ndarray) -> Any:
        """``matched`` (ascending) newest first, exactly as ``search_emails`` sorts them."""
        if self.unsure[matched].any():
            return _UNSURE
        # Same values, dtype and sequence as search_emails hands _newest_first.
        stamps = self.stamps[matched].view("datetime64[ns]")
        return matched[_newest_first(stamps)]

    def _matching(self, words: list[str]) -> np.ndarray:
        """Ascending positions of the rows containing every word (``search_emails``' filter)."""
        if not words:
            return np.arange(len(self.texts))
        matched: np.ndarray | None = None
        texts = self.texts
        for word in dict.fromkeys(words):
            if matched is None or len(matched) > 32 or self._cached(word):
                hits = self.rows_with(word)
                matched = hits if matched is None else np.intersect1d(matched, hits, True)
            else:  # few candidates left: test them directly
                matched = np.array([i for i in matched.tolist() if word in texts[i]], np.intp)
            if not len(matched):
                return _NO_ROWS
        return matched

    def _cached(self, word: str) -> bool:
        return word in self.hits.entries or (
            self.inherited is not None and word in self.inherited[0]
        )


def _stamp_arrays(values: list[Any]) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_stamps` of ``values`` as an int64 array (0 where unsure) and the unsure mask."""
    stamps = _stamps(values)
    if None not in stamps:
        return np.array(stamps, dtype=np.int64), np.zeros(len(stamps), dtype=bool)
    unsure = np.array([s is None for s in stamps], dtype=bool)
    return np.array([s or 0 for s in stamps], dtype=np.int64), unsure


#: id(session table) -> index (the index holds the table)
_INDEXES: BoundedMemo[int, _SearchIndex] = BoundedMemo(_INDEX_LIMIT, MemoPolicy.OLDEST)
#: id(base table) -> index
_BASE_INDEXES: BoundedMemo[int, _SearchIndex] = BoundedMemo(_BASE_LIMIT, MemoPolicy.OLDEST)


def _remember(index: _SearchIndex, shared: bool = False) -> None:
    """Cache ``index`` under its table (bounded: the oldest entry goes first)."""
    if shared:
        index.hits.max_entries = _BASE_HITS_LIMIT
    (_BASE_INDEXES if shared else _INDEXES).put(id(index.table), index)


def _known_index(tables: SessionTables, table: Table) -> _SearchIndex | None:
    """An index describing ``table`` if one is cached or extends a cached one, else None."""
    shared = table is tables.base.tables[EMAILS]
    entry = (_BASE_INDEXES if shared else _INDEXES).entries.get(id(table))
    if entry is None or entry.table is not table:
        return None
    if entry.describes(table):
        return entry
    fresh = entry.extended_to(table)
    if fresh is not None:
        _remember(fresh, shared)
    return fresh


def _search_index(tables: SessionTables, table: Table) -> _SearchIndex:
    """The index describing ``table``: cached, extended from an older one, or built afresh.

    A session's table that is its base table plus appended rows extends the base's index
    (built first if need be), so a search after sends indexes only the new rows.
    """
    index = _known_index(tables, table)
    if index is not None:
        return index
    base = tables.base.tables[EMAILS]
    if table is not base:
        index = _known_index(tables, base)
        if index is None and len(table.index) >= len(base.index):
            index = _SearchIndex.build(base)
            _remember(index, shared=True)
        index = index.extended_to(table) if index is not None else None
    if index is None:
        index = _SearchIndex.build(table)
    _remember(index, shared=table is base)
    return index


@_KIT.tool("Retrieves specific details of an email by its ID.", _GET_EMAIL_INFORMATION_BY_ID)
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


def _located(tables: SessionTables, email_id: str) -> tuple[Table, int] | Any:
    """The text-only emails table and the position of the first email with id ``email_id``;
    ``"Email not found."`` when none has it, ``FALLBACK`` for a table that is not text-only."""
    table = text_table(tables, EMAILS)
    if table is None:
        return FALLBACK
    position = table.first(_ID, email_id)
    if position is None:
        return "Email not found."
    return table, position


@_KIT.fast_path("get_email_information_by_id")
def get_email_information_by_id_fast(
    tables: SessionTables, email_id: Any = None, field: Any = None
) -> Any:
    """The lookup on the plain table for a string id and field (any falsy argument too).

    Falls back for a non-string id or field (pandas' comparison and hashing decide) and a table
    that is not text-only.
    """
    if not email_id:
        return "Email ID not provided."
    if not field:
        return "Field not provided."
    if type(email_id) is not str or type(field) is not str:
        return FALLBACK
    found = _located(tables, email_id)
    if type(found) is not tuple:
        return found
    table, position = found
    if field not in table.columns:
        return f"Field '{field}' not found. Available fields: {', '.join(table.columns)}"
    return {field: table.data[field][position]}


@_KIT.tool(
    "Searches for emails matching the given query across subject, body, or sender "
    "fields. The function matches an email if all words in the query appear in any of these "
    "fields.",
    _SEARCH_EMAILS,
    required=(),
)
def search_emails(
    tables: SessionTables, query: Any = "", page: Any = 1, page_size: Any = 5, **bounds: Any
) -> dict[str, Any] | str:
    """One page of the emails containing every query word, newest first (REFERENCE.md f.3).

    ``bounds`` are ``date_min`` and ``date_max`` (a falsy one is none). Returns ``{"emails":
    [...], "pagination": {total_emails, page, page_size, total_pages}}``, ``"No emails found."``,
    or ``"Error searching emails: <e>"``. Words are plain substrings of ``"<subject> <body>
    <sender/recipient>"`` (lower-cased). Date bounds are inclusive by calendar day and parsed
    with ``pd.Timestamp``; the query filter runs first, so a bad date with no query match is
    just ``"No emails found."``. Paging (:func:`paginate`) is computed whether or not anything
    matched (as the CRM search does, not the calendar's), so a page size of 0 or a string is an
    error even with no hit (observed on the reference). On a table with no rows at all, any
    string query fails with ``'sent_datetime'`` (the reference's KeyError, observed).
    """
    try:
        words = query.lower().split()
        frame = tables[EMAILS]
        if not len(frame):
            raise KeyError(_DATETIME)
        matched = list(range(len(frame)))
        if words:
            texts = _search_texts(
                frame[_SUBJECT].tolist(), frame[_BODY].tolist(), frame[_PARTY].tolist()
            )
            for word in words:  # every word must occur: narrow the candidates word by word
                matched = [i for i in matched if word in texts[i]]
        selected = _dated(frame, matched, bounds) if matched else []
        start, end, pagination = paginate("total_emails", len(selected), page, page_size)
        if not selected:
            return "No emails found."
        return {"emails": frame_records(frame, selected[start:end]), "pagination": pagination}
    except Exception as exc:
        return f"Error searching emails: {exc}"


#: pandas' error comparing dates with a bound ``pd.Timestamp`` reads as NaT (black-box text).
NAT_DATE_COMPARE = "Cannot compare NaT with datetime.date object"


#: The search's date bounds, in the order they are applied, with the test a day must pass.
_BOUNDS = (("date_min", np.greater_equal), ("date_max", np.less_equal))


def _dated(frame: pd.DataFrame, matched: list[int], bounds: dict[str, Any]) -> list[int]:
    """The positions ``matched`` newest first, those outside the date ``bounds`` left out.

    Only called with matches: no date is parsed when the query matches nothing (goldens), nor
    a bound once the earlier one left no row.
    """
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
    for name, inside in _BOUNDS:
        # The reference compares row by row: a bound is read (and fails) only while rows are
        # left, so date_max is never parsed once date_min has left none (differential).
        bound = bounds.get(name)
        if not bound or not keep.any():
            continue
        day = pd.Timestamp(bound)
        if day is pd.NaT:  # "nan", "NaT", NaN
            raise TypeError(NAT_DATE_COMPARE)
        keep &= inside(days, np.datetime64(day.date(), "D"))
    return positions[keep].tolist()


@_KIT.fast_path("search_emails")
def search_emails_fast(
    tables: SessionTables, query: Any = "", page: Any = 1, page_size: Any = 5, **bounds: Any
) -> Any:
    """The search through the table's :class:`_SearchIndex`, for a string query.

    Handles int ``page`` (any value: it is clamped), int ``page_size`` >= 1 (with other page
    values even "no hit" is pandas' to word: paging comes first) and date bounds that are
    falsy or ``"YYYY-MM-DD"`` / ``"YYYY-MM-DD HH:MM:SS"`` strings. Falls back for a non-string
    query, any other page, size or date (bools, floats, strings for pages, other date
    layouts), a matched row whose ``sent_datetime`` is not ``"YYYY-MM-DD HH:MM:SS"``, and a
    table that is not text-only.
    """
    if type(query) is not str:
        return FALLBACK
    table = text_table(tables, EMAILS)
    if table is None or not table.index:  # an empty table's error text is pandas' to give
        return FALLBACK
    index = _search_index(tables, table)
    positions = index.newest_first(query.lower().split())
    if positions is _UNSURE:
        return FALLBACK
    if type(page) is not int or type(page_size) is not int or page_size <= 0:
        return FALLBACK
    if not len(positions):
        return "No emails found."
    days = {}
    for name, _ in _BOUNDS:
        bound = bounds.get(name)
        if bound:
            days[name] = _bound_day(bound) if type(bound) is str else None
            if days[name] is None:
                return FALLBACK
    low, high = days.get("date_min"), days.get("date_max")
    first, stop = 0, len(positions)
    if low is not None or high is not None:
        # Matches are newest first, so a date range is one contiguous run of them: search the
        # negated days, which never decrease along the matches.
        negated_days = -(index.stamps[positions] // _DAY_NS)
        if high is not None:
            first = int(negated_days.searchsorted(-high, side="left"))
        if low is not None:
            stop = int(negated_days.searchsorted(-low, side="right"))
    if stop - first <= 0:
        return "No emails found."
    start, end, pagination = paginate("total_emails", stop - first, page, page_size)
    page_rows = positions[first:stop][start:end].tolist()
    return {"emails": table.records(page_rows), "pagination": pagination}


def _new_id(frame: pd.DataFrame) -> str:
    """The id a send gives its email: one more than the largest id, not zero-padded.

    The largest id is the lexicographic max of the (string) ids, so ``"00000499"`` gives
    ``"500"``, and then ``"500"`` is the max, giving ``"501"`` (REFERENCE.md c.7). An empty
    table gives ``"1"`` (goldens, ``fuzz-empty-email-send``), unlike the calendar, task and
    customer tables, whose creates fail there. Raises like ``int()`` for a non-numeric max.
    """
    if not len(frame):
        return "1"
    ids = frame[_ID].tolist()
    # The max of all-string ids is pandas' answer, without its reduction overhead.
    top = max(ids) if all(type(i) is str for i in ids) else frame[_ID].max()
    return str(int(top) + 1)


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


@_KIT.tool("Sends an email to the specified recipient.", _SEND_EMAIL, writes=(EMAILS,))
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
        email_id = _new_id(frame)
        row = [email_id, "outbox", recipient.lower(), subject, SENT_DATETIME, body]
        tables[EMAILS] = _append(frame, row)
        return "Email sent successfully."
    except Exception as exc:
        return f"Error sending email: {exc}"


@_KIT.fast_path("send_email")
def send_email_fast(
    tables: SessionTables, recipient: Any = None, subject: Any = None, body: Any = None
) -> Any:
    """The send on the plain table, for string arguments (any falsy argument too).

    Falls back for a non-string recipient, subject or body, a table that is not text-only, and
    when the new id cannot be computed as for the usual string ids (pandas words the error).
    """
    if not recipient or not subject or not body:
        return "Recipient, subject, or body not provided."
    if type(recipient) is not str or type(subject) is not str or type(body) is not str:
        return FALLBACK
    if "@" not in recipient or "." not in recipient:
        return "Invalid recipient email address."
    table = text_table(tables, EMAILS)
    if table is None:
        return FALLBACK
    # The new id as the pandas path computes it (:func:`_new_id`: "1" on an empty table); a
    # missing or non-numeric max id is left to pandas. The table ends as
    # Table.from_frame stores the appended frame: labels 0..n with a RangeIndex, all text.
    ids = table.data[_ID]
    email_id = next_id(ids, zero_pad=False) if ids else "1"
    if email_id is None:
        return FALLBACK
    row = (email_id, "outbox", recipient.lower(), subject, SENT_DATETIME, body)
    tables.writable(EMAILS).append_row(row)
    return "Email sent successfully."


@_KIT.tool("Deletes an email by its ID.", _DELETE_EMAIL, writes=(EMAILS,))
def delete_email(tables: SessionTables, email_id: Any = None) -> str:
    """Delete the email ``email_id``; other rows keep their labels (REFERENCE.md f.5).

    Strings: ``"Email ID not provided."``, ``"Email deleted successfully."``, ``"Email not
    found."``, ``"Error deleting email: <e>"``.
    """
    if not email_id:
        return "Email ID not provided."
    try:
        frame = tables[EMAILS]
        if not _listed(frame, email_id):
            return "Email not found."
        tables[EMAILS] = frame[~_id_mask(frame, email_id)]
        return "Email deleted successfully."
    except Exception as exc:
        return f"Error deleting email: {exc}"


@_KIT.fast_path("delete_email")
def delete_email_fast(tables: SessionTables, email_id: Any = None) -> Any:
    """The delete on the plain table for a string id (any falsy id too).

    Every row with that id goes; the others keep their labels under a plain integer index
    (``range_index`` None), as the boolean mask leaves them. Falls back for a non-string id and
    a table that is not text-only.
    """
    if not email_id:
        return "Email ID not provided."
    if type(email_id) is not str:
        return FALLBACK
    table = text_table(tables, EMAILS)
    if table is None:
        return FALLBACK
    doomed = table.positions(_ID, email_id)
    if not doomed:
        return "Email not found."
    # A later search would have to rebuild its index to find out what went: derive it now.
    index = _known_index(tables, table) if len(doomed) == 1 else None
    table = tables.writable(EMAILS)
    table.drop_rows(doomed)
    if index is not None:
        _remember(index.without(table, doomed[0]))
    return "Email deleted successfully."


_FORWARDED = "Email forwarded successfully."
_REPLIED = "Email replied successfully."


def _relay(result: Any, success: str) -> Any:
    """Forward/reply report the inner send's failure when it says "Error" or "Invalid".

    A fast path's inner send may also answer FALLBACK (it changed nothing): handed on as is.
    """
    if result is FALLBACK:
        return result
    return result if "Error" in result or "Invalid" in result else success


def _frame_subject_and(frame: pd.DataFrame, email_id: Any, column: str) -> tuple[Any, Any] | None:
    """The subject and ``column`` of the first email whose id equals ``email_id`` (pandas;
    forward, reply), or None; the lookup's errors are :func:`_find`'s."""
    position = _find(frame, email_id)
    if position is None:
        return None
    return tuple(frame[c].to_numpy(dtype=object)[position] for c in (_SUBJECT, column))


def _subject_and(tables: SessionTables, email_id: str, column: str) -> tuple[Any, Any] | str:
    """The subject and ``column`` of email ``email_id`` on the plain table (forward, reply), or
    what :func:`_located` answers instead."""
    found = _located(tables, email_id)
    if type(found) is not tuple:
        return found
    table, position = found
    return table.data[_SUBJECT][position], table.data[column][position]


@_KIT.tool("Forwards an email to the specified recipient.", _FORWARD_EMAIL, writes=(EMAILS,))
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
        if not _listed(frame, email_id):
            return "Email not found."
        # The forward lower-cases the address itself, so a failure there is its own error.
        recipient = recipient.lower()
        found = _frame_subject_and(frame, email_id, _BODY)
        if found is None:
            return "Email not found."
        # The inner send may quietly send nothing (an empty original body): still a success.
        sent = send_email(tables, recipient, f"FW: {found[0]}", found[1])
        return _relay(sent, _FORWARDED)
    except Exception as exc:
        return f"Error forwarding email: {exc}"


@_KIT.fast_path("forward_email")
def forward_email_fast(tables: SessionTables, email_id: Any = None, recipient: Any = None) -> Any:
    """The forward on the plain table, for a string id and recipient (any falsy argument too).

    The inner send is :func:`send_email_fast`, as the pandas path calls :func:`send_email`: an
    original body that is empty or missing (None) makes it refuse quietly, a success with
    nothing sent. Falls back for non-string arguments, a table that is not text-only, and
    whenever the inner send falls back (a NaN body, a new id that needs pandas).
    """
    if not email_id or not recipient:
        return "Email ID or recipient not provided."
    if type(email_id) is not str or type(recipient) is not str:
        return FALLBACK
    if "@" not in recipient or "." not in recipient:
        return "Invalid recipient email address."
    found = _subject_and(tables, email_id, _BODY)
    if type(found) is not tuple:
        return found
    sent = send_email_fast(tables, recipient, f"FW: {found[0]}", found[1])
    return _relay(sent, _FORWARDED)


@_KIT.tool("Replies to an email by its ID.", _REPLY_EMAIL, writes=(EMAILS,))
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
        if not _listed(frame, email_id):
            return "Email not found."
        found = _frame_subject_and(frame, email_id, _PARTY)
        if found is None:
            return "Email not found."
        return _relay(send_email(tables, found[1], f"RE: {found[0]}", body), _REPLIED)
    except Exception as exc:
        return f"Error replying to email: {exc}"


@_KIT.fast_path("reply_email")
def reply_email_fast(tables: SessionTables, email_id: Any = None, body: Any = None) -> Any:
    """The reply on the plain table, for a string id and body (any falsy argument too).

    The inner send is :func:`send_email_fast`, as the pandas path calls :func:`send_email`: an
    empty or missing (None) sender/recipient is a quiet success with nothing sent, one without
    "@" or "." is "Invalid recipient email address.". Falls back for non-string arguments, a
    table that is not text-only, and whenever the inner send falls back (a NaN
    sender/recipient, a new id that needs pandas).
    """
    if not email_id or not body:
        return "Email ID or body not provided."
    if type(email_id) is not str or type(body) is not str:
        return FALLBACK
    found = _subject_and(tables, email_id, _PARTY)
    if type(found) is not tuple:
        return found
    return _relay(send_email_fast(tables, found[1], f"RE: {found[0]}", body), _REPLIED)
