"""The generated default sandbox: WorkBench's format, deterministic, unambiguous."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import os
import re
import subprocess
import sys
from datetime import date, datetime, timedelta
from functools import cache

import pandas as pd
import pytest

from tests.conftest import WORKBENCH, needs_shared
from tests.helpers import REPO
from workplace_env.sandbox import generate as gen
from workplace_env.sandbox.tables import (
    ANALYTICS,
    CALENDAR,
    COLUMNS,
    CRM,
    CSV_FILES,
    DIRECTORY,
    EMAILS,
    PLOTS,
    TASKS,
    BaseTables,
)

# WorkBench's vocabularies, as spelled in its CSVs and its tools' error messages.
REAL_VOCABULARIES: dict[tuple[str, str], set[str]] = {
    (EMAILS, "inbox/outbox"): {"inbox", "outbox"},
    (CALENDAR, "duration"): {"30", "60", "90", "120"},
    (ANALYTICS, "traffic_source"): {"direct", "referral", "search engine", "social media"},
    (ANALYTICS, "user_engaged"): {"True", "False"},
    (TASKS, "list_name"): {"Backlog", "In Progress", "In Review", "Completed"},
    (TASKS, "board"): {"Back end", "Front end", "Design"},
    (CRM, "status"): {"Qualified", "Won", "Lost", "Lead", "Proposal"},
    (CRM, "product_interest"): {"Software", "Hardware", "Services", "Consulting", "Training"},
}

_EMPLOYEE = r"[a-z]+\.[a-z]+@atlas\.com"
_DATE = r"\d{4}-\d\d-\d\d"
_PARAGRAPH = r"(?:(?!\\n).)+"  # text without a literal backslash-n
# Shape of every value, column by column; the real CSVs must match these too.
PATTERNS: dict[tuple[str, str], str] = {
    (DIRECTORY, "email_address"): _EMPLOYEE,
    (EMAILS, "email_id"): r"\d{8}",
    (EMAILS, "inbox/outbox"): r"inbox|outbox",
    (EMAILS, "sender/recipient"): _EMPLOYEE,
    (EMAILS, "subject"): r"(?:Task Update on|Update on) \S.*",
    (EMAILS, "sent_datetime"): rf"{_DATE} \d\d:\d\d:\d\d",
    (EMAILS, "body"): (
        rf"(?:Hi |Hey |Dear )?Sam,(?:\\n\\n{_PARAGRAPH})+"
        r"\\n\\n(?:Best|Regards|Thanks|Cheers),\\n[A-Z][a-z]+"
    ),
    (CALENDAR, "event_id"): r"\d{8}",
    (CALENDAR, "event_name"): r"\S(?:.*\S)?",
    (CALENDAR, "participant_email"): _EMPLOYEE,
    (CALENDAR, "event_start"): rf"{_DATE} (?:09|1[0-7]):(?:00|30):00",
    (CALENDAR, "duration"): r"30|60|90|120",
    (ANALYTICS, "date_of_visit"): _DATE,
    (ANALYTICS, "visitor_id"): r"\d{4}",
    (ANALYTICS, "page_views"): r"[1-9]\d*",
    (ANALYTICS, "session_duration_seconds"): r"0|[1-9]\d*",
    (ANALYTICS, "traffic_source"): r"direct|referral|search engine|social media",
    (ANALYTICS, "user_engaged"): r"True|False",
    (TASKS, "task_id"): r"\d{8}",
    (TASKS, "task_name"): r"[A-Z]\S*(?: \S+)+",
    (TASKS, "assigned_to_email"): _EMPLOYEE,
    (TASKS, "list_name"): r"Backlog|In Progress|In Review|Completed",
    (TASKS, "due_date"): _DATE,
    (TASKS, "board"): r"Back end|Front end|Design",
    (CRM, "customer_id"): r"\d{8}",
    (CRM, "assigned_to_email"): _EMPLOYEE,
    (CRM, "customer_name"): r"[A-Z][A-Za-z]+ [A-Z][A-Za-z]+",
    (CRM, "customer_email"): r"[a-z]+\.[a-z]+@[a-z]+",  # no TLD
    (CRM, "customer_phone"): r"(?:\d{3}-\d{3}-\d{4})?",
    (CRM, "last_contact_date"): rf"{_DATE} 23:59:00",
    (CRM, "product_interest"): r"Software|Hardware|Services|Consulting|Training",
    (CRM, "status"): r"Qualified|Won|Lost|Lead|Proposal",
    (CRM, "follow_up_by"): rf"{_DATE} 23:59:00",
    (CRM, "notes"): rf"(?:{_DATE}: (?:Had a call|Met in person|Saw the demo|On holiday)\. )*",
}

FILE_KEYS = tuple(CSV_FILES)
CASES = [(0, 1.0), (7, 1.0), (3, 4.0)]


@cache
def texts_for(seed: int, scale: float) -> dict[str, str]:
    return gen.generate_csv_texts(seed, scale)


@cache
def raw_frames(seed: int, scale: float) -> dict[str, pd.DataFrame]:
    """Every table as plain strings (empty cells stay ``""``)."""
    return _read_all(texts_for(seed, scale))


def _read_all(texts: dict[str, str]) -> dict[str, pd.DataFrame]:
    frames = {}
    for key, text in texts.items():
        header = None if key == DIRECTORY else 0
        frame = pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False, header=header)
        if key == DIRECTORY:
            frame.columns = list(COLUMNS[DIRECTORY])
        frames[key] = frame
    return frames


def _full_match(pattern: str, values: pd.Series) -> list[str]:
    regex = re.compile(pattern)
    return [v for v in values if not regex.fullmatch(v)]


# --------------------------------------------------------------------------------------------------
# Determinism


def test_same_seed_same_bytes() -> None:
    first = gen.generate_csv_texts(0, 1.0)
    second = gen.generate_csv_texts(0, 1.0)
    assert first == second
    assert gen.generate_csv_texts(3, 1) == gen.generate_csv_texts(3, 1.0)


def test_same_bytes_across_processes_and_hash_seeds() -> None:
    code = (
        "import hashlib, json\n"
        "from workplace_env.sandbox.generate import generate_csv_texts\n"
        "t = generate_csv_texts(5, 1.0)\n"
        "print(json.dumps({k: hashlib.sha256(v.encode()).hexdigest() for k, v in t.items()}))\n"
    )
    expected = {k: hashlib.sha256(v.encode()).hexdigest() for k, v in texts_for(5, 1.0).items()}
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        out = subprocess.run(
            [sys.executable, "-c", code], env=env, cwd=REPO, capture_output=True, text=True
        )
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout) == expected


def test_different_seed_different_bytes() -> None:
    a, b = texts_for(0, 1.0), texts_for(7, 1.0)
    for key in FILE_KEYS:
        assert a[key] != b[key], key


def test_scale_changes_output_but_not_the_first_employees() -> None:
    small = raw_frames(3, 1.0)[DIRECTORY].email_address.tolist()
    large = raw_frames(3, 4.0)[DIRECTORY].email_address.tolist()
    assert large[: len(small)] == small


# --------------------------------------------------------------------------------------------------
# Format


@pytest.mark.parametrize(("seed", "scale"), CASES)
def test_columns_and_csv_layout(seed: int, scale: float) -> None:
    texts = texts_for(seed, scale)
    assert set(texts) == set(CSV_FILES)
    for key, text in texts.items():
        assert not text.endswith("\n"), key
        assert "\r" not in text, key
        first_row = next(csv.reader(io.StringIO(text)))
        if key == DIRECTORY:
            assert len(first_row) == 1
            assert "@" in first_row[0]  # no header row
        else:
            assert tuple(first_row) == COLUMNS[key]
        assert tuple(raw_frames(seed, scale)[key].columns) == COLUMNS[key]


@pytest.mark.parametrize(("seed", "scale"), CASES)
def test_base_tables_accept_the_output_and_write_it_back_identically(
    seed: int, scale: float
) -> None:
    texts = texts_for(seed, scale)
    tables = BaseTables.from_csv_texts(texts, origin="test")
    assert tables.frames[ANALYTICS]["user_engaged"].dtype == bool
    assert len(tables.frames[PLOTS]) == 0
    assert tables.to_csv_texts() == texts  # what pandas writes is byte for byte what we wrote


def test_generate_sandbox() -> None:
    tables = gen.generate_sandbox(7, 1.0)
    assert tables.origin == "generated:seed=7,scale=1.0"
    assert tables.to_csv_texts() == texts_for(7, 1.0)
    crm = tables.frames[CRM]
    assert crm["customer_phone"].isna().any()  # empty cells load as NaN, as in WorkBench
    assert crm["notes"].isna().any()


@pytest.mark.parametrize("scale", [1.0, 4.0])
def test_row_counts(scale: float) -> None:
    frames = raw_frames(3 if scale == 4.0 else 0, scale)
    base = {EMAILS: 500, CALENDAR: 300, ANALYTICS: 1000, TASKS: 300, CRM: 200}
    for key, rows in base.items():
        assert len(frames[key]) == round(rows * scale), key
    assert len(frames[DIRECTORY]) == (20 if scale == 1.0 else 40)
    assert gen.row_counts(scale) == {k: len(f) for k, f in frames.items()}


def test_tiny_scale_still_has_a_row_per_table() -> None:
    tables = gen.generate_sandbox(1, 0.001)
    for key in FILE_KEYS:
        assert len(tables.frames[key]) >= 1, key


@pytest.mark.parametrize("bad", [0, -1, 0.0, math.nan, math.inf, gen.MAX_SCALE * 2, True, "1"])
def test_bad_scale_is_refused(bad: object) -> None:
    with pytest.raises(ValueError):
        gen.generate_csv_texts(0, bad)  # type: ignore[arg-type]


def test_bad_seed_is_refused() -> None:
    with pytest.raises(ValueError):
        gen.generate_csv_texts(1.5, 1.0)  # type: ignore[arg-type]


@pytest.mark.parametrize(("seed", "scale"), CASES)
def test_ids_are_shuffled_unique_eight_digit_permutations(seed: int, scale: float) -> None:
    frames = raw_frames(seed, scale)
    for key, column in ((EMAILS, "email_id"), (CALENDAR, "event_id"), (TASKS, "task_id")):
        ids = frames[key][column]
        assert ids.str.fullmatch(r"\d{8}").all(), key
        assert sorted(ids) == [f"{i:08d}" for i in range(len(ids))], key
        assert ids.tolist() != sorted(ids), key  # shuffled, like WorkBench's files
    ids = frames[CRM]["customer_id"]
    assert sorted(ids) == [f"{i:08d}" for i in range(len(ids))]


@pytest.mark.parametrize(("seed", "scale"), CASES)
def test_values_have_workbench_shapes(seed: int, scale: float) -> None:
    frames = raw_frames(seed, scale)
    for (key, column), pattern in PATTERNS.items():
        bad = _full_match(pattern, frames[key][column])
        assert not bad, f"{key}.{column}: {bad[:3]}"


@pytest.mark.parametrize(("seed", "scale"), CASES)
def test_vocabularies_are_subsets_of_workbench(seed: int, scale: float) -> None:
    frames = raw_frames(seed, scale)
    for (key, column), vocabulary in REAL_VOCABULARIES.items():
        used = set(frames[key][column])
        assert used <= vocabulary, (key, column, used - vocabulary)
    assert set(frames[TASKS]["list_name"]) == REAL_VOCABULARIES[(TASKS, "list_name")]
    assert set(frames[CRM]["status"]) == REAL_VOCABULARIES[(CRM, "status")]
    assert (
        set(frames[ANALYTICS]["traffic_source"]) == REAL_VOCABULARIES[(ANALYTICS, "traffic_source")]
    )


# --------------------------------------------------------------------------------------------------
# Dates and times


def _times(values: pd.Series) -> list[datetime]:
    return [datetime.strptime(v, "%Y-%m-%d %H:%M:%S") for v in values]


def _days(values: pd.Series) -> list[date]:
    return [datetime.strptime(v, "%Y-%m-%d").date() for v in values]


@pytest.mark.parametrize(("seed", "scale"), CASES)
def test_dates_parse_and_sit_around_now(seed: int, scale: float) -> None:
    frames = raw_frames(seed, scale)
    now = gen.NOW

    sent = _times(frames[EMAILS]["sent_datetime"])
    assert sent == sorted(sent)
    assert len(set(sent)) == len(sent)
    assert datetime(2023, 10, 1) <= min(sent) and max(sent) < now
    assert all(9 <= t.hour < 16 for t in sent)

    visits = _days(frames[ANALYTICS]["date_of_visit"])
    assert min(visits) >= date(2023, 9, 1) and max(visits) <= now.date()

    due = _days(frames[TASKS]["due_date"])
    assert due == sorted(due)
    assert date(2023, 11, 27) <= min(due) and max(due) <= date(2023, 12, 13)
    assert min(due) < now.date() < max(due)

    crm = frames[CRM]
    contact = _times(crm["last_contact_date"])
    follow_up = _times(crm["follow_up_by"])
    assert contact == sorted(contact, reverse=True)
    assert datetime(2023, 10, 1) <= min(contact) and max(contact) <= now
    for c, f, notes in zip(contact, follow_up, crm["notes"], strict=True):
        assert timedelta(days=7) <= f - c <= timedelta(days=30)
        for day in re.findall(r"\d{4}-\d\d-\d\d", notes):
            assert date(2023, 10, 1) <= datetime.strptime(day, "%Y-%m-%d").date() <= c.date()


@pytest.mark.parametrize(("seed", "scale"), CASES)
def test_calendar_is_a_working_day_schedule_around_now(seed: int, scale: float) -> None:
    events = raw_frames(seed, scale)[CALENDAR]
    starts = _times(events["event_start"])
    ends = [s + timedelta(minutes=int(d)) for s, d in zip(starts, events["duration"], strict=True)]
    assert starts == sorted(starts)
    assert len(set(starts)) == len(starts)
    for start, end in zip(starts, ends, strict=True):
        assert start.weekday() < 5
        assert start.minute in (0, 30) and start.second == 0
        assert start.hour >= 9 and end <= start.replace(hour=18, minute=0)
    assert all(end <= nxt for end, nxt in zip(ends, starts[1:], strict=False))  # no overlaps
    before = sum(s <= gen.NOW for s in starts)
    assert 0.7 * len(starts) <= before < len(starts)
    if scale == 1.0:
        assert datetime(2023, 8, 1) <= starts[0] and starts[-1] < datetime(2023, 12, 22)


# --------------------------------------------------------------------------------------------------
# The world: people, references, unambiguous names


@pytest.mark.parametrize(("seed", "scale"), CASES)
def test_people_come_from_the_directory(seed: int, scale: float) -> None:
    frames = raw_frames(seed, scale)
    directory = frames[DIRECTORY]["email_address"].tolist()
    assert len(set(directory)) == len(directory)
    staff = set(directory)
    assert set(frames[EMAILS]["sender/recipient"]) <= staff
    assert set(frames[CALENDAR]["participant_email"]) <= staff
    assert set(frames[TASKS]["assigned_to_email"]) <= staff
    sales = set(frames[CRM]["assigned_to_email"])
    assert sales <= staff
    assert not sales & set(frames[TASKS]["assigned_to_email"])
    assert not any("sam" in address.split("@")[0] for address in directory)
    # A first name finds exactly one address (the directory tool matches substrings).
    for address in directory:
        first = address.split(".")[0]
        assert [a for a in directory if first in a] == [address]


@pytest.mark.parametrize(("seed", "scale"), CASES)
def test_emails_are_to_sam_and_signed_by_their_sender(seed: int, scale: float) -> None:
    emails = raw_frames(seed, scale)[EMAILS]
    tasks = raw_frames(seed, scale)[TASKS]
    events = raw_frames(seed, scale)[CALENDAR]
    task_pairs = set(zip(tasks["task_name"], tasks["assigned_to_email"], strict=True))
    event_pairs = set(zip(events["event_name"], events["participant_email"], strict=True))
    assert set(emails["inbox/outbox"]) == {"inbox"}
    for sender, subject, body in zip(
        emails["sender/recipient"], emails["subject"], emails["body"], strict=True
    ):
        assert "\n" not in body and "\\n\\n" in body  # literal backslash-n, as in WorkBench
        assert body.endswith("\\n" + sender.split(".")[0].capitalize())
        if subject.startswith("Task Update on "):
            assert (subject.removeprefix("Task Update on "), sender) in task_pairs
        else:
            assert (subject.removeprefix("Update on "), sender) in event_pairs
    sent_days = [v[:10] for v in emails["sent_datetime"]]
    keys = list(zip(emails["sender/recipient"], emails["subject"], sent_days, strict=True))
    assert len(set(keys)) == len(keys)


def _substring_pairs(names: list[str]) -> list[tuple[str, str]]:
    lowered = sorted({n.lower() for n in names})
    return [(a, b) for a in lowered for b in lowered if a != b and a in b]


@pytest.mark.parametrize(("seed", "scale"), CASES)
def test_names_do_not_make_lookups_ambiguous(seed: int, scale: float) -> None:
    frames = raw_frames(seed, scale)
    tasks, events, crm = frames[TASKS], frames[CALENDAR], frames[CRM]
    assert not tasks.duplicated(["task_name", "assigned_to_email"]).any()
    assert tasks.groupby("assigned_to_email")["board"].nunique().max() == 1
    assert not _substring_pairs(tasks["task_name"].tolist())
    assert not _substring_pairs(events["event_name"].tolist())
    days = events["event_start"].str[:10]
    assert not events.assign(day=days).duplicated(["event_name", "day"]).any()
    assert not events.duplicated(["event_name", "participant_email", "event_start"]).any()
    assert crm["customer_name"].is_unique and crm["customer_email"].is_unique
    assert not _substring_pairs(crm["customer_name"].tolist())
    local_parts = crm["customer_email"].str.split("@").str[0]
    assert (local_parts == crm["customer_name"].str.lower().str.replace(" ", ".")).all()


def test_crm_has_empty_phones_and_notes_and_boards_are_even() -> None:
    frames = raw_frames(0, 1.0)
    crm = frames[CRM]
    assert 0.3 < (crm["customer_phone"] == "").mean() < 0.7
    assert 0.05 < (crm["notes"] == "").mean() < 0.4
    assert crm["notes"].str.endswith(". ").sum() == (crm["notes"] != "").sum()
    assert frames[TASKS]["board"].value_counts().tolist() == [100, 100, 100]


def test_task_name_pools_cover_the_largest_scale() -> None:
    counts = gen.row_counts(gen.MAX_SCALE)
    engineers = counts[DIRECTORY] - counts[DIRECTORY] // 4
    per_board = math.ceil(counts[TASKS] / 3)
    for board, pool in gen._task_name_pools().items():
        assert len(pool) * (engineers // 3) >= per_board, board


# --------------------------------------------------------------------------------------------------
# Against the real WorkBench CSVs


@cache
def real_frames() -> dict[str, pd.DataFrame]:
    texts = {key: (WORKBENCH / name).read_text(encoding="utf-8") for key, name in CSV_FILES.items()}
    return _read_all(texts)


@needs_shared
def test_real_csvs_share_the_layout() -> None:
    generated = texts_for(0, 1.0)
    for key, name in CSV_FILES.items():
        real = (WORKBENCH / name).read_text(encoding="utf-8")
        assert not real.endswith("\n"), name
        if key != DIRECTORY:
            assert real.split("\n", 1)[0] == generated[key].split("\n", 1)[0], name
        assert len(real_frames()[key]) == len(raw_frames(0, 1.0)[key]), name


@needs_shared
def test_real_csvs_match_the_same_value_shapes() -> None:
    real = real_frames()
    for (key, column), pattern in PATTERNS.items():
        bad = _full_match(pattern, real[key][column])
        assert not bad, f"real {key}.{column} breaks the pattern: {bad[:3]}"


@needs_shared
def test_generated_vocabularies_are_within_the_real_ones() -> None:
    real = real_frames()
    generated = raw_frames(0, 1.0)
    for (key, column), vocabulary in REAL_VOCABULARIES.items():
        real_values = set(real[key][column])
        assert real_values <= vocabulary, (key, column)  # our constants are WorkBench's spelling
        assert set(generated[key][column]) <= real_values, (key, column)
    note_phrases = set(re.findall(r"\d: ([^.]+\.) ", " ".join(real[CRM]["notes"])))
    assert set(gen.NOTE_PHRASES) == note_phrases
    for frame in (real, generated):  # both have some empty phones and notes
        assert (frame[CRM]["customer_phone"] == "").any()
        assert (frame[CRM]["notes"] == "").any()


@needs_shared
def test_generated_date_windows_sit_within_the_real_ones() -> None:
    real, generated = real_frames(), raw_frames(0, 1.0)
    windows = [
        (EMAILS, "sent_datetime", 10),
        (CALENDAR, "event_start", 10),
        (ANALYTICS, "date_of_visit", 10),
        (TASKS, "due_date", 10),
        (CRM, "last_contact_date", 10),
    ]
    for key, column, width in windows:
        real_days = real[key][column].str[:width]
        ours = generated[key][column].str[:width]
        assert real_days.min() <= ours.min() and ours.max() <= real_days.max(), (key, column)
    assert generated[ANALYTICS]["date_of_visit"].min() == real[ANALYTICS]["date_of_visit"].min()
    assert generated[ANALYTICS]["date_of_visit"].max() == real[ANALYTICS]["date_of_visit"].max()
