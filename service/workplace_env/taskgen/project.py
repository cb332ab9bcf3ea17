"""Project-management templates: move and reassign tasks by rule, create tasks.

A task is *overdue* when it is not completed and its due date is before today (2023-11-30).
Whether a task due today is overdue at 23:59 is a matter of reading, so templates that ask about
overdue tasks skip people who have unfinished tasks due today.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import timedelta
from random import Random

from workplace_env.taskgen.base import PROJECT_CATEGORY, Call, Draft, call, pick, quoted, template
from workplace_env.taskgen.world import (
    BOARDS,
    TODAY,
    Person,
    PmTask,
    World,
    nl_date,
    ymd,
)

_VERBS = ("Write", "Review", "Update", "Plan", "Document", "Test", "Automate", "Audit", "Draft")
_OBJECTS = (
    "release checklist",
    "onboarding guide",
    "API changelog",
    "error dashboard",
    "sprint demo",
    "deployment script",
    "style guide",
    "cost report",
    "accessibility checklist",
    "security review notes",
    "load test plan",
    "support runbook",
    "feature flag cleanup",
    "analytics events",
)
#: How prompts name the lists.
LIST_WORDS = {
    "Backlog": "the backlog",
    "In Progress": "in progress",
    "In Review": "in review",
    "Completed": "completed",
}
BOARD_WORDS = {"Back end": "back-end", "Front end": "front-end", "Design": "design"}


def tasks_of(world: World, person: Person) -> list[PmTask]:
    """The tasks assigned to ``person``, in table order."""
    return [t for t in world.tasks if t.assignee == person.email]


def overdue(tasks: Sequence[PmTask]) -> list[PmTask] | None:
    """The overdue tasks among ``tasks``, or None when an unfinished one is due today."""
    open_tasks = [t for t in tasks if t.list_name != "Completed"]
    if any(t.due == TODAY for t in open_tasks):
        return None
    return [t for t in open_tasks if t.due < TODAY]


def late_person(world: World, rng: Random) -> tuple[Person, list[PmTask]] | None:
    """A colleague with tasks and their overdue tasks (None when one of theirs is due today)."""
    person = pick(rng, world.task_people)
    if person is None:
        return None
    late = overdue(tasks_of(world, person))
    return None if late is None else (person, late)


def new_task_name(world: World, rng: Random) -> str | None:
    """A task name no task has yet."""
    name = f"{rng.choice(_VERBS)} {rng.choice(_OBJECTS)}"
    return None if name.lower() in world.existing_task_names else name


def update(task: PmTask, field: str, value: str) -> Call:
    """The ``project_management_update_task`` call setting ``field`` of ``task``."""
    return call("project_management_update_task", task_id=task.id, field=field, new_value=value)


def create(name: str, who: str, list_name: str, due: str, board: str) -> Call:
    """The ``project_management_create_task`` call."""
    return call(
        "project_management_create_task",
        task_name=name,
        assigned_to_email=who,
        list_name=list_name,
        due_date=due,
        board=board,
    )


_MOVES = (
    ("In Progress", "In Review"),
    ("In Review", "Completed"),
    ("In Progress", "Backlog"),
    ("Backlog", "In Progress"),
    ("In Review", "In Progress"),
)


@template("pm_move_list", PROJECT_CATEGORY)
def move_list(world: World, rng: Random) -> Draft | None:
    """Move all of a colleague's tasks from one list to another (may be none)."""
    person = pick(rng, world.task_people)
    if person is None:
        return None
    source, target = rng.choice(_MOVES)
    tasks = [t for t in tasks_of(world, person) if t.list_name == source]
    prompt = rng.choice(
        (
            f"Move all of {person.name}'s tasks that are {LIST_WORDS[source]} to "
            f"{LIST_WORDS[target]}",
            f"can you move any of {person.name}'s tasks that are {LIST_WORDS[source]} to "
            f"{LIST_WORDS[target]}?",
        )
    )
    if source == "Backlog":
        prompt = f"Move all of {person.name}'s tasks in the backlog to {LIST_WORDS[target]}"
    return Draft(prompt, [update(t, "list_name", target) for t in tasks])


@template("pm_reassign_list", PROJECT_CATEGORY)
def reassign_list(world: World, rng: Random) -> Draft | None:
    """Reassign a colleague's tasks in one list to another colleague."""
    person = pick(rng, world.task_people)
    other = pick(rng, world.others(world.task_people, person)) if person else None
    if person is None or other is None:
        return None
    source = rng.choice(("In Progress", "In Review", "Backlog"))
    tasks = [t for t in tasks_of(world, person) if t.list_name == source]
    where = "backlog" if source == "Backlog" else LIST_WORDS[source]
    prompt = rng.choice(
        (
            f"{person.name} is sick so reassign their {where} tasks to {other.name}.",
            f"I need to reassign all of {person.name}'s {where} tasks to {other.name}. "
            "Can you do that?",
        )
    )
    return Draft(prompt, [update(t, "assigned_to_email", other.email) for t in tasks])


@template("pm_create_backlog_task", PROJECT_CATEGORY)
def create_backlog_task(world: World, rng: Random) -> Draft | None:
    """Add a new backlog task on a board for a colleague, due on a date."""
    person = pick(rng, world.task_people)
    name = new_task_name(world, rng)
    if person is None or name is None:
        return None
    board = rng.choice(BOARDS)
    due = TODAY + timedelta(days=rng.randint(1, 21))
    prompt = rng.choice(
        (
            f"Add a new task to the {board} backlog called {quoted(name)} and assign it to "
            f"{person.name}. It's due on {nl_date(due)}.",
            f"Please create a backlog task {quoted(name)} on the {BOARD_WORDS[board]} board for "
            f"{person.name}, due {nl_date(due)}.",
        )
    )
    return Draft(prompt, [create(name, person.email, "Backlog", ymd(due), board)])


@template("pm_overdue_backlog_to_progress", PROJECT_CATEGORY)
def overdue_backlog_to_progress(world: World, rng: Random) -> Draft | None:
    """Move all of a colleague's overdue tasks in the backlog to in progress."""
    found = late_person(world, rng)
    if found is None:
        return None
    person, late = found
    tasks = [t for t in late if t.list_name == "Backlog"]
    prompt = rng.choice(
        (
            f"Move all of {person.name}'s overdue tasks in the backlog to in progress",
            f"{person.name} has a bunch of overdue tasks in the backlog. Can you move them to in "
            "progress?",
            f"Any overdue tasks {person.name} still has in the backlog should be in progress now. "
            "Can you move them?",
        )
    )
    return Draft(prompt, [update(t, "list_name", "In Progress") for t in tasks])


@template("pm_unfinished_to_backlog", PROJECT_CATEGORY)
def unfinished_to_backlog(world: World, rng: Random) -> Draft | None:
    """A colleague is on vacation: move their started, unfinished tasks back to the backlog."""
    person = pick(rng, world.task_people)
    if person is None:
        return None
    tasks = [t for t in tasks_of(world, person) if t.list_name in ("In Progress", "In Review")]
    prompt = rng.choice(
        (
            f"{person.name} is on vacation now so move all their unfinished tasks to the backlog.",
            f"I need to move all of {person.name}'s unfinished tasks to the backlog. Can you do "
            "that?",
        )
    )
    return Draft(prompt, [update(t, "list_name", "Backlog") for t in tasks])


@template("pm_overdue_not_started_to", PROJECT_CATEGORY)
def overdue_not_started_to(world: World, rng: Random) -> Draft | None:
    """Give all the overdue tasks a colleague hasn't started to another colleague."""
    person = pick(rng, world.task_people)
    other = pick(rng, world.others(world.task_people, person)) if person else None
    if person is None or other is None:
        return None
    late = overdue(tasks_of(world, person))
    if late is None:
        return None
    tasks = [t for t in late if t.list_name == "Backlog"]
    prompt = (
        f"can you give all of {person.name}'s overdue tasks that they haven't started to "
        f"{other.name}?"
    )
    return Draft(prompt, [update(t, "assigned_to_email", other.email) for t in tasks])


@template("pm_most_urgent_reassign", PROJECT_CATEGORY)
def most_urgent_reassign(world: World, rng: Random) -> Draft | None:
    """Reassign a colleague's most urgent unfinished task to another colleague."""
    person = pick(rng, world.task_people)
    other = pick(rng, world.others(world.task_people, person)) if person else None
    if person is None or other is None:
        return None
    tasks = sorted(
        (t for t in tasks_of(world, person) if t.list_name != "Completed"), key=lambda t: t.due
    )
    if not tasks or (len(tasks) > 1 and tasks[0].due == tasks[1].due):
        return None  # no single most urgent task
    prompt = rng.choice(
        (
            f"Take {person.name}'s most urgent task and reassign it to {other.name}.",
            f"I need to take {person.name}'s most urgent task and reassign it to {other.name}. "
            "Can you do that?",
        )
    )
    return Draft(prompt, [update(tasks[0], "assigned_to_email", other.email)])


def _named_task(world: World, rng: Random) -> tuple[Person, PmTask] | None:
    """A task of a person whose name picks it out among that person's tasks."""
    person = pick(rng, world.task_people)
    if person is None:
        return None
    mine = tasks_of(world, person)
    task = pick(rng, mine)
    if task is None or sum(task.name.lower() in t.name.lower() for t in mine) != 1:
        return None
    return person, task


def _move_named_task(
    world: World,
    rng: Random,
    field: str,
    values: Iterable[str],
    phrasings: Callable[[Person, str, str], tuple[str, ...]],
) -> Draft | None:
    """Set ``field`` (``"board"``, ``"list_name"``) of a colleague's named task to another of
    ``values``; the prompt is one of ``phrasings(person, quoted task name, value)``."""
    found = _named_task(world, rng)
    if found is None:
        return None
    person, task = found
    value = rng.choice([v for v in values if v != getattr(task, field)])
    prompt = rng.choice(phrasings(person, quoted(task.name), value))
    return Draft(prompt, [update(task, field, value)])


@template("pm_move_task_board", PROJECT_CATEGORY)
def move_task_board(world: World, rng: Random) -> Draft | None:
    """Move one named task of a colleague to another board."""
    return _move_named_task(
        world,
        rng,
        "board",
        BOARDS,
        lambda person, task, board: (
            f"Move {person.name}'s task {task} to the {board} board",
            f"{task}, assigned to {person.name}, belongs on the {BOARD_WORDS[board]} board. Can "
            "you move it there?",
        ),
    )


@template("pm_set_task_list", PROJECT_CATEGORY)
def set_task_list(world: World, rng: Random) -> Draft | None:
    """Move one named task of a colleague to another list."""
    return _move_named_task(
        world,
        rng,
        "list_name",
        LIST_WORDS,
        lambda person, task, target: (
            f"Move {person.name}'s task {task} to {LIST_WORDS[target]}",
            f"{person.name}'s task {task} should be {LIST_WORDS[target]}. Can you update it?",
        ),
    )


@template("pm_task_for_most_completed", PROJECT_CATEGORY)
def task_for_most_completed(world: World, rng: Random) -> Draft | None:
    """Create a backlog task on a board for the person with the most completed tasks there."""
    board = rng.choice(BOARDS)
    counts: dict[str, int] = {}
    for t in world.tasks:
        if t.board == board and t.list_name == "Completed":
            counts[t.assignee] = counts.get(t.assignee, 0) + 1
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    if not ranked or (len(ranked) > 1 and ranked[0][1] == ranked[1][1]):
        return None
    name = new_task_name(world, rng)
    if name is None:
        return None
    due = TODAY + timedelta(days=rng.randint(1, 21))
    prompt = (
        f"Make a backlog task called {quoted(name)} on the {BOARD_WORDS[board]} board with a "
        f"deadline of {nl_date(due)} for the person with the most completed "
        f"{BOARD_WORDS[board]} tasks"
    )
    return Draft(prompt, [create(name, ranked[0][0], "Backlog", ymd(due), board)])


@template("pm_question", PROJECT_CATEGORY)
def question(world: World, rng: Random) -> Draft | None:
    """A question answered by reading: a colleague's tasks."""
    person = pick(rng, world.task_people)
    if person is None:
        return None
    prompt = rng.choice(
        (
            f"How many tasks does {person.name} have in review?",
            f"Which of {person.name}'s tasks are due next?",
            f"Does {person.name} have any overdue tasks?",
        )
    )
    return Draft(prompt, [])
