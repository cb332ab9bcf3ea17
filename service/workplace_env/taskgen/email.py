"""Email templates: reply, forward, delete and send, modelled on WorkBench's email queries."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from random import Random

from workplace_env.taskgen.base import EMAIL_CATEGORY, Call, Draft, call, pick, quoted, template
from workplace_env.taskgen.world import TODAY, Mail, Person, World, nl_date

REPLY_BODIES = (
    "Got it, thank you!",
    "Thanks for the update - I will get back to you tomorrow.",
    "Thanks, I'll take a look today.",
    "Sounds good, let's discuss at our next meeting.",
    "Great work, thanks for letting me know.",
)
SEND_SUBJECTS = (
    "Quick question",
    "Team lunch on Friday",
    "Quarterly goals",
    "Feedback on the last sprint",
    "Budget for next quarter",
    "Office move",
    "Holiday schedule",
    "Onboarding plan",
)
SEND_BODIES = (
    "Can we find some time to talk this week?",
    "Please send me your availability for next week.",
    "Thanks for all your help this quarter.",
    "Let me know if you have any questions.",
    "Could you share the latest numbers before Monday?",
    "I'd like to hear your thoughts when you have a moment.",
)


def _reply(rng: Random, mail: Mail, phrasings: Callable[[str], tuple[str, ...]]) -> Draft:
    """A reply to ``mail``: a drawn body, then one of ``phrasings(quoted body)``."""
    body = rng.choice(REPLY_BODIES)
    prompt = rng.choice(phrasings(quoted(body)))
    return Draft(prompt, [call("email_reply_email", email_id=mail.id, body=body)])


def _delete(mail: Mail) -> Call:
    """The ``email_delete_email`` call for ``mail``."""
    return call("email_delete_email", email_id=mail.id)


def _forward(mail: Mail, person: Person) -> Call:
    """The ``email_forward_email`` call sending ``mail`` on to ``person``."""
    return call("email_forward_email", email_id=mail.id, recipient=person.email)


@template("email_reply_latest_from", EMAIL_CATEGORY)
def reply_latest_from(world: World, rng: Random) -> Draft | None:
    """Reply to the latest email from a colleague with a given text."""
    person = pick(rng, world.senders)
    if person is None:
        return None
    latest = world.latest(world.mails_from(person.email))
    if latest is None:
        return None
    return _reply(
        rng,
        latest,
        lambda body: (
            f"Reply to the latest email from {person.name} with {body}",
            f"can you reply to the latest email from {person.name} with {body}",
            f"Please answer {person.name}'s most recent email with {body}",
        ),
    )


@template("email_reply_about_subject", EMAIL_CATEGORY)
def reply_about_subject(world: World, rng: Random) -> Draft | None:
    """Reply to a colleague's last email about a subject."""
    person = pick(rng, world.senders)
    if person is None:
        return None
    mails = world.mails_from(person.email)
    subject = rng.choice(mails).subject
    latest = world.latest([m for m in world.about(subject) if m.sender == person.email])
    if latest is None:
        return None
    return _reply(
        rng,
        latest,
        lambda body: (
            f"Reply to {person.name}'s last email about {quoted(subject)} with {body}",
            f"I need to get back to {person.name}'s last email about {quoted(subject)} with "
            f"{body}. Can you send the reply for me?",
        ),
    )


@template("email_forward_latest_from", EMAIL_CATEGORY)
def forward_latest_from(world: World, rng: Random) -> Draft | None:
    """Forward my most recent email from one colleague to another."""
    sender = pick(rng, world.senders)
    if sender is None:
        return None
    recipient = pick(rng, world.others(world.people, sender))
    if recipient is None:
        return None
    latest = world.latest(world.mails_from(sender.email))
    if latest is None:
        return None
    prompt = rng.choice(
        (
            f"Forward my most recent email from {sender.name} to {recipient.name}",
            f"{recipient.name} needs my most recent email from {sender.name}. Can you forward it?",
        )
    )
    return Draft(prompt, [_forward(latest, recipient)])


@template("email_forward_about_to_two", EMAIL_CATEGORY)
def forward_about_to_two(world: World, rng: Random) -> Draft | None:
    """Forward the last email about a subject to two colleagues."""
    if not world.mails:
        return None
    subject = rng.choice(world.mails).subject
    latest = world.latest(world.about(subject))
    if latest is None:
        return None
    candidates = world.others(world.people, latest.sender)
    if len(candidates) < 2:
        return None
    first, second = rng.sample(candidates, 2)
    prompt = rng.choice(
        (
            f"Forward the last email about {quoted(subject)} to {first.name} and {second.name}",
            f"can you forward the latest email about {quoted(subject)} to {first.name} and "
            f"{second.name}?",
        )
    )
    return Draft(prompt, [_forward(latest, first), _forward(latest, second)])


@template("email_delete_last_from", EMAIL_CATEGORY)
def delete_last_from(world: World, rng: Random) -> Draft | None:
    """Delete my last email from a colleague."""
    person = pick(rng, world.senders)
    if person is None:
        return None
    latest = world.latest(world.mails_from(person.email))
    if latest is None:
        return None
    prompt = rng.choice(
        (
            f"Delete my last email from {person.name}",
            f"{person.name} just sent me an email that I need to delete. Can you get rid of the "
            "most recent email they sent me?",
        )
    )
    return Draft(prompt, [_delete(latest)])


@template("email_delete_from_last_days", EMAIL_CATEGORY)
def delete_from_last_days(world: World, rng: Random) -> Draft | None:
    """Delete all my emails from a colleague from the last N days (may be none)."""
    person = pick(rng, world.senders)
    if person is None:
        return None
    days = rng.randint(2, 14)
    boundary = TODAY - timedelta(days=days)
    mails = world.mails_from(person.email)
    # "The last N days" may or may not include the day N days ago: keep that day empty.
    if any(m.sent.date() == boundary for m in mails):
        return None
    recent = [m for m in mails if m.sent.date() > boundary]
    prompt = rng.choice(
        (
            f"Delete all my emails from {person.name} from the last {days} days",
            f"I need to get rid of all my emails from {person.name} from the last {days} days. "
            "Can you delete them?",
        )
    )
    return Draft(prompt, [_delete(m) for m in recent])


@template("email_delete_about_subject", EMAIL_CATEGORY)
def delete_about_subject(world: World, rng: Random) -> Draft | None:
    """Delete every email whose subject is a given one."""
    if not world.mails:
        return None
    subject = rng.choice(world.mails).subject
    hits = world.about(subject)
    if not hits or len(hits) > 6:
        return None
    prompt = rng.choice(
        (
            f"Delete all emails with the subject {quoted(subject)}",
            f"I don't need the emails titled {quoted(subject)} anymore. Can you delete all of "
            "them?",
        )
    )
    return Draft(prompt, [_delete(m) for m in hits])


@template("email_send", EMAIL_CATEGORY)
def send(world: World, rng: Random) -> Draft | None:
    """Send an email to a colleague with a given subject and body."""
    person = pick(rng, world.people)
    if person is None:
        return None
    subject, body = rng.choice(SEND_SUBJECTS), rng.choice(SEND_BODIES)
    prompt = rng.choice(
        (
            f"Send an email to {person.name} saying {quoted(body)} and title it {quoted(subject)}",
            f"I need to send an email to {person.name} saying {quoted(body)} and title it "
            f"{quoted(subject)}. Can you do that?",
            f"please email {person.name} with the subject {quoted(subject)} and the body "
            f"{quoted(body)}",
        )
    )
    return Draft(
        prompt, [call("email_send_email", recipient=person.email, subject=subject, body=body)]
    )


@template("email_count_question", EMAIL_CATEGORY)
def count_question(world: World, rng: Random) -> Draft | None:
    """A question answered by reading: how many emails a colleague sent since a date."""
    person = pick(rng, world.senders)
    if person is None:
        return None
    since = TODAY - timedelta(days=rng.randint(3, 30))
    prompt = rng.choice(
        (
            f"How many emails has {person.name} sent me since {nl_date(since)}?",
            f"what was the subject of the last email {person.name} sent me?",
        )
    )
    return Draft(prompt, [])
