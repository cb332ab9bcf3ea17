"""Multi-domain templates: read one toolkit, act in another (WorkBench's largest category).

Most are conditional: the condition is read off the sandbox, and when it is false the right
answer is to change nothing (or, for "otherwise" templates, the other branch).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from random import Random

from workplace_env.taskgen.analytics import MetricCondition, metric_condition, since_day
from workplace_env.taskgen.base import MULTI_CATEGORY, Call, Draft, call, pick, quoted, template
from workplace_env.taskgen.calendar import create_event
from workplace_env.taskgen.crm import delete, rep_name
from workplace_env.taskgen.project import BOARD_WORDS, create, late_person, overdue, tasks_of
from workplace_env.taskgen.world import (
    BOARDS,
    TODAY,
    TOMORROW,
    Person,
    World,
    nl_date,
    nl_minutes,
    nl_time,
    ymd,
)


def send(person: str, subject: str, body: str) -> Call:
    """The ``email_send_email`` call."""
    return call("email_send_email", recipient=person, subject=subject, body=body)


def meeting_tomorrow(world: World, name: str, who: str) -> Call | None:
    """A half-hour ``name`` meeting with ``who`` at my first free slot tomorrow, or None."""
    start = world.first_free(TOMORROW, 30)
    if start is None:
        return None
    return create_event(name, who, start, 30)


def _counts(world: World, rule: str, due_today_overdue: bool = False) -> dict[str, int]:
    """Tasks per assignee: ``rule`` is ``"overdue"`` or a list name."""
    counts: dict[str, int] = {}
    for t in world.tasks:
        if rule == "overdue":
            due = t.due <= TODAY if due_today_overdue else t.due < TODAY
            hit = t.list_name != "Completed" and due
        else:
            hit = t.list_name == rule
        if hit:
            counts[t.assignee] = counts.get(t.assignee, 0) + 1
    return counts


def _top(counts: dict[str, int]) -> str | None:
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    if not ranked or (len(ranked) > 1 and ranked[0][1] == ranked[1][1]):
        return None
    return ranked[0][0]


_TOP_RULES = {
    "overdue": "overdue tasks",
    "In Review": "tasks in review",
    "In Progress": "tasks in progress",
    "Completed": "completed tasks",
    "Backlog": "tasks in the backlog",
}
_TOP_MAILS = {
    "overdue": (
        ("Overdue tasks", "You have a few overdue tasks - can you update me on them?"),
        ("Catching up on your tasks", "Let me know if you need help with your overdue tasks."),
    ),
    "In Review": (
        ("Reviews", "You have a lot waiting for review - shall I find you a reviewer?"),
        ("Review queue", "Let me know if your review queue needs attention."),
    ),
    "In Progress": (
        ("Work in progress", "You have a lot in progress - let me know if you need help."),
        ("Workload", "Can we talk about your workload this week?"),
    ),
    "Completed": (
        ("Great work", "Thanks for getting so much done this sprint!"),
        ("Thank you", "Nice work on all the tasks you completed."),
    ),
    "Backlog": (
        ("Your backlog", "Let's go through your backlog together this week."),
        ("Planning", "Can you pick the top items from your backlog for next sprint?"),
    ),
}


@template("multi_email_top_assignee", MULTI_CATEGORY)
def email_top_assignee(world: World, rng: Random) -> Draft | None:
    """Email the person with the most overdue (or in review, completed, ...) tasks."""
    rule = rng.choice(tuple(_TOP_RULES))
    top = _top(_counts(world, rule))
    if top is None or (rule == "overdue" and top != _top(_counts(world, rule, True))):
        return None  # a tie, or an answer that depends on whether today's due dates count
    subject, body = rng.choice(_TOP_MAILS[rule])
    what = _TOP_RULES[rule]
    prompt = rng.choice(
        (
            f"Send an email to the person with the most {what}. Title it {quoted(subject)} and "
            f"say {quoted(body)}",
            f"Can you find who has the most {what} and email them {quoted(body)} with the "
            f"subject {quoted(subject)}?",
        )
    )
    return Draft(prompt, [send(top, subject, body)])


@template("multi_meeting_tomorrow_email", MULTI_CATEGORY)
def meeting_tomorrow_email(world: World, rng: Random) -> Draft | None:
    """If a colleague has a meeting with me tomorrow, email them; otherwise do nothing."""
    person = pick(rng, world.participants)
    if person is None:
        return None
    meets = any(e.participant == person.email for e in world.events_on(TOMORROW))
    subject, body = "Tomorrow's meeting", "Looking forward to our meeting tomorrow."
    prompt = rng.choice(
        (
            f"If {person.name} has a meeting with me tomorrow, send them an email titled "
            f"{quoted(subject)} saying {quoted(body)}",
            f"Do I have a meeting with {person.name} tomorrow? If so, email them with the subject "
            f"{quoted(subject)} and the body {quoted(body)}",
        )
    )
    return Draft(prompt, [send(person.email, subject, body)] if meets else [])


@template("multi_overdue_email_else", MULTI_CATEGORY)
def overdue_email_else(world: World, rng: Random) -> Draft | None:
    """Email a colleague about their overdue tasks, or praise them if they have none."""
    found = late_person(world, rng)
    if found is None:
        return None
    person, late = found
    prompt = rng.choice(
        (
            f"If {person.name} has any overdue tasks, send them an email titled 'Overdue tasks' "
            "saying 'You have a few overdue tasks - can you update me on them?'. Otherwise email "
            "them with 'Nice work keeping on top of your tasks this sprint!' titled 'Good work "
            "this sprint'",
            f"I think {person.name} might have some overdue tasks. Can you check and if so, send "
            "them an email titled 'Overdue tasks' saying 'You have a few overdue tasks - can you "
            "update me on them?'. Otherwise email them with 'Nice work keeping on top of your "
            "tasks this sprint!' titled 'Good work this sprint'",
        )
    )
    if late:
        mail = send(
            person.email,
            "Overdue tasks",
            "You have a few overdue tasks - can you update me on them?",
        )
    else:
        mail = send(
            person.email,
            "Good work this sprint",
            "Nice work keeping on top of your tasks this sprint!",
        )
    return Draft(prompt, [mail])


@template("multi_overdue_meeting", MULTI_CATEGORY)
def overdue_meeting(world: World, rng: Random) -> Draft | None:
    """If a colleague has overdue tasks, book a catch-up at my first free slot tomorrow."""
    person = pick(rng, world.task_people)
    if person is None:
        return None
    late = overdue(tasks_of(world, person))
    meeting = meeting_tomorrow(world, "Catch up on overdue tasks", person.email)
    if late is None or meeting is None:
        return None
    prompt = rng.choice(
        (
            f"can you check if {person.name} has any overdue tasks? If so, book a 30-minute "
            "meeting with them called 'Catch up on overdue tasks' at the earliest time I'm free "
            "tomorrow",
            f"If {person.name} has any overdue tasks, book a half-hour meeting with them called "
            "'Catch up on overdue tasks' at my first free slot tomorrow",
        )
    )
    return Draft(prompt, [meeting] if late else [])


def _metric_and(
    world: World, rng: Random, people: Sequence[Person]
) -> tuple[MetricCondition, Person] | None:
    """A :class:`MetricCondition` and one of ``people`` (the start day, the person, the rest)."""
    since, person = since_day(world, rng), pick(rng, people)
    if since is None or person is None:
        return None
    cond = metric_condition(world, rng, since)
    return None if cond is None else (cond, person)


@template("multi_metric_task", MULTI_CATEGORY)
def metric_task(world: World, rng: Random) -> Draft | None:
    """If a metric crossed a threshold since a date, create a backlog task for a colleague."""
    drawn = _metric_and(world, rng, world.task_people)
    if drawn is None:
        return None
    cond, person = drawn
    board = rng.choice(BOARDS)
    due = TODAY + timedelta(days=rng.randint(1, 14))
    prompt = (
        f"If {cond.clause}, make a backlog task called 'Improve {cond.name}' for {person.name} on "
        f"the {BOARD_WORDS[board]} board with a deadline of {nl_date(due)}"
    )
    task = create(f"Improve {cond.name}", person.email, "Backlog", ymd(due), board)
    return Draft(prompt, [task] if cond.holds else [])


@template("multi_metric_meeting", MULTI_CATEGORY)
def metric_meeting(world: World, rng: Random) -> Draft | None:
    """If a metric crossed a threshold since a date, book a meeting about it tomorrow."""
    drawn = _metric_and(world, rng, world.people)
    if drawn is None:
        return None
    cond, person = drawn
    meeting = meeting_tomorrow(world, f"Discuss {cond.name}", person.email)
    if meeting is None:
        return None
    prompt = (
        f"If {cond.clause}, schedule a half-hour meeting called 'Discuss {cond.name}' with "
        f"{person.name} at the earliest time I'm free tomorrow"
    )
    return Draft(prompt, [meeting] if cond.holds else [])


@template("multi_metric_delete_leads", MULTI_CATEGORY)
def metric_delete_leads(world: World, rng: Random) -> Draft | None:
    """If a metric crossed a threshold since a date, delete a sales rep's leads."""
    drawn = _metric_and(world, rng, world.reps)
    if drawn is None:
        return None
    cond, rep = drawn
    leads = [c for c in world.customers if c.rep == rep.email and c.status == "Lead"]
    prompt = f"If {cond.clause}, delete all {rep_name(rep)}'s leads in the CRM"
    return Draft(prompt, [delete(c) for c in leads] if cond.holds else [])


@template("multi_customer_not_contacted", MULTI_CATEGORY)
def customer_not_contacted(world: World, rng: Random) -> Draft | None:
    """If we haven't spoken to a customer in N days, book a meeting with their rep tomorrow."""
    customer = pick(rng, world.named_customers)
    if customer is None:
        return None
    days = rng.choice((7, 10, 14, 21, 30))
    boundary = TODAY - timedelta(days=days)
    if customer.last_contact == boundary:
        return None
    name = f"Update on {customer.name}"
    meeting = meeting_tomorrow(world, name, customer.rep)
    if meeting is None:
        return None
    prompt = (
        f"If we haven't spoken to {customer.name} in the past {days} days, book a 30-minute "
        f"meeting with whoever is assigned to them called {quoted(name)} at the first time I'm "
        "free tomorrow"
    )
    return Draft(prompt, [meeting] if customer.last_contact < boundary else [])


@template("multi_first_event_email", MULTI_CATEGORY)
def first_event_email(world: World, rng: Random) -> Draft | None:
    """Email the attendee of the first event on a day, titled with the event's name."""
    day = pick(rng, [d for d in world.future_days() if (d - TODAY).days <= 21])
    if day is None:
        return None
    event = world.events_on(day)[0]
    body = "Remember to attend this event."
    prompt = (
        f"Send an email to the attendee of the first event on {nl_date(day)}. Title it with the "
        f"event name and tell them {quoted(body)}"
    )
    return Draft(prompt, [send(event.participant, event.name, body)])


@template("multi_email_sender_meeting", MULTI_CATEGORY)
def email_sender_meeting(world: World, rng: Random) -> Draft | None:
    """Find an email by date and subject and book a meeting with its sender."""
    mail = pick(rng, world.mails)
    if mail is None:
        return None
    same = [m for m in world.about(mail.subject) if m.sent.date() == mail.sent.date()]
    if len(same) != 1:
        return None
    day = TOMORROW + timedelta(days=rng.randint(0, 20))
    minutes = rng.choice((30, 60, 90))
    start = pick(rng, world.free_starts(day, minutes)) if day.weekday() < 5 else None
    if start is None:
        return None
    prompt = (
        f"Find the email from {nl_date(mail.sent.date())} about {quoted(mail.subject)} and "
        f"schedule a {nl_minutes(minutes)} meeting called {quoted(mail.subject)} at "
        f"{nl_time(start)} with the sender for {nl_date(day)}."
    )
    return Draft(prompt, [create_event(mail.subject, mail.sender, start, minutes)])


def _met_within(world: World, person: Person, days: int) -> bool | None:
    """Whether I met ``person`` in the last ``days`` days; None when the boundary day decides."""
    boundary = TODAY - timedelta(days=days)
    met_days = [e.start.date() for e in world.events if e.participant == person.email]
    if boundary in met_days:
        return None
    return any(boundary < d <= TODAY for d in met_days)


@template("multi_not_met_email", MULTI_CATEGORY)
def not_met_email(world: World, rng: Random) -> Draft | None:
    """If I haven't met a colleague in the past N days, email them to catch up."""
    person = pick(rng, world.people)
    if person is None:
        return None
    days = rng.randint(3, 20)
    met = _met_within(world, person, days)
    if met is None:
        return None
    subject = "Catch up soon?"
    body = "We haven't caught up in a while - can you send some availability over next week?"
    prompt = (
        f"If I haven't met with {person.name} in the past {days} days, send them an email titled "
        f"{quoted(subject)} saying {quoted(body)}"
    )
    return Draft(prompt, [] if met else [send(person.email, subject, body)])


@template("multi_no_upcoming_email", MULTI_CATEGORY)
def no_upcoming_email(world: World, rng: Random) -> Draft | None:
    """If I have no meetings with a colleague in the next N days, email them."""
    person = pick(rng, world.people)
    if person is None:
        return None
    days = rng.randint(2, 14)
    upcoming = [
        e.start.date()
        for e in world.events
        if e.participant == person.email and e.start.date() > TODAY
    ]
    if TODAY + timedelta(days=days) in upcoming:
        return None  # whether that day is within "the next N days" depends on reading
    scheduled = any(d < TODAY + timedelta(days=days) for d in upcoming)
    subject = "Catch up soon?"
    body = "We have not caught up in a while - can you send some availability over next week?"
    prompt = (
        f"If I don't have any meetings scheduled with {person.name} in the next {days} days, "
        f"send them an email titled {quoted(subject)} saying {quoted(body)}"
    )
    return Draft(prompt, [] if scheduled else [send(person.email, subject, body)])
