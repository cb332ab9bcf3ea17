"""A deterministic generator of synthetic workplace sandboxes in the WorkBench format.

The product cannot ship WorkBench's CSV files, so its default sandbox is generated here. The
six tables have WorkBench's columns, column order, value formats and vocabularies, and at
``scale=1`` its row counts. :func:`generate_csv_texts` returns each table's CSV text keyed like
:data:`~workplace_env.sandbox.tables.CSV_FILES`. :func:`generate_sandbox` parses that text with
:meth:`BaseTables.from_csv_texts`, exactly as a WorkBench directory is loaded.

The world
    The user is **Sam**, a manager at ``atlas.com`` who is not in the directory. The clock is
    :data:`NOW`, 2023-11-30 23:59:00 (a Thursday). Employees are ``first.last@atlas.com``
    (lower-case ASCII letters). About a quarter of them are the sales team: they own the CRM
    customers and have no project tasks. The rest are split evenly over the three boards, and
    each of them works on one board only.

Tables, shapes and units (``n = round(base * scale)``; every value is text, as in the files)
    ``email_addresses.csv`` has no header and ``max(20, round(20 * sqrt(scale)))`` employees.

    ``emails.csv`` (500 rows). ``email_id`` is 8 zero-padded digits, a shuffled permutation of
    ``0..n-1`` like every id column here. ``inbox/outbox`` is ``inbox``, as in WorkBench, where
    no mail has been sent yet. ``sender/recipient`` is an employee. ``subject`` is either
    ``Task Update on <task_name>``, sent by that task's assignee, or ``Update on <event_name>``,
    sent by a participant of an event near the mail's date. ``sent_datetime`` is
    ``YYYY-MM-DD HH:MM:SS``, unique, from 2023-10-01 to 2023-11-30 and from 09:00:00 to
    15:59:59. ``body`` is ``<greeting>\\n\\n<text>[\\n\\n<paragraph>]\\n\\n<sign-off>,\\n<First>``,
    with *literal* backslash-n pairs as in WorkBench. Rows are sorted by ``sent_datetime``.

    ``calendar_events.csv`` (300 rows) has one participant per event. ``event_start`` is
    ``YYYY-MM-DD HH:MM:SS`` on a weekday, on the hour or half hour, from 09:00 to 15:30.
    ``duration`` is in minutes (``30``, ``60``, ``90`` or ``120``), and every event ends by
    17:30. Events never overlap (it is Sam's calendar), so every start is unique, and an event
    name occurs at most once a day. At scale 1 the events span 103 weekdays, 2023-08-01 to
    2023-12-21, with about 85% before :data:`NOW`. When a day would average more than 4.5
    events, the span grows backwards and forwards instead. Rows are sorted by ``event_start``.

    ``analytics_data.csv`` (1000 rows). ``date_of_visit`` is ``YYYY-MM-DD``, from 2023-09-01
    to 2023-11-30. ``visitor_id`` is 4 zero-padded digits. ``page_views`` is an integer, at
    least 1. ``session_duration_seconds`` is an integer, at least 0. ``traffic_source`` is one
    of :data:`TRAFFIC_SOURCES`. ``user_engaged`` is ``True`` or ``False``, and an engaged visit
    lasts at least 11 s and views at least 2 pages. The rows are unsorted, as in WorkBench.

    ``project_tasks.csv`` (300 rows). ``due_date`` is ``YYYY-MM-DD``, from 2023-11-27 to
    2023-12-13. ``list_name`` is one of :data:`LIST_NAMES`. ``board`` is one of :data:`BOARDS`,
    in equal thirds. Each (task_name, assigned_to_email) pair occurs once. Rows are sorted by
    ``due_date``.

    ``customer_relationship_manager_data.csv`` (200 rows). ``customer_name`` is
    ``First Last``, and ``customer_email`` is ``first.last@companyname`` with no TLD.
    ``customer_phone`` is ``NNN-NNN-NNNN`` or empty (about half). ``last_contact_date`` and
    ``follow_up_by`` are ``YYYY-MM-DD 23:59:00``: the first falls from 2023-10-01 to
    2023-11-30, the second 7 to 30 days later. ``notes`` is empty (about a fifth) or 1 to 3
    entries ``YYYY-MM-DD: <phrase> `` (each ends with a space), dated on or before the last
    contact. Rows are sorted by ``last_contact_date``, newest first.

Unambiguous lookups
    The tools search by substring (directory, task names, event names, customer names), so a
    name must pick out exactly what it names. No employee's first name occurs in another
    employee's address. No task name, event name or customer name is a substring of another
    one, ignoring case. Event starts and email datetimes are unique. Customer names and emails
    are distinct.

Determinism
    The output depends only on ``seed`` and ``scale``, never on hash seeds, the time, or the
    iteration order of sets. Every part draws from its own :class:`random.Random`, seeded with
    a string derived from ``seed``. People's names come from Faker's person providers, each on
    a freshly seeded :class:`faker.Generator`. The bytes are therefore stable for a given
    Faker version, but a Faker release that edits its name lists may change the names.
"""

from __future__ import annotations

import bisect
import csv
import functools
import importlib
import io
import itertools
import math
import numbers
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from random import Random

from faker import Generator

from workplace_env.sandbox.tables import (
    ANALYTICS,
    CALENDAR,
    COLUMNS,
    CRM,
    DIRECTORY,
    EMAILS,
    GENERATED,
    TASKS,
    BaseTables,
)

__all__ = [
    "BASE_ROWS",
    "BOARDS",
    "COMPANY_DOMAIN",
    "CRM_STATUSES",
    "DURATIONS",
    "LIST_NAMES",
    "MAX_SCALE",
    "NOTE_PHRASES",
    "NOW",
    "PRODUCT_INTERESTS",
    "TRAFFIC_SOURCES",
    "USER_NAME",
    "directory_size",
    "generate_csv_texts",
    "generate_sandbox",
    "row_counts",
]

# --------------------------------------------------------------------------------------------------
# The world's constants and WorkBench's vocabularies (short category words only).

#: The fixed "now" of the sandbox (NeMo Gym's clock).
NOW = datetime(2023, 11, 30, 23, 59, 0)
#: The company's e-mail domain.
COMPANY_DOMAIN = "atlas.com"
#: The first name of the sandbox's user, whom the e-mails address.
USER_NAME = "Sam"
#: The largest accepted ``scale`` (beyond it, the task-name pools could not keep (name, assignee)
#: pairs unique).
MAX_SCALE = 100.0

#: Rows of each table at ``scale=1`` (the directory is sized by :func:`directory_size`).
BASE_ROWS: dict[str, int] = {EMAILS: 500, CALENDAR: 300, ANALYTICS: 1000, TASKS: 300, CRM: 200}
_BASE_DIRECTORY = 20

INBOX = "inbox"
#: Project-management lists (WorkBench's vocabulary).
LIST_NAMES: tuple[str, ...] = ("Backlog", "In Progress", "In Review", "Completed")
#: Project-management boards (WorkBench's vocabulary).
BOARDS: tuple[str, ...] = ("Back end", "Front end", "Design")
#: CRM statuses (WorkBench's vocabulary).
CRM_STATUSES: tuple[str, ...] = ("Qualified", "Won", "Lost", "Lead", "Proposal")
#: CRM product interests (WorkBench's vocabulary).
PRODUCT_INTERESTS: tuple[str, ...] = ("Software", "Hardware", "Services", "Consulting", "Training")
#: Analytics traffic sources (WorkBench's spelling: lower case, with spaces).
TRAFFIC_SOURCES: tuple[str, ...] = ("direct", "referral", "search engine", "social media")
#: Calendar event durations, in minutes.
DURATIONS: tuple[str, ...] = ("30", "60", "90", "120")
#: The phrases of CRM note entries.
NOTE_PHRASES: tuple[str, ...] = ("Had a call.", "Met in person.", "Saw the demo.", "On holiday.")

_TASK_SUBJECT = "Task Update on "
_EVENT_SUBJECT = "Update on "
_GREETINGS = (f"{USER_NAME},", f"Hi {USER_NAME},", f"Hey {USER_NAME},", f"Dear {USER_NAME},")
_SIGN_OFFS = ("Best,", "Regards,", "Thanks,", "Cheers,")
_NL = "\\n"  # WorkBench bodies hold a literal backslash and "n", not a newline

# Date windows (inclusive) of the date-bounded tables.
_EMAIL_FIRST_DAY = date(2023, 10, 1)
_EMAIL_DAYS = 61  # 2023-10-01 .. 2023-11-30
_ANALYTICS_FIRST_DAY = date(2023, 9, 1)
_ANALYTICS_DAYS = 91  # 2023-09-01 .. 2023-11-30
_TASK_FIRST_DUE = date(2023, 11, 27)
_TASK_DUE_DAYS = 17  # 2023-11-27 .. 2023-12-13
_CRM_FIRST_CONTACT = date(2023, 10, 1)
_CRM_CONTACT_DAYS = 61  # 2023-10-01 .. 2023-11-30

# Calendar: half-hour slots from 09:00; an event starts by 15:30 (slot 13) and ends by 17:30 (17).
_CAL_SLOTS = 17
_CAL_LAST_START = 13
_CAL_BASE_DAYS = 103  # weekdays 2023-08-01 .. 2023-12-21
_CAL_DAYS_AFTER_FRACTION = 15 / 103  # weekdays after NOW at scale 1 (2023-12-01 .. 2023-12-21)
_CAL_MAX_DENSITY = 4.5  # average events per weekday before the span grows
_CAL_MAX_PER_DAY = 7
_CAL_DURATION_WEIGHTS = (28, 27, 25, 20)  # of DURATIONS

# --------------------------------------------------------------------------------------------------
# Templates (this module's own wording).

_DIRECTORY_LOCALES: tuple[tuple[str, int], ...] = (
    ("en_US", 4),
    ("en_IN", 3),
    ("es_MX", 2),
    ("de_DE", 1),
    ("fr_FR", 1),
    ("it_IT", 1),
    ("nl_NL", 1),
    ("sw", 1),
    ("yo_NG", 1),
    ("ja_JP", 2),
    ("zh_CN", 2),
)
_ROMANIZED_LOCALES = ("ja_JP", "zh_CN")

_FRONT_END_PAGES = (
    "checkout page",
    "search results page",
    "pricing page",
    "help center",
    "order history page",
    "account settings page",
    "product detail page",
    "signup form",
    "admin console",
    "notification panel",
    "landing page",
    "user profile page",
    "billing page",
    "team members page",
    "reports page",
    "login screen",
)
_FRONT_END_TEMPLATES = (
    "Fix layout shift on {}",
    "Fix overflow bug on {}",
    "Fix contrast issues on {}",
    "Add loading skeleton to {}",
    "Add breadcrumb trail to {}",
    "Add empty state to {}",
    "Add keyboard shortcuts to {}",
    "Make {} responsive",
    "Improve load time of {}",
    "Localize {}",
    "Add dark mode to {}",
    "Write UI tests for {}",
    "Lazy-load images on {}",
)
_BACK_END_SERVICES = (
    "billing",
    "invoicing",
    "notification",
    "search indexing",
    "session",
    "audit logging",
    "inventory sync",
    "order processing",
    "file storage",
    "reporting",
    "user import",
    "webhook delivery",
    "payment retry",
    "email dispatch",
    "data export",
    "access control",
)
_BACK_END_TEMPLATES = (
    "Add rate limiting to {} service",
    "Write integration tests for {} service",
    "Fix memory leak in {} service",
    "Add caching to {} service",
    "Refactor error handling in {} service",
    "Add retries to {} service",
    "Improve logging in {} service",
    "Add metrics to {} service",
    "Migrate {} service to PostgreSQL",
    "Reduce latency of {} service",
    "Document API of {} service",
    "Add health checks to {} service",
    "Harden input validation in {} service",
)
_DESIGN_FEATURES = (
    "mobile checkout",
    "team workspace",
    "billing portal",
    "partner dashboard",
    "support hub",
    "referral program",
    "loyalty program",
    "newsletter signup",
    "order tracking",
    "account recovery",
    "saved searches",
    "in-app chat",
    "data export wizard",
    "notification preferences",
    "product tour",
    "pricing calculator",
)
_DESIGN_TEMPLATES = (
    "Create mockups for {}",
    "Design icons for {}",
    "Run usability test for {}",
    "Write UX copy for {}",
    "Create user flow diagram for {}",
    "Refresh visual style of {}",
    "Prepare design specs for {}",
    "Review accessibility of {}",
    "Draw illustrations for {}",
    "Build clickable prototype of {}",
    "Define color palette for {}",
    "Sketch wireframes for {}",
    "Audit design consistency of {}",
)
_TASK_POOL_BASE = 26  # task names per board at scale 1 (grows with sqrt(scale))

_MEETINGS = (  # informal, lower-case names
    "sync up",
    "process review",
    "design review",
    "one-on-one",
    "sprint planning",
    "sprint retro",
    "budget check-in",
    "roadmap review",
    "client call",
    "demo prep",
    "hiring debrief",
    "office hours",
    "knowledge share",
    "vendor call",
    "lunch and learn",
    "ops review",
    "release readiness check",
    "weekly check-in",
    "kickoff call",
    "tech talk",
    "code walkthrough",
    "status update",
    "architecture review",
    "coffee chat",
    "planning huddle",
    "incident review",
    "backlog grooming",
)
_EVENT_TOPICS = (
    "Cloud Migration",
    "Customer Success",
    "Product Roadmap",
    "Security Awareness",
    "Sales Enablement",
    "Vendor Partnership",
    "Brand Strategy",
    "Data Governance",
    "Talent Development",
    "Pricing Strategy",
    "Sustainability",
    "Hybrid Work",
    "Mobile Strategy",
    "Quality Assurance",
    "Accessibility",
    "Partner Ecosystem",
    "Market Expansion",
    "Customer Feedback",
)
_EVENT_FORMATS = (
    "Workshop",
    "Summit",
    "Briefing",
    "Forum",
    "Roundtable",
    "Kickoff",
    "Town Hall",
    "Offsite",
    "Deep Dive",
    "Planning Session",
)
_MEETINGS_PER_SEED = 20  # at scale 1; both pools grow with sqrt(scale)
_EVENTS_PER_SEED = 28

_TASK_BODIES: dict[str, tuple[str, ...]] = {
    "Backlog": (
        "I've been given '{x}'. It's still in the backlog, so let me know if it should jump the "
        "queue.",
        "Before I start on '{x}', could you confirm the scope? I want to be sure we agree on what "
        "done looks like.",
        "'{x}' is on my list for the coming days. Is there any earlier work I should look at "
        "first?",
    ),
    "In Progress": (
        "I'm working on '{x}' now and expect to wrap it up before the due date.",
        "Progress on '{x}' is good, but I'm blocked on {blocker}. Could we talk it through?",
    ),
    "In Review": (
        "'{x}' is ready for review. Could you take a look when you have a moment?",
        "I've submitted '{x}' for review and addressed the earlier comments. Let me know if "
        "anything else is needed.",
    ),
    "Completed": (
        "'{x}' is done. Please let me know if anything needs another pass.",
        "Good news: I finished '{x}' ahead of the deadline. Happy to walk you through the changes.",
    ),
}
_BLOCKERS = (
    "a pending dependency upgrade",
    "missing test data",
    "an unclear requirement",
    "access to the staging environment",
    "a flaky build",
)
_UPCOMING_EVENT_BODIES = (
    "Looking forward to the {x}. Is there anything you'd like me to prepare?",
    "Quick reminder that the {x} is coming up. I've put the agenda in the shared folder.",
    "Could we go over the plan for the {x} beforehand? I have a few points to add.",
    "Thanks for the invitation to the {x}. I'll be there.",
)
_PAST_EVENT_BODIES = (
    "Thanks for joining the {x}. I've written up the notes and action items.",
    "Following up on the {x}: I'll send a summary of what we agreed by Friday.",
    "A few people asked for the slides from the {x}. Could you share them, or should I?",
    "I have some thoughts on how the {x} went. Do you have a few minutes this week?",
)
_EXTRA_PARAGRAPHS = (
    "On a separate note, the planning documents for next quarter are now in the shared drive. "
    "Please add your comments by the end of next week so we can settle the priorities together.",
    "Also, a reminder that the office will be closed on the last Friday of the month for "
    "maintenance. Let me know if that affects any of your plans.",
    "By the way, I've started collecting feedback from the team on our new review process. Early "
    "responses are positive, and I'll share a short summary once everyone has replied.",
    "One more thing: a client asked whether we could bring the next milestone forward. I said we "
    "would confirm after checking capacity, so I'd appreciate your view.",
)
_EXTRA_PARAGRAPH_RATE = 0.22
_EVENT_EMAIL_WINDOW = timedelta(days=21)  # event mails discuss an event within 3 weeks of sending

_COMPANY_PREFIXES = (
    "apex",
    "bright",
    "cedar",
    "delta",
    "ever",
    "granite",
    "harbor",
    "iron",
    "juniper",
    "keystone",
    "lumen",
    "maple",
    "north",
    "orbit",
    "pioneer",
    "quartz",
    "river",
    "summit",
    "terra",
    "vertex",
    "willow",
    "zenith",
    "silver",
    "coral",
)
_COMPANY_MIDDLES = ("", "", "line", "wave", "gate", "field", "stone", "bridge", "point", "peak")
_COMPANY_INDUSTRIES = (
    "analytics",
    "systems",
    "labs",
    "foods",
    "energy",
    "logistics",
    "robotics",
    "health",
    "media",
    "software",
    "partners",
    "devices",
    "networks",
    "retail",
    "biotech",
    "security",
)

_STATUS_WEIGHTS = (17, 22, 21, 21, 19)  # of CRM_STATUSES
_PRODUCT_WEIGHTS = (20, 18, 25, 15, 22)  # of PRODUCT_INTERESTS
_NOTE_COUNT_WEIGHTS = (22, 30, 28, 20)  # 0, 1, 2 or 3 note entries
_PHONE_RATE = 0.5
_TRAFFIC_WEIGHTS = (50, 11, 11, 28)  # of TRAFFIC_SOURCES
_ENGAGED_RATE = 0.49
# List weights of a task due before NOW's date and of one due later (of LIST_NAMES).
_LIST_WEIGHTS_PAST = (40, 4, 14, 42)
_LIST_WEIGHTS_FUTURE = (70, 5, 15, 10)

_ASCII_NAME = re.compile(r"[A-Za-z]+")


# --------------------------------------------------------------------------------------------------
# Public API


def row_counts(scale: float = 1.0) -> dict[str, int]:
    """Rows of each table at ``scale``: ``max(1, round(base * scale))``, the directory per
    :func:`directory_size`. Raises :class:`ValueError` for a scale outside ``(0, MAX_SCALE]``."""
    scale = _check_scale(scale)
    counts = {DIRECTORY: directory_size(scale)}
    for key, base in BASE_ROWS.items():
        counts[key] = max(1, math.floor(base * scale + 0.5))
    return counts


def directory_size(scale: float = 1.0) -> int:
    """Employees in the directory at ``scale``: 20, growing with ``sqrt(scale)`` above scale 1."""
    scale = _check_scale(scale)
    return max(_BASE_DIRECTORY, math.floor(_BASE_DIRECTORY * math.sqrt(scale) + 0.5))


def generate_csv_texts(seed: int = 0, scale: float = 1.0) -> dict[str, str]:
    """Generate a sandbox as WorkBench CSV texts.

    Returns a dict from each table key of :data:`~workplace_env.sandbox.tables.CSV_FILES`
    (``DIRECTORY, EMAILS, CALENDAR, ANALYTICS, TASKS, CRM``) to its file text: a header row (not
    for the directory), ``\\n`` line ends, and no trailing newline. The row counts are those of
    :func:`row_counts`. The same ``seed`` and ``scale`` always give the same bytes (for a given
    Faker version). Raises :class:`ValueError` when ``scale`` is not in ``(0, MAX_SCALE]`` or
    ``seed`` is not an int.
    """
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise ValueError(f"seed must be an int, got {seed!r}")
    seed = int(seed)
    counts = row_counts(scale)
    scale = float(scale)

    people = _directory(seed, counts[DIRECTORY])
    n_sales = max(1, len(people) // 4)
    order = list(range(len(people)))
    _rng(seed, "roles").shuffle(order)
    sales = [people[i] for i in sorted(order[:n_sales])]
    engineers = [people[i] for i in sorted(order[n_sales:])] or sales

    tasks = _tasks(seed, scale, counts[TASKS], engineers)
    events = _calendar(seed, scale, counts[CALENDAR], people)
    emails = _emails(seed, counts[EMAILS], people, tasks, events)
    customers = _customers(seed, counts[CRM], sales, people)
    visits = _analytics(seed, counts[ANALYTICS])

    return {
        DIRECTORY: _csv(None, ([p.email] for p in people)),
        EMAILS: _csv(COLUMNS[EMAILS], emails),
        CALENDAR: _csv(COLUMNS[CALENDAR], (e[:5] for e in events)),
        ANALYTICS: _csv(COLUMNS[ANALYTICS], visits),
        TASKS: _csv(COLUMNS[TASKS], tasks),
        CRM: _csv(COLUMNS[CRM], customers),
    }


def generate_sandbox(seed: int = 0, scale: float = 1.0) -> BaseTables:
    """Generate a sandbox and parse it like a WorkBench directory.

    Equivalent to ``BaseTables.from_csv_texts(generate_csv_texts(seed, scale),
    origin=f"generated:seed={seed},scale={scale}")``. Raises :class:`ValueError` for bad arguments.
    """
    texts = generate_csv_texts(seed, scale)
    return BaseTables.from_csv_texts(texts, origin=f"{GENERATED}seed={seed},scale={scale}")


# --------------------------------------------------------------------------------------------------
# Helpers


def _check_scale(scale: float) -> float:
    if isinstance(scale, bool) or not isinstance(scale, int | float):
        raise ValueError(f"scale must be a number, got {scale!r}")
    value = float(scale)
    if not (math.isfinite(value) and 0.0 < value <= MAX_SCALE):
        raise ValueError(f"scale must be in (0, {MAX_SCALE:g}], got {scale!r}")
    return value


def _rng(seed: int, part: str) -> Random:
    """An independent generator per part (str seeds hash with SHA-512: stable across processes)."""
    return Random(f"workplace-sandbox/{seed}/{part}")


def _csv(header: Sequence[str] | None, rows: Iterable[Sequence[str]]) -> str:
    """CSV text as pandas writes it (minimal quoting, ``\\n``), without the trailing newline."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    if header is not None:
        writer.writerow(header)
    writer.writerows(rows)
    return buf.getvalue().rstrip("\n")


def _ymd(day: date) -> str:
    """``YYYY-MM-DD``."""
    return day.isoformat()


def _ymd_hms(moment: datetime) -> str:
    """``YYYY-MM-DD HH:MM:SS`` (the moments here carry no microseconds)."""
    return moment.isoformat(" ", "seconds")


@dataclass(frozen=True)
class _Weighted:
    """A weighted choice with precomputed cumulative weights (cheaper than ``Random.choices``)."""

    items: tuple[str, ...]
    cumulative: tuple[float, ...]

    @classmethod
    def of(cls, items: Sequence[str], weights: Sequence[float]) -> _Weighted:
        return cls(tuple(items), tuple(itertools.accumulate(weights)))

    def pick(self, rng: Random) -> str:
        return self.items[bisect.bisect(self.cumulative, rng.random() * self.cumulative[-1])]


def _shuffled_ids(rng: Random, n: int) -> list[str]:
    """``n`` ids ``00000000..`` (8 zero-padded digits) in a random order, like WorkBench's files."""
    ids = [f"{i:08d}" for i in range(n)]
    rng.shuffle(ids)
    return ids


def _ascii_name(raw: str, max_len: int) -> str | None:
    """``raw`` as one capitalised ASCII word (accents dropped), or None if it is not one."""
    folded = unicodedata.normalize("NFKD", raw).encode("ascii", "ignore").decode("ascii")
    if not _ASCII_NAME.fullmatch(folded) or not 3 <= len(folded) <= max_len:
        return None
    return folded if folded[0].isupper() else folded.capitalize()


def _person_generator(locale: str, seed: int) -> Generator:
    """A seeded Faker generator with only ``locale``'s person provider (cheap to build)."""
    provider = importlib.import_module(f"faker.providers.person.{locale}").Provider
    generator = Generator()
    generator.add_provider(provider)
    generator.seed_instance(seed)
    return generator


@functools.cache
def person_first_names() -> frozenset[str]:
    """Every first name the directory's locales hold (lower-case ASCII, as :func:`_ascii_name`
    folds them): the words a task's prompt names a person with."""
    names: set[str] = set()
    for locale, _ in _DIRECTORY_LOCALES:
        provider = importlib.import_module(f"faker.providers.person.{locale}").Provider
        for pool in ("first_names", "first_romanized_names"):
            for raw in getattr(provider, pool, ()):
                if (name := _ascii_name(str(raw), 10)) is not None:
                    names.add(name.lower())
    return frozenset(names)


def _substring_free(names: Iterable[str]) -> tuple[str, ...]:
    """``names`` in order, dropping any that contains or is contained in an earlier kept one."""
    kept: list[str] = []
    lowered: list[str] = []
    for name in names:
        low = name.lower()
        if all(low not in other and other not in low for other in lowered):
            kept.append(name)
            lowered.append(low)
    return tuple(kept)


@functools.cache
def _task_name_pools() -> dict[str, tuple[str, ...]]:
    """Every candidate task name per board. No name is a substring of another, on any board."""
    raw = {
        "Back end": [t.format(s) for t in _BACK_END_TEMPLATES for s in _BACK_END_SERVICES],
        "Front end": [t.format(p) for t in _FRONT_END_TEMPLATES for p in _FRONT_END_PAGES],
        "Design": [t.format(f) for t in _DESIGN_TEMPLATES for f in _DESIGN_FEATURES],
    }
    kept = set(_substring_free(name for board in BOARDS for name in raw[board]))
    return {board: tuple(name for name in raw[board] if name in kept) for board in BOARDS}


@functools.cache
def _event_name_pools() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Candidate (meeting, event) names; none is a substring of another."""
    formal = [f"{topic} {fmt}" for topic in _EVENT_TOPICS for fmt in _EVENT_FORMATS]
    kept = set(_substring_free([*_MEETINGS, *formal]))
    return (
        tuple(n for n in _MEETINGS if n in kept),
        tuple(n for n in formal if n in kept),
    )


@dataclass(frozen=True)
class _Person:
    first: str  # capitalised, e.g. "Chenwei"
    last: str
    email: str  # first.last@atlas.com, lower case


# --------------------------------------------------------------------------------------------------
# Tables


def _directory(seed: int, n: int) -> list[_Person]:
    """``n`` employees with unique first names, none of which occurs in another's address."""
    rng = _rng(seed, "directory")
    locales = [loc for loc, _ in _DIRECTORY_LOCALES]
    pick_locale = _Weighted.of(locales, [w for _, w in _DIRECTORY_LOCALES])
    generators = {loc: _person_generator(loc, rng.getrandbits(64)) for loc in locales}
    people: list[_Person] = []
    user = USER_NAME.lower()
    for _ in range(200 * n + 1000):
        if len(people) == n:
            break
        locale = pick_locale.pick(rng)
        gen = generators[locale]
        if locale in _ROMANIZED_LOCALES:
            raw_first, raw_last = gen.first_romanized_name(), gen.last_romanized_name()
        else:
            raw_first, raw_last = gen.first_name(), gen.last_name()
        first, last = _ascii_name(raw_first, 10), _ascii_name(raw_last, 12)
        if first is None or last is None:
            continue
        f, local = first.lower(), f"{first}.{last}".lower()
        email = f"{local}@{COMPANY_DOMAIN}"
        if user in local or f in user or f in COMPANY_DOMAIN:
            continue
        if any(f in p.email or p.first.lower() in email for p in people):
            continue
        people.append(_Person(first, last, email))
    if len(people) < n:  # pragma: no cover - the name lists are far larger than MAX_SCALE needs
        raise RuntimeError(f"could only find {len(people)} of {n} distinct employee names")
    return people


def _tasks(seed: int, scale: float, n: int, engineers: list[_Person]) -> list[list[str]]:
    """Task rows sorted by due date; boards in equal thirds; (name, assignee) pairs unique."""
    rng = _rng(seed, "tasks")
    pick_past = _Weighted.of(LIST_NAMES, _LIST_WEIGHTS_PAST)
    pick_future = _Weighted.of(LIST_NAMES, _LIST_WEIGHTS_FUTURE)
    pools = _task_name_pools()
    by_board: dict[str, list[_Person]] = {b: [] for b in BOARDS}
    for i, person in enumerate(engineers):
        by_board[BOARDS[i % len(BOARDS)]].append(person)
    for board in BOARDS:  # fewer than three engineers: share them
        by_board[board] = by_board[board] or engineers
    rows: list[tuple[int, int, list[str]]] = []
    for b, board in enumerate(BOARDS):
        n_board = n // len(BOARDS) + (1 if b < n % len(BOARDS) else 0)
        if n_board == 0:
            continue
        assignees = by_board[board]
        full = pools[board]
        wanted = max(
            math.ceil(_TASK_POOL_BASE * math.sqrt(scale)), math.ceil(1.2 * n_board / len(assignees))
        )
        names = rng.sample(full, min(len(full), wanted))
        if len(names) * len(assignees) < n_board:  # pragma: no cover - guarded by MAX_SCALE
            raise ValueError(f"scale {scale} needs more task names than the {board} pool holds")
        pairs = [(name, person) for name in names for person in assignees]
        for name, person in rng.sample(pairs, n_board):
            offset = rng.randrange(_TASK_DUE_DAYS)
            due = _TASK_FIRST_DUE + timedelta(days=offset)
            list_name = (pick_past if due < NOW.date() else pick_future).pick(rng)
            rows.append((offset, len(rows), [name, person.email, list_name, _ymd(due), board]))
    rows.sort(key=lambda r: (r[0], r[1]))
    ids = _shuffled_ids(rng, len(rows))
    return [[task_id, *row] for task_id, (_, _, row) in zip(ids, rows, strict=True)]


def _weekday_span(n: int) -> list[date]:
    """The calendar's weekdays: about 85% up to NOW's date, the rest after it."""
    days = max(_CAL_BASE_DAYS, math.ceil(n / _CAL_MAX_DENSITY))
    after = math.floor(days * _CAL_DAYS_AFTER_FRACTION + 0.5)
    before: list[date] = []
    day = NOW.date()
    while len(before) < days - after:
        if day.weekday() < 5:
            before.append(day)
        day -= timedelta(days=1)
    later: list[date] = []
    day = NOW.date() + timedelta(days=1)
    while len(later) < after:
        if day.weekday() < 5:
            later.append(day)
        day += timedelta(days=1)
    return [*reversed(before), *later]


def _pack_day(rng: Random, count: int) -> list[tuple[int, int]]:
    """``count`` non-overlapping (start slot, length in slots) pairs within the working day."""
    lengths = rng.choices((1, 2, 3, 4), _CAL_DURATION_WEIGHTS, k=count)

    def tail(lens: list[int]) -> int:  # the last event must start by 15:30
        return max(0, _CAL_SLOTS - _CAL_LAST_START - lens[-1])

    while sum(lengths) + tail(lengths) > _CAL_SLOTS:
        longest = max(range(count), key=lambda i: (lengths[i], -i))
        lengths[longest] -= 1
    free = _CAL_SLOTS - sum(lengths) - tail(lengths)
    cuts = sorted(rng.sample(range(free + count), count))
    slots: list[tuple[int, int]] = []
    position, previous_cut = 0, -1
    for cut, length in zip(cuts, lengths, strict=True):
        position += cut - previous_cut - 1  # the gap before this event
        previous_cut = cut
        slots.append((position, length))
        position += length
    return slots


def _calendar(seed: int, scale: float, n: int, people: list[_Person]) -> list[list[str]]:
    """Event rows sorted by start: ``[id, name, participant, start, duration, <datetime>]``."""
    rng = _rng(seed, "calendar")
    meetings, formal = _event_name_pools()
    growth = math.sqrt(max(scale, 1.0))
    names = [
        *rng.sample(meetings, min(len(meetings), math.ceil(_MEETINGS_PER_SEED * growth))),
        *rng.sample(formal, min(len(formal), math.ceil(_EVENTS_PER_SEED * growth))),
    ]
    days = _weekday_span(n)
    per_day = [0] * len(days)
    for _ in range(n):
        index = rng.randrange(len(days))
        while per_day[index] >= _CAL_MAX_PER_DAY:
            index = rng.randrange(len(days))
        per_day[index] += 1
    events: list[tuple[datetime, str, str, str]] = []
    for day, count in zip(days, per_day, strict=True):
        if count == 0:
            continue
        day_start = datetime(day.year, day.month, day.day, 9, 0, 0)
        day_names = rng.sample(names, count)
        for (slot, length), name in zip(_pack_day(rng, count), day_names, strict=True):
            start = day_start + timedelta(minutes=30 * slot)
            participant = rng.choice(people).email
            events.append((start, name, participant, str(30 * length)))
    ids = _shuffled_ids(rng, len(events))
    return [
        [event_id, name, who, _ymd_hms(start), minutes, start]
        for event_id, (start, name, who, minutes) in zip(ids, events, strict=True)
    ]


def _emails(
    seed: int,
    n: int,
    people: list[_Person],
    tasks: list[list[str]],
    events: list[list[str]],
) -> list[list[str]]:
    """Inbox rows sorted by unique ``sent_datetime``, about tasks and events of their senders."""
    rng = _rng(seed, "emails")
    by_email = {p.email: p for p in people}
    starts: list[datetime] = [e[5] for e in events]  # events are sorted by start
    first_day = datetime(_EMAIL_FIRST_DAY.year, _EMAIL_FIRST_DAY.month, _EMAIL_FIRST_DAY.day)
    seconds: set[int] = set()
    while len(seconds) < n:
        seconds.add(rng.randrange(_EMAIL_DAYS) * 86400 + rng.randrange(9 * 3600, 16 * 3600))
    moments = [first_day + timedelta(seconds=s) for s in sorted(seconds)]
    used: set[tuple[str, str, date]] = set()
    rows: list[list[str]] = []
    for sent in moments:
        for _attempt in range(20):
            if rng.random() < 0.5:
                _, name, sender, list_name, _, _ = rng.choice(tasks)
                subject = _TASK_SUBJECT + name
                text = rng.choice(_TASK_BODIES[list_name])
                text = text.format(x=name, blocker=rng.choice(_BLOCKERS))
            else:
                lo = bisect.bisect_left(starts, sent - _EVENT_EMAIL_WINDOW)
                hi = bisect.bisect_right(starts, sent + _EVENT_EMAIL_WINDOW)
                event = events[rng.randrange(lo, hi)] if hi > lo else rng.choice(events)
                name, sender = event[1], event[2]
                subject = _EVENT_SUBJECT + name
                upcoming = event[5] > sent
                text = rng.choice(_UPCOMING_EVENT_BODIES if upcoming else _PAST_EVENT_BODIES)
                text = text.format(x=name)
            if (sender, subject, sent.date()) not in used:
                break
        used.add((sender, subject, sent.date()))
        parts = [rng.choice(_GREETINGS), text]
        if rng.random() < _EXTRA_PARAGRAPH_RATE:
            parts.append(rng.choice(_EXTRA_PARAGRAPHS))
        parts.append(f"{rng.choice(_SIGN_OFFS)}{_NL}{by_email[sender].first}")
        rows.append([INBOX, sender, subject, _ymd_hms(sent), (_NL * 2).join(parts)])
    ids = _shuffled_ids(rng, len(rows))
    return [[email_id, *row] for email_id, row in zip(ids, rows, strict=True)]


class _NameRegistry:
    """Full names ``First Last`` such that none is a substring of another (case ignored).

    ``"fa la"`` is inside ``"fb lb"`` exactly when ``fa`` ends ``fb`` and ``la`` starts ``lb``:
    names hold no spaces, so the one space must line up.
    """

    def __init__(self) -> None:
        self._lasts_by_first: dict[str, list[str]] = {}
        self._by_first_suffix: dict[str, list[str]] = {}  # suffix of a first name -> its lasts

    def add(self, first: str, last: str) -> bool:
        f, ln = first.lower(), last.lower()
        for i in range(len(f)):  # an existing name inside the new one (or equal to it)
            if any(ln.startswith(other) for other in self._lasts_by_first.get(f[i:], ())):
                return False
        if any(other.startswith(ln) for other in self._by_first_suffix.get(f, ())):
            return False  # the new name inside an existing one
        self._lasts_by_first.setdefault(f, []).append(ln)
        for i in range(len(f)):
            self._by_first_suffix.setdefault(f[i:], []).append(ln)
        return True


def _companies(rng: Random, n: int) -> list[str]:
    """``n`` distinct lower-case company names such as ``cedarwavelogistics``."""
    names: list[str] = []
    seen: set[str] = set()
    capacity = len(_COMPANY_PREFIXES) * (len(_COMPANY_MIDDLES) - 1) * len(_COMPANY_INDUSTRIES)
    while len(names) < min(n, capacity):
        name = (
            rng.choice(_COMPANY_PREFIXES)
            + rng.choice(_COMPANY_MIDDLES)
            + rng.choice(_COMPANY_INDUSTRIES)
        )
        if name not in seen:
            seen.add(name)
            names.append(name)
    return names


def _customers(seed: int, n: int, sales: list[_Person], people: list[_Person]) -> list[list[str]]:
    """CRM rows sorted by last contact (newest first); distinct, substring-free customer names."""
    rng = _rng(seed, "crm")
    pick_notes = _Weighted.of("0123", _NOTE_COUNT_WEIGHTS)
    pick_product = _Weighted.of(PRODUCT_INTERESTS, _PRODUCT_WEIGHTS)
    pick_status = _Weighted.of(CRM_STATUSES, _STATUS_WEIGHTS)
    gen = _person_generator("en_US", rng.getrandbits(64))
    companies = _companies(rng, max(1, math.ceil(n * 0.95)))
    registry = _NameRegistry()
    for person in people:  # keep customers apart from employees
        registry.add(person.first, person.last)
    rows: list[tuple[int, int, list[str]]] = []
    while len(rows) < n:
        first, last = _ascii_name(gen.first_name(), 12), _ascii_name(gen.last_name(), 14)
        if first is None or last is None or not registry.add(first, last):
            continue
        email = f"{first}.{last}@{rng.choice(companies)}".lower()
        phone = ""
        if rng.random() < _PHONE_RATE:
            phone = f"{rng.randint(201, 989)}-{rng.randint(200, 999)}-{rng.randint(0, 9999):04d}"
        contact_offset = rng.randrange(_CRM_CONTACT_DAYS)
        contact = _CRM_FIRST_CONTACT + timedelta(days=contact_offset)
        follow_up = contact + timedelta(days=rng.randint(7, 30))
        n_notes = min(int(pick_notes.pick(rng)), contact_offset + 1)
        note_days = sorted(rng.sample(range(contact_offset + 1), n_notes))
        notes = "".join(
            f"{_ymd(_CRM_FIRST_CONTACT + timedelta(days=d))}: {rng.choice(NOTE_PHRASES)} "
            for d in note_days
        )
        row = [
            rng.choice(sales).email,
            f"{first} {last}",
            email,
            phone,
            f"{_ymd(contact)} 23:59:00",
            pick_product.pick(rng),
            pick_status.pick(rng),
            f"{_ymd(follow_up)} 23:59:00",
            notes,
        ]
        rows.append((-contact_offset, len(rows), row))
    rows.sort(key=lambda r: (r[0], r[1]))
    ids = _shuffled_ids(rng, len(rows))
    return [[customer_id, *row] for customer_id, (_, _, row) in zip(ids, rows, strict=True)]


def _analytics(seed: int, n: int) -> list[list[str]]:
    """Visit rows in no particular order (as in WorkBench), days weighted unevenly."""
    rng = _rng(seed, "analytics")
    pick_source = _Weighted.of(TRAFFIC_SOURCES, _TRAFFIC_WEIGHTS)
    days = [_ymd(_ANALYTICS_FIRST_DAY + timedelta(days=d)) for d in range(_ANALYTICS_DAYS)]
    day_weights = [rng.uniform(0.3, 1.7) for _ in days]
    rows: list[list[str]] = []
    for day in rng.choices(days, day_weights, k=n):
        engaged = rng.random() < _ENGAGED_RATE
        if engaged:
            page_views = 2 + int(rng.expovariate(1 / 4.5))
            duration = 11 + int(rng.expovariate(1 / 20))
        else:
            page_views = 1 + int(rng.expovariate(1 / 4.0))
            duration = int(rng.expovariate(1 / 8.5))
        rows.append(
            [
                day,
                f"{rng.randrange(10000):04d}",
                str(page_views),
                str(duration),
                pick_source.pick(rng),
                "True" if engaged else "False",
            ]
        )
    return rows
