"""The template registry and the helpers templates share.

A template is a function ``build(world, rng) -> Draft | None`` registered with :func:`template`
under an id and a category. It draws its parameters with ``rng`` (a :class:`random.Random`), reads
the answer off the :class:`~workplace_env.taskgen.world.World`, and returns the prompt with the
ground-truth calls, or None when this draw does not make a sound task (the generator then draws
again). The ground truth must be a function of the prompt's text and the sandbox only, and every
call in it must change the sandbox (WorkBench's ground truths hold only writes).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from random import Random
from typing import Any, TypeVar

from workplace_env.taskgen.world import World

EMAIL_CATEGORY = "workplace_assistant_email"
CALENDAR_CATEGORY = "workplace_assistant_calendar"
ANALYTICS_CATEGORY = "workplace_assistant_analytics"
PROJECT_CATEGORY = "workplace_assistant_project_management"
CRM_CATEGORY = "workplace_assistant_customer_relationship_manager"
MULTI_CATEGORY = "workplace_assistant_multi_domain"
#: Every category, in report order.
CATEGORIES: tuple[str, ...] = (
    EMAIL_CATEGORY,
    CALENDAR_CATEGORY,
    ANALYTICS_CATEGORY,
    PROJECT_CATEGORY,
    CRM_CATEGORY,
    MULTI_CATEGORY,
)

Call = dict[str, str]


@dataclass(frozen=True)
class Draft:
    """A template's output: the user prompt and the ground-truth calls (``[]``: change nothing)."""

    prompt: str
    calls: list[Call]


Build = Callable[[World, Random], Draft | None]


@dataclass(frozen=True)
class Template:
    """A registered template: ``id`` (the task's ``template`` field), category, builder."""

    id: str
    category: str
    build: Build
    summary: str


#: Every template, in registration order (module by module).
TEMPLATES: list[Template] = []


def template(template_id: str, category: str) -> Callable[[Build], Build]:
    """Register ``build`` as template ``template_id``; its docstring's first line is the summary."""

    def register(build: Build) -> Build:
        if any(t.id == template_id for t in TEMPLATES):
            raise ValueError(f"template {template_id} registered twice")
        summary = (build.__doc__ or template_id).strip().splitlines()[0]
        TEMPLATES.append(Template(template_id, category, build, summary))
        return build

    return register


def call(name: str, **arguments: Any) -> Call:
    """A ground-truth call: the tool name and ``json.dumps`` of the arguments (in given order)."""
    return {"name": name, "arguments": json.dumps(arguments)}


T = TypeVar("T")


def pick(rng: Random, items: Sequence[T]) -> T | None:
    """``rng.choice(items)``, or None when ``items`` is empty."""
    return rng.choice(items) if items else None


def threshold(rng: Random, values: Sequence[float], more: bool, want: bool) -> int | None:
    """An integer ``N`` such that "any value more (or less) than N" is ``want``, or None.

    ``N`` keeps at least 0.5 away from every value, so rounding a mean cannot flip the answer,
    and stays within a few units of the values so that the question is a real one.
    """
    if not values:
        return None
    low, high = math.floor(min(values)) - 3, math.ceil(max(values)) + 3
    options = []
    for n in range(max(1, low), high + 1):
        if any(abs(v - n) < 0.5 for v in values):
            continue
        holds = any(v > n for v in values) if more else any(v < n for v in values)
        if holds == want:
            options.append(n)
    return pick(rng, options)


def quoted(text: str) -> str:
    """``text`` in single quotes, as WorkBench quotes subjects and bodies."""
    return f"'{text}'"
