"""The sandbox's seven tables: loaded once per process, shared by sessions copy-on-write.

A sandbox is seven pandas DataFrames keyed ``"<container>.<attribute>"`` (REFERENCE.md a.6):

==========================================  ==================================================
key                                         source
==========================================  ==================================================
``company_directory._emails``            ``email_addresses.csv`` (no header, one column)
``email._emails``                        ``emails.csv``
``calendar._calendar_events``            ``calendar_events.csv``
``analytics._analytics_data``            ``analytics_data.csv`` (``user_engaged`` is bool)
``analytics._plots_data``                empty, one column ``file_path``
``project_management._project_tasks``    ``project_tasks.csv``
``customer_relationship_manager._crm_data``  ``customer_relationship_manager_data.csv``
==========================================  ==================================================

:class:`BaseTables` is parsed once and never mutated. :class:`SessionTables` is one session's view:
it starts as references to the base tables (a seed costs microseconds and no disk access) and
copies a table only when a tool writes it (:meth:`SessionTables.writable`).
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from workplace_env.sandbox.table import Table

DIRECTORY = "company_directory._emails"
EMAILS = "email._emails"
CALENDAR = "calendar._calendar_events"
ANALYTICS = "analytics._analytics_data"
PLOTS = "analytics._plots_data"
TASKS = "project_management._project_tasks"
CRM = "customer_relationship_manager._crm_data"

#: Every table of a sandbox, in the reference's container order.
TABLE_KEYS: tuple[str, ...] = (DIRECTORY, EMAILS, CALENDAR, ANALYTICS, PLOTS, TASKS, CRM)

#: The tables the verifier compares (REFERENCE.md c.5): not the analytics data, not the directory.
COMPARED_TABLES: tuple[str, ...] = (EMAILS, CALENDAR, PLOTS, TASKS, CRM)

#: CSV file name of each table in the WorkBench data directory (plots have no file).
CSV_FILES: Mapping[str, str] = {
    DIRECTORY: "email_addresses.csv",
    EMAILS: "emails.csv",
    CALENDAR: "calendar_events.csv",
    ANALYTICS: "analytics_data.csv",
    TASKS: "project_tasks.csv",
    CRM: "customer_relationship_manager_data.csv",
}

#: Column names of each table, in file order.
COLUMNS: Mapping[str, tuple[str, ...]] = {
    DIRECTORY: ("email_address",),
    EMAILS: ("email_id", "inbox/outbox", "sender/recipient", "subject", "sent_datetime", "body"),
    CALENDAR: ("event_id", "event_name", "participant_email", "event_start", "duration"),
    ANALYTICS: (
        "date_of_visit",
        "visitor_id",
        "page_views",
        "session_duration_seconds",
        "traffic_source",
        "user_engaged",
    ),
    PLOTS: ("file_path",),
    TASKS: ("task_id", "task_name", "assigned_to_email", "list_name", "due_date", "board"),
    CRM: (
        "customer_id",
        "assigned_to_email",
        "customer_name",
        "customer_email",
        "customer_phone",
        "last_contact_date",
        "product_interest",
        "status",
        "follow_up_by",
        "notes",
    ),
}


#: How the origin of a generated sandbox starts: ``generated:seed=<seed>,scale=<scale>``.
GENERATED = "generated:"


class TablesUnavailableError(Exception):
    """The sandbox's tables could not be built (missing/unreadable file, bad columns).

    CONTRACT S6: a seed that hits this answers UNAVAILABLE ``TABLES_UNAVAILABLE``.
    """


def _parse(key: str, text: str) -> pd.DataFrame:
    """Parse one table's CSV text exactly as the reference loads it (all ``str`` but the bool)."""
    buf = io.StringIO(text)
    if key == DIRECTORY:
        return pd.read_csv(buf, header=None, names=list(COLUMNS[DIRECTORY]), dtype=str)
    if key == ANALYTICS:
        # Every column is text except user_engaged, which pandas parses as bool (REFERENCE.md a.6).
        dtypes = {c: str for c in COLUMNS[ANALYTICS] if c != "user_engaged"}
        return pd.read_csv(buf, dtype=dtypes)
    return pd.read_csv(buf, dtype=str)


def empty_plots() -> pd.DataFrame:
    """The plots table of a fresh sandbox: 0 rows, one object column ``file_path``."""
    return pd.DataFrame(columns=list(COLUMNS[PLOTS]))


@dataclass(frozen=True)
class BaseTables:
    """The parsed, immutable tables of one sandbox, shared by every session of the process.

    ``frames`` maps each key of :data:`TABLE_KEYS` to its DataFrame (the pandas fallback's
    view) and ``tables`` to the same data as a :class:`Table` (what sessions hold). Nothing may
    mutate either: a session copies a table before a tool writes it.
    """

    frames: Mapping[str, pd.DataFrame]
    #: Where the tables came from, for logs and ``config`` output (a path or ``generated:...``).
    origin: str = ""
    tables: Mapping[str, Table] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.tables:
            converted = {key: Table.from_frame(frame) for key, frame in self.frames.items()}
            object.__setattr__(self, "tables", converted)

    @classmethod
    def from_csv_texts(cls, texts: Mapping[str, str], origin: str = "") -> BaseTables:
        """Build from the CSV text of each table (keys of :data:`CSV_FILES`).

        Raises :class:`TablesUnavailableError` naming the table when a text is missing or its
        columns differ from :data:`COLUMNS`.
        """
        frames: dict[str, pd.DataFrame] = {}
        for key in TABLE_KEYS:
            if key == PLOTS:
                frames[key] = empty_plots()
                continue
            if key not in texts:
                raise TablesUnavailableError(f"table {key} ({CSV_FILES[key]}) is missing")
            try:
                frame = _parse(key, texts[key])
            except (ValueError, pd.errors.ParserError) as exc:
                raise TablesUnavailableError(f"table {key} is not valid CSV: {exc}") from exc
            if tuple(frame.columns) != COLUMNS[key]:
                raise TablesUnavailableError(
                    f"table {key} has columns {list(frame.columns)}, expected {list(COLUMNS[key])}"
                )
            frames[key] = frame
        return cls(frames=frames, origin=origin)

    @classmethod
    def from_directory(cls, path: str | Path) -> BaseTables:
        """Load a WorkBench CSV directory (the six files of :data:`CSV_FILES`).

        Raises :class:`TablesUnavailableError` when a file is missing, unreadable or not
        UTF-8 text.
        """
        root = Path(path)
        texts: dict[str, str] = {}
        for key, name in CSV_FILES.items():
            try:
                texts[key] = (root / name).read_text(encoding="utf-8")
            except OSError as exc:
                raise TablesUnavailableError(f"cannot read {root / name}: {exc}") from exc
            except UnicodeDecodeError as exc:
                raise TablesUnavailableError(f"{root / name} is not UTF-8 text: {exc}") from exc
        return cls.from_csv_texts(texts, origin=str(root))

    @functools.cached_property
    def digest(self) -> str:
        """``"sha256:<hex>"`` of every table's columns, dtypes, index and cells: the sandbox's
        identity, equal for the same data wherever it was loaded from (checkpoints record it;
        a restore into another sandbox is refused). Computed once, on first use."""
        sha = hashlib.sha256()
        for key in TABLE_KEYS:
            table = self.tables[key]
            head = [key, table.columns, table.dtypes, table.index, table.range_index]
            sha.update(json.dumps(head).encode())
            for name in table.columns:  # NaN is written NaN, so it stays apart from None
                sha.update(json.dumps(table.data[name], ensure_ascii=False).encode())
        return f"sha256:{sha.hexdigest()}"

    def to_csv_texts(self) -> dict[str, str]:
        """The CSV text of each file-backed table in WorkBench's format (no trailing newline)."""
        out: dict[str, str] = {}
        for key in CSV_FILES:
            frame = self.frames[key]
            text = frame.to_csv(index=False, header=key != DIRECTORY, lineterminator="\n")
            out[key] = text.rstrip("\n")
        return out


class SessionTables:
    """One session's tables: the shared base tables until a tool writes, then private copies.

    Fast tool paths read with :meth:`table` and get a private, mutable copy with
    :meth:`writable`; the pandas fallback reads DataFrames with :meth:`frame` and hands back
    what it wrote with :meth:`set`.
    """

    __slots__ = ("_base", "_frames", "_owned", "_tables")

    def __init__(self, base: BaseTables) -> None:
        self._base = base
        self._tables: dict[str, Table] = dict(base.tables)
        self._owned: set[str] = set()
        self._frames: dict[str, pd.DataFrame] = {}  # materialised views of owned tables

    @classmethod
    def from_tables(cls, base: BaseTables, tables: Mapping[str, Table]) -> SessionTables:
        """A session holding ``tables`` (e.g. restored from a checkpoint); a table identical to
        the base one is shared instead of kept twice."""
        view = cls(base)
        for key, table in tables.items():
            if not table.identical(base.tables[key]):
                view.set(key, table)
        return view

    @property
    def base(self) -> BaseTables:
        """The shared tables this view started from."""
        return self._base

    @property
    def owned(self) -> frozenset[str]:
        """Keys of the tables this session has privately copied (may differ from the base)."""
        return frozenset(self._owned)

    def keys(self) -> Iterator[str]:
        """The table keys, in :data:`TABLE_KEYS` order."""
        return iter(self._tables)

    def table(self, key: str) -> Table:
        """The current table ``key``, for reading only."""
        return self._tables[key]

    def writable(self, key: str) -> Table:
        """The table ``key`` as a private copy the caller may mutate in place."""
        if key not in self._owned:
            self._tables[key] = self._tables[key].copy()
            self._owned.add(key)
        self._frames.pop(key, None)
        return self._tables[key]

    def set(self, key: str, table: Table) -> None:
        """Replace table ``key`` (the pandas fallback's result)."""
        if key not in self._tables:
            raise KeyError(key)
        self._tables[key] = table
        self._owned.add(key)
        self._frames.pop(key, None)

    def frame(self, key: str) -> pd.DataFrame:
        """The table ``key`` as a DataFrame, for reading only (materialised once per change)."""
        if key not in self._owned:
            return self._base.frames[key]
        frame = self._frames.get(key)
        if frame is None:
            frame = self._frames[key] = self._tables[key].to_frame()
        return frame

    def is_shared(self, key: str) -> bool:
        """True while ``key`` is still the base table itself (never written by this session)."""
        return self._tables[key] is self._base.tables[key]
