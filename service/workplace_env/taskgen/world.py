"""What the task generator knows about a sandbox: its rows as plain records, and derived facts.

:class:`World` is built once per :func:`~workplace_env.taskgen.generate_tasks` call by reading the
sandbox's DataFrames (``base.frames[...]``); nothing here mutates them. Templates ask it questions
("the latest email from X", "the first free half hour tomorrow", "visits per day since Oct 3")
and phrase the answers with the helpers at the end of this module.

Conventions
    * The clock is NeMo Gym's: :data:`NOW` is Thursday 2023-11-30 23:59:00, so "today" is
      2023-11-30, "tomorrow" 2023-12-01, and "since October 3" ends on 2023-11-30.
    * A *person* is a directory address whose first name (the local part before the first dot)
      occurs in no other address, so looking it up in the directory gives exactly one address.
      Prompts call employees by that lower-case first name, as WorkBench does.
    * Working hours are 09:00-18:00 (the system message's rule).
    * Rows a template cannot read safely (an unparsable date, a missing value) are left out of
      the records, so a hand-made ``--data-dir`` sandbox still generates tasks.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta
from typing import Any

import pandas as pd

# The environment's clock (NeMo Gym's system message) and WorkBench's vocabularies (the tools
# accept exactly these spellings): the sandbox generator's.
from workplace_env.sandbox.generate import (
    BOARDS,
    LIST_NAMES,
    NOW,
)
from workplace_env.sandbox.generate import CRM_STATUSES as STATUSES
from workplace_env.sandbox.generate import PRODUCT_INTERESTS as PRODUCTS
from workplace_env.sandbox.tables import (
    ANALYTICS,
    CALENDAR,
    CRM,
    DIRECTORY,
    EMAILS,
    TASKS,
    BaseTables,
)

TODAY = NOW.date()
TOMORROW = TODAY + timedelta(days=1)
#: The system message of every generated task (NeMo Gym's, with the clock and the hours rule).
SYSTEM_PROMPT = (
    "Today's date is Thursday, 2023-11-30 and the current time is 23:59:00. Remember the "
    "current date and time when answering queries. Meetings must not start before 9am or end "
    "after 6pm."
)
DAY_START = time(9, 0)
DAY_END = time(18, 0)

PLOT_TYPES: tuple[str, ...] = ("bar", "line", "scatter", "histogram")

_DATETIME = "%Y-%m-%d %H:%M:%S"
_DATE = "%Y-%m-%d"


# --------------------------------------------------------------------------------------------------
# Records


@dataclass(frozen=True)
class Person:
    """An employee prompts can name by ``name``, a lower-case first name unique in the directory."""

    email: str
    name: str


@dataclass(frozen=True)
class Mail:
    """An inbox email: id, sender address, subject, ``sent`` datetime."""

    id: str
    sender: str
    subject: str
    sent: datetime


@dataclass(frozen=True)
class Event:
    """A calendar event; ``minutes`` is the duration."""

    id: str
    name: str
    participant: str
    start: datetime
    minutes: int

    @property
    def end(self) -> datetime:
        """When the event ends."""
        return self.start + timedelta(minutes=self.minutes)


@dataclass(frozen=True)
class PmTask:
    """A project task; ``due`` is a date."""

    id: str
    name: str
    assignee: str
    list_name: str
    due: date
    board: str


@dataclass(frozen=True)
class Customer:
    """A CRM row; ``last_contact`` is the date part of ``last_contact_date``."""

    id: str
    rep: str
    name: str
    status: str
    product: str
    last_contact: date


@dataclass
class DayStats:
    """One analytics day: visit count, engaged visits, summed session seconds, visits per source."""

    visits: int = 0
    engaged: int = 0
    seconds: float = 0.0
    by_source: dict[str, int] = field(default_factory=dict)


def _text(value: Any) -> str | None:
    """A cell as text, or None when missing or not a string."""
    return value if isinstance(value, str) and value else None


def _parse(value: Any, fmt: str) -> datetime | None:
    text = _text(value)
    if text is None:
        return None
    try:
        return datetime.strptime(text, fmt)
    except ValueError:
        return None


def _rows(frame: pd.DataFrame, columns: Sequence[str]) -> list[tuple[Any, ...]]:
    """The frame's rows as tuples of ``columns``, in table order."""
    return list(zip(*(frame[c].tolist() for c in columns), strict=True))


# --------------------------------------------------------------------------------------------------
# The world


class World:
    """Records and derived facts of one sandbox (see the module docstring).

    Every list is in table order or sorted by an explicit key, so that templates drawing from
    them with a seeded :class:`random.Random` are deterministic.
    """

    def __init__(self, base: BaseTables) -> None:
        frames = base.frames
        self.directory: list[str] = [
            a for a in frames[DIRECTORY]["email_address"].tolist() if _text(a) is not None
        ]
        self.people: list[Person] = self._people(self.directory)
        self.person_by_email: dict[str, Person] = {p.email: p for p in self.people}

        self.mails: list[Mail] = []
        #: Subjects (lower case) of rows that are not inbox emails: "the emails about S" would
        #: include those, so subject-based templates avoid them.
        self.other_subjects: set[str] = set()
        for mid, box, who, subject, sent in _rows(
            frames[EMAILS],
            ("email_id", "inbox/outbox", "sender/recipient", "subject", "sent_datetime"),
        ):
            stamp = _parse(sent, _DATETIME)
            if box == "inbox" and _text(mid) and _text(who) and _text(subject) and stamp:
                self.mails.append(Mail(mid, who.lower(), subject, stamp))
            elif isinstance(subject, str):
                self.other_subjects.add(subject.lower())
        self.mails.sort(key=lambda m: (m.sent, m.id))

        self.events: list[Event] = []
        for eid, name, who, start, minutes in _rows(
            frames[CALENDAR],
            ("event_id", "event_name", "participant_email", "event_start", "duration"),
        ):
            stamp = _parse(start, _DATETIME)
            if not (_text(eid) and _text(name) and _text(who) and stamp):
                continue
            try:
                length = int(minutes)
            except (TypeError, ValueError):
                continue
            if length > 0:
                self.events.append(Event(eid, name, who.lower(), stamp, length))
        self.events.sort(key=lambda e: (e.start, e.id))
        self._events_by_day: dict[date, list[Event]] = {}
        for event in self.events:
            self._events_by_day.setdefault(event.start.date(), []).append(event)

        self.tasks: list[PmTask] = []
        for tid, name, who, list_name, due, board in _rows(
            frames[TASKS],
            ("task_id", "task_name", "assigned_to_email", "list_name", "due_date", "board"),
        ):
            day = _parse(due, _DATE)
            known = list_name in LIST_NAMES and board in BOARDS
            if _text(tid) and _text(name) and _text(who) and day and known:
                self.tasks.append(PmTask(tid, name, who.lower(), list_name, day.date(), board))

        self.customers: list[Customer] = []
        for cid, rep, name, status, product, contact in _rows(
            frames[CRM],
            (
                "customer_id",
                "assigned_to_email",
                "customer_name",
                "status",
                "product_interest",
                "last_contact_date",
            ),
        ):
            day = _parse(_text(contact) and contact[:10], _DATE)
            known = status in STATUSES and product in PRODUCTS
            if _text(cid) and _text(rep) and _text(name) and day and known:
                self.customers.append(Customer(cid, rep.lower(), name, status, product, day.date()))

        self.days: dict[date, DayStats] = self._analytics(frames[ANALYTICS])

        # Pools the templates draw from.
        self.task_people: list[Person] = self._assignees(t.assignee for t in self.tasks)
        self.reps: list[Person] = self._assignees(c.rep for c in self.customers)
        self.senders: list[Person] = self._assignees(m.sender for m in self.mails)
        self.participants: list[Person] = self._assignees(e.participant for e in self.events)
        names = [c.name for c in self.customers]
        self.named_customers: list[Customer] = [
            c for c in self.customers if _distinct(c.name, names)
        ]
        event_names = sorted({e.name.lower() for e in self.events})
        self.event_names: list[str] = []  # names a search picks out exactly (first spelling)
        seen: set[str] = set()
        for event in self.events:
            key = event.name.lower()
            if key not in seen and _distinct(key, event_names):
                seen.add(key)
                self.event_names.append(event.name)
        self.existing_task_names = {t.name.lower() for t in self.tasks}
        self.existing_customer_names = {c.name.lower() for c in self.customers}

    # ---------------------------------------------------------------------------------- people

    @staticmethod
    def _people(directory: list[str]) -> list[Person]:
        lowered = [a.lower() for a in directory]
        out: list[Person] = []
        for address in lowered:
            local = address.split("@", 1)[0]
            first = local.split(".", 1)[0]
            if len(first) >= 2 and first.isalpha() and sum(first in a for a in lowered) == 1:
                out.append(Person(address, first))
        return out

    def _assignees(self, emails: Iterable[str]) -> list[Person]:
        """The people among ``emails``, in directory order."""
        wanted = set(emails)
        return [p for p in self.people if p.email in wanted]

    def others(self, people: Sequence[Person], *excluded: Person | str) -> list[Person]:
        """``people`` without the excluded people or addresses."""
        skip = {x if isinstance(x, str) else x.email for x in excluded}
        return [p for p in people if p.email not in skip]

    # ---------------------------------------------------------------------------------- email

    def mails_from(self, sender: str) -> list[Mail]:
        """Inbox emails from ``sender``, oldest first."""
        return [m for m in self.mails if m.sender == sender]

    def about(self, subject: str) -> list[Mail]:
        """The inbox emails with ``subject`` (case ignored), oldest first.

        Empty when another row (an outbox email, an unreadable one) has that subject too.
        """
        key = subject.lower()
        if key in self.other_subjects:
            return []
        return [m for m in self.mails if m.subject.lower() == key]

    @staticmethod
    def latest(mails: Sequence[Mail]) -> Mail | None:
        """The newest of ``mails`` (sorted oldest first), or None when empty or tied."""
        if not mails or (len(mails) > 1 and mails[-2].sent == mails[-1].sent):
            return None
        return mails[-1]

    # ---------------------------------------------------------------------------------- calendar

    def events_on(self, day: date) -> list[Event]:
        """The events starting on ``day``, by start."""
        return self._events_by_day.get(day, [])

    def future_events(self) -> list[Event]:
        """Events starting after :data:`NOW`, by start."""
        return [e for e in self.events if e.start > NOW]

    def event_days(self) -> list[date]:
        """Days that have events, in order."""
        return sorted(self._events_by_day)

    def future_days(self) -> list[date]:
        """Days after today that have events, in order."""
        return [d for d in self.event_days() if d > TODAY]

    def is_free(self, start: datetime, minutes: int) -> bool:
        """True when ``[start, start + minutes)`` is within working hours and overlaps no event."""
        end = start + timedelta(minutes=minutes)
        if start.time() < DAY_START or end > datetime.combine(start.date(), DAY_END):
            return False
        return all(e.end <= start or e.start >= end for e in self.events_on(start.date()))

    def first_free(self, day: date, minutes: int) -> datetime | None:
        """The earliest start on ``day`` with ``minutes`` free in working hours, or None.

        The earliest free moment is 09:00 or the end of an event. The answer is also required to
        be on the half-hour grid, so that "first free slot" means the same on any reading.
        """
        candidates = [datetime.combine(day, DAY_START), *(e.end for e in self.events_on(day))]
        for start in sorted(candidates):
            if start.time() >= DAY_START and self.is_free(start, minutes):
                return start if start.minute % 30 == 0 and start.second == 0 else None
        return None

    def free_starts(self, day: date, minutes: int) -> list[datetime]:
        """Every half-hour start on ``day`` with ``minutes`` free in working hours."""
        start = datetime.combine(day, DAY_START)
        out = []
        while start + timedelta(minutes=minutes) <= datetime.combine(day, DAY_END):
            if self.is_free(start, minutes):
                out.append(start)
            start += timedelta(minutes=30)
        return out

    # ---------------------------------------------------------------------------------- analytics

    @staticmethod
    def _analytics(frame: pd.DataFrame) -> dict[date, DayStats]:
        days: dict[date, DayStats] = {}
        for day, seconds, source, engaged in _rows(
            frame, ("date_of_visit", "session_duration_seconds", "traffic_source", "user_engaged")
        ):
            parsed = _parse(day, _DATE)
            try:
                value = float(seconds)
            except (TypeError, ValueError):
                value = math.nan
            if parsed is None or math.isnan(value):
                continue
            stats = days.setdefault(parsed.date(), DayStats())
            stats.visits += 1
            stats.seconds += value
            stats.engaged += 1 if engaged is True or engaged == "True" else 0
            if isinstance(source, str):
                stats.by_source[source] = stats.by_source.get(source, 0) + 1
        return dict(sorted(days.items()))

    def analytics_days(self, first: date, last: date = TODAY) -> list[date]:
        """Days in ``[first, last]`` that have visits."""
        return [d for d in self.days if first <= d <= last]

    def covers(self, first: date, last: date = TODAY) -> bool:
        """True when every calendar day in ``[first, last]`` has at least one visit."""
        return len(self.analytics_days(first, last)) == (last - first).days + 1

    def daily(self, metric: str, first: date, last: date = TODAY) -> list[float]:
        """The per-day values a tool reports for ``metric`` (a ``value_to_plot``) in the range."""
        out: list[float] = []
        for day in self.analytics_days(first, last):
            stats = self.days[day]
            if metric == "total_visits":
                out.append(stats.visits)
            elif metric == "user_engaged":
                out.append(stats.engaged)
            elif metric == "session_duration_seconds":
                out.append(stats.seconds / stats.visits)
            else:
                source = metric.removeprefix("visits_").replace("_", " ")
                out.append(stats.by_source.get(source, 0))
        return out

    def source_total(self, source: str, first: date, last: date = TODAY) -> int:
        """Visits from ``source`` in ``[first, last]``."""
        return sum(self.days[d].by_source.get(source, 0) for d in self.analytics_days(first, last))

    def analytics_range(self) -> tuple[date, date] | None:
        """The first and last analytics day up to today, or None without data."""
        days = self.analytics_days(date.min)
        return (days[0], days[-1]) if days else None


def _distinct(name: str, names: Sequence[str]) -> bool:
    """True when ``name`` occurs once in ``names`` and is inside no other one (case ignored)."""
    key = name.lower()
    hits = 0
    for other in names:
        low = other.lower()
        if low == key:
            hits += 1
        elif key in low:
            return False
    return hits == 1


# --------------------------------------------------------------------------------------------------
# Phrasing


def nl_date(day: date) -> str:
    """``"November 9"``: the clock's year is implied, as in WorkBench's prompts."""
    return f"{day:%B} {day.day}"


def nl_time(moment: datetime | time) -> str:
    """``"9am"``, ``"12:30pm"``, ``"3pm"``: unambiguous clock times."""
    hour = moment.hour % 12 or 12
    suffix = "am" if moment.hour < 12 else "pm"
    return f"{hour}{suffix}" if moment.minute == 0 else f"{hour}:{moment.minute:02d}{suffix}"


def nl_minutes(minutes: int) -> str:
    """A duration as an adjective: ``"30-minute"``, ``"1-hour"``, ``"90-minute"``, ``"2-hour"``."""
    if minutes % 60 == 0:
        return f"{minutes // 60}-hour"
    return f"{minutes}-minute"


def stamp(moment: datetime) -> str:
    """``YYYY-MM-DD HH:MM:SS`` (the calendar's format)."""
    return moment.strftime(_DATETIME)


def ymd(day: date) -> str:
    """``YYYY-MM-DD`` (dates in tool arguments)."""
    return day.strftime(_DATE)


#: ``value_to_plot`` -> how prompts name it.
METRIC_NAMES: Mapping[str, str] = {
    "total_visits": "total visits",
    "session_duration_seconds": "average session duration",
    "user_engaged": "engaged users",
    "visits_direct": "direct visits",
    "visits_referral": "referral visits",
    "visits_search_engine": "search engine visits",
    "visits_social_media": "social media visits",
}
#: The metrics WorkBench's conditional templates use.
CORE_METRICS: tuple[str, ...] = ("total_visits", "session_duration_seconds", "user_engaged")
#: ``plot_type`` -> how prompts name the chart.
CHART_NAMES: Mapping[str, str] = {
    "bar": "bar chart",
    "line": "line chart",
    "scatter": "scatter plot",
    "histogram": "histogram",
}
