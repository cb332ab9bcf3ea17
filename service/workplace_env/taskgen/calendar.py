"""Calendar templates: create at a free slot, cancel, rename and reschedule events.

Working hours are 09:00-18:00 (the system message); "next" and "future" mean after
2023-11-30 23:59:00. Event names in prompts are names a search picks out exactly.
"""

from __future__ import annotations

from datetime import datetime, time, timedelta
from random import Random

from workplace_env.taskgen.base import CALENDAR_CATEGORY, Call, Draft, call, pick, quoted, template
from workplace_env.taskgen.world import (
    DAY_END,
    TODAY,
    TOMORROW,
    Event,
    Person,
    World,
    nl_date,
    nl_minutes,
    nl_time,
    stamp,
)

NEW_EVENT_NAMES = (
    "Project sync",
    "Budget review",
    "Design critique",
    "Hiring sync",
    "Roadmap planning",
    "Quarterly check-in",
    "Customer debrief",
    "Launch planning",
    "Marketing sync",
    "Team retro",
    "Vendor review",
    "Strategy session",
)
_SHIFTS = {30: "30 minutes", 60: "an hour", 90: "1.5 hours", 120: "2 hours"}


def _next_event(events: list[Event]) -> Event | None:
    """The first future event of ``events`` (sorted by start)."""
    return next((e for e in events if e.start.date() > TODAY), None)


def _future_event_days(world: World, horizon: int = 21) -> list:
    """Days after today, within ``horizon`` days, that have events."""
    return [d for d in world.future_days() if (d - TODAY).days <= horizon]


def _next_named(world: World, name: str) -> Event | None:
    """The next future occurrence of the event called ``name`` (any case)."""
    return _next_event([e for e in world.events if e.name.lower() == name.lower()])


def _delete(event: Event) -> Call:
    """The ``calendar_delete_event`` call for ``event``."""
    return call("calendar_delete_event", event_id=event.id)


def _update(event: Event, field: str, value: str) -> Call:
    """The ``calendar_update_event`` call setting ``field`` of ``event``."""
    return call("calendar_update_event", event_id=event.id, field=field, new_value=value)


def _new_meeting(rng: Random, person: Person, start: datetime, minutes: int) -> tuple[str, Call]:
    """A drawn name for a new meeting with ``person``: the name quoted for the prompt, and the
    ``calendar_create_event`` call."""
    name = rng.choice(NEW_EVENT_NAMES)
    return quoted(name), create_event(name, person.email, start, minutes)


def create_event(name: str, participant: str, start: datetime, minutes: int) -> Call:
    """The ground-truth ``calendar_create_event`` call (arguments in the tool's order)."""
    return call(
        "calendar_create_event",
        event_name=name,
        participant_email=participant,
        event_start=stamp(start),
        duration=str(minutes),
    )


@template("calendar_create_at_time", CALENDAR_CATEGORY)
def create_at_time(world: World, rng: Random) -> Draft | None:
    """Schedule a meeting with a colleague at a given free time on a future day."""
    person = pick(rng, world.people)
    if person is None:
        return None
    day = TOMORROW + timedelta(days=rng.randint(0, 20))
    if day.weekday() >= 5:
        return None
    minutes = rng.choice((30, 60, 90, 120))
    start = pick(rng, world.free_starts(day, minutes))
    if start is None:
        return None
    name, booking = _new_meeting(rng, person, start, minutes)
    length, on, at = nl_minutes(minutes), nl_date(day), nl_time(start)
    prompt = rng.choice(
        (
            f"Schedule a {length} meeting called {name} with {person.name} on {on} at {at}",
            f"I need to catch up with {person.name}. Can you schedule a {length} event called "
            f"{name} on {on} at {at}?",
        )
    )
    return Draft(prompt, [booking])


@template("calendar_create_outside_hours", CALENDAR_CATEGORY)
def create_outside_hours(world: World, rng: Random) -> Draft | None:
    """Ask for a meeting outside 9am-6pm: the right answer is to create nothing."""
    person = pick(rng, world.people)
    if person is None:
        return None
    day = TOMORROW + timedelta(days=rng.randint(0, 20))
    minutes = rng.choice((60, 90, 120))
    if rng.random() < 0.7:  # ends after 6pm
        begin = rng.randrange(18 * 60 - minutes + 30, 18 * 60 + 1, 30)
    else:  # starts before 9am
        begin = rng.randrange(7 * 60, 9 * 60, 30)
    start = datetime.combine(day, time(begin // 60, begin % 60))
    name = rng.choice(NEW_EVENT_NAMES)
    prompt = (
        f"Book a {nl_minutes(minutes)} meeting called {quoted(name)} with {person.name} on "
        f"{nl_date(day)} at {nl_time(start)}"
    )
    return Draft(prompt, [])


@template("calendar_first_free_slot", CALENDAR_CATEGORY)
def first_free_slot(world: World, rng: Random) -> Draft | None:
    """Book a meeting with a colleague at my first free slot tomorrow (or on a given day)."""
    person = pick(rng, world.people)
    if person is None:
        return None
    minutes = rng.choice((30, 30, 60))
    tomorrow = rng.random() < 0.6
    day = TOMORROW if tomorrow else TOMORROW + timedelta(days=rng.randint(1, 20))
    if day.weekday() >= 5:
        return None
    start = world.first_free(day, minutes)
    if start is None:
        return None
    name, booking = _new_meeting(rng, person, start, minutes)
    length, when = nl_minutes(minutes), "tomorrow" if tomorrow else f"on {nl_date(day)}"
    prompt = rng.choice(
        (
            f"Book a {length} meeting with {person.name} called {name} at the earliest time I'm "
            f"free {when}",
            f"can you schedule a {length} meeting called {name} with {person.name} for my first "
            f"free slot {when}?",
        )
    )
    return Draft(prompt, [booking])


@template("calendar_cancel_next_with", CALENDAR_CATEGORY)
def cancel_next_with(world: World, rng: Random) -> Draft | None:
    """Cancel my next meeting with a colleague."""
    person = pick(rng, world.participants)
    if person is None:
        return None
    event = _next_event([e for e in world.events if e.participant == person.email])
    if event is None:
        return None
    prompt = rng.choice(
        (
            f"Cancel my next meeting with {person.name}",
            f"I can't make my next meeting with {person.name}. Can you delete it from my calendar?",
        )
    )
    return Draft(prompt, [_delete(event)])


@template("calendar_cancel_next_named", CALENDAR_CATEGORY)
def cancel_next_named(world: World, rng: Random) -> Draft | None:
    """Cancel the next occurrence of a named meeting."""
    name = pick(rng, world.event_names)
    if name is None:
        return None
    event = _next_named(world, name)
    if event is None:
        return None
    prompt = rng.choice(
        (f"Cancel the next {name} meeting", f"Can you cancel the next {name} meeting?")
    )
    return Draft(prompt, [_delete(event)])


@template("calendar_rename_next", CALENDAR_CATEGORY)
def rename_next(world: World, rng: Random) -> Draft | None:
    """Rename the next occurrence of a named meeting."""
    name = pick(rng, world.event_names)
    if name is None:
        return None
    event = _next_named(world, name)
    new_name = rng.choice(NEW_EVENT_NAMES)
    if event is None or new_name.lower() == event.name.lower():
        return None
    prompt = rng.choice(
        (
            f"Rename the next {name} meeting to {new_name}",
            f"can you change the name of the next {name} meeting to {new_name}?",
        )
    )
    return Draft(prompt, [_update(event, "event_name", new_name)])


def _first_with_on_day(world: World, rng: Random) -> Event | None:
    """A future event that is the first one with its participant on its day."""
    days = _future_event_days(world)
    day = pick(rng, days)
    if day is None:
        return None
    event = rng.choice(world.events_on(day))
    first = next(e for e in world.events_on(day) if e.participant == event.participant)
    if first.participant not in world.person_by_email:
        return None
    return first


@template("calendar_push_back", CALENDAR_CATEGORY)
def push_back(world: World, rng: Random) -> Draft | None:
    """Push back my first meeting with a colleague on a day by some time (ending by 6pm)."""
    event = _first_with_on_day(world, rng)
    if event is None:
        return None
    shift = rng.choice(tuple(_SHIFTS))
    start = event.start + timedelta(minutes=shift)
    if event.end + timedelta(minutes=shift) > datetime.combine(start.date(), DAY_END):
        return None  # the moved meeting would end after 6pm
    person = world.person_by_email[event.participant]
    prompt = (
        f"Push back my first meeting with {person.name} on {nl_date(event.start.date())} by "
        f"{_SHIFTS[shift]}"
    )
    return Draft(prompt, [_update(event, "event_start", stamp(start))])


@template("calendar_reschedule", CALENDAR_CATEGORY)
def reschedule(world: World, rng: Random) -> Draft | None:
    """Move my first meeting with a colleague on a day to another free time that day."""
    event = _first_with_on_day(world, rng)
    if event is None:
        return None
    day = event.start.date()
    start = pick(rng, world.free_starts(day, event.minutes))  # never the event's own slot
    if start is None:
        return None
    person = world.person_by_email[event.participant]
    prompt = rng.choice(
        (
            f"Move my first meeting with {person.name} on {nl_date(day)} to {nl_time(start)}",
            f"Can you reschedule my first meeting with {person.name} on {nl_date(day)} so it "
            f"starts at {nl_time(start)}?",
        )
    )
    return Draft(prompt, [_update(event, "event_start", stamp(start))])


@template("calendar_cancel_first_on_day", CALENDAR_CATEGORY)
def cancel_first_on_day(world: World, rng: Random) -> Draft | None:
    """Cancel my first meeting on a future day."""
    day = pick(rng, _future_event_days(world))
    if day is None:
        return None
    event = world.events_on(day)[0]
    prompt = rng.choice(
        (f"Cancel my first meeting on {nl_date(day)}", f"Delete my first meeting on {nl_date(day)}")
    )
    return Draft(prompt, [_delete(event)])


@template("calendar_cancel_future_with", CALENDAR_CATEGORY)
def cancel_future_with(world: World, rng: Random) -> Draft | None:
    """Cancel all future meetings with a colleague."""
    person = pick(rng, world.participants)
    if person is None:
        return None
    events = [e for e in world.future_events() if e.participant == person.email]
    if not events:
        return None
    prompt = rng.choice(
        (
            f"Cancel all future meetings with {person.name}",
            f"{person.name} is leaving the team. Please remove all my upcoming meetings with them.",
        )
    )
    return Draft(prompt, [_delete(e) for e in events])


@template("calendar_clear_before_after", CALENDAR_CATEGORY)
def clear_before_after(world: World, rng: Random) -> Draft | None:
    """Cancel my meetings on a future day before or after a time."""
    day = pick(rng, _future_event_days(world))
    if day is None:
        return None
    events = world.events_on(day)
    cut = datetime.combine(day, time(rng.randint(10, 16), rng.choice((0, 30))))
    if any(e.start <= cut < e.end for e in events):
        return None  # a meeting across (or starting at) the cut is on both sides on some reading
    before = rng.random() < 0.5
    chosen = [e for e in events if (e.start < cut) == before]
    if not chosen:
        return None
    side = "before" if before else "after"
    prompt = rng.choice(
        (
            f"Cancel my meetings on {nl_date(day)} {side} {nl_time(cut)}",
            f"Could you clear my calendar on {nl_date(day)} {side} {nl_time(cut)}?",
        )
    )
    return Draft(prompt, [_delete(e) for e in chosen])


@template("calendar_rename_last_on_day", CALENDAR_CATEGORY)
def rename_last_on_day(world: World, rng: Random) -> Draft | None:
    """Change the name of the last event on a day (this month or later)."""
    day = pick(rng, [d for d in world.event_days() if d > TODAY - timedelta(days=30)])
    if day is None:
        return None
    event = world.events_on(day)[-1]
    new_name = rng.choice(NEW_EVENT_NAMES)
    if new_name.lower() == event.name.lower():
        return None
    prompt = f"Change the name of the last event on {nl_date(day)} to {new_name}"
    return Draft(prompt, [_update(event, "event_name", new_name)])


@template("calendar_catch_up_if_not_met", CALENDAR_CATEGORY)
def catch_up_if_not_met(world: World, rng: Random) -> Draft | None:
    """If I haven't met a colleague in the last N days, book a catch-up at my first free slot."""
    person = pick(rng, world.people)
    if person is None:
        return None
    days = rng.randint(2, 14)
    boundary = TODAY - timedelta(days=days)
    met_days = [e.start.date() for e in world.events if e.participant == person.email]
    if boundary in met_days:
        return None  # whether that day counts as "the last N days" is ambiguous
    met = any(boundary < d <= TODAY for d in met_days)
    prompt = rng.choice(
        (
            f"If I haven't met with {person.name} in the last {days} days, schedule a 30-minute "
            "meeting called 'catch-up' for my first free slot from tomorrow",
            f"have I met with {person.name} in the last {days} days? If not, schedule a 30-minute "
            "meeting called 'catch-up' for my first free slot from tomorrow",
        )
    )
    if met:
        return Draft(prompt, [])
    start = world.first_free(TOMORROW, 30)
    if start is None:
        return None
    return Draft(prompt, [create_event("catch-up", person.email, start, 30)])


@template("calendar_next_meeting_question", CALENDAR_CATEGORY)
def next_meeting_question(world: World, rng: Random) -> Draft | None:
    """A question answered by reading: when my next meeting with a colleague is."""
    person = pick(rng, world.participants)
    if person is None:
        return None
    prompt = rng.choice(
        (
            f"When is my next meeting with {person.name}?",
            f"How many meetings do I have with {person.name} this month?",
        )
    )
    return Draft(prompt, [])
