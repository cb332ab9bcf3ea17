"""Task generator: WorkBench-style tasks with ground truths computed from a sandbox.

:func:`generate_tasks` ``(base, count, seed)`` returns tasks in the format of the NeMo task files
(``tasks_public.jsonl``): ``id``, ``category``, ``environment_name``, ``prompt``, ``system`` (NeMo
Gym's system message with the clock, Thursday 2023-11-30 23:59:00), ``ground_truth`` (the calls
that solve the task, arguments as JSON text; ``[]`` means "change nothing") and ``template``.

Templates (one module per category, each template a function registered in
:data:`TEMPLATES`) are modelled on WorkBench's query templates: replies, forwards and deletes by
sender and subject; meetings at free slots within 9am-6pm, cancellations and reschedules; plots
over periods and plots that depend on the data; task moves and reassignments by rule; CRM status
and owner changes by rule; and multi-domain tasks that read one toolkit and act in another. Some
templates' right answer is to change nothing: a condition that is false, a request that breaks
the working-hours rule, a question answered by reading.

Ground truths come from the sandbox's DataFrames, so tasks fit whatever sandbox they are generated
against (the embedded generated one or a WorkBench ``--data-dir``). Where a wording could be read
two ways on the data at hand (a task due today as "overdue", an email exactly N days old as "in
the last N days", a threshold equal to a value, a tie for "most"), the template draws again, so
that every reading gives the same answer. Each ground truth is replayed before it is accepted.

Determinism: the output depends only on the sandbox, ``count``, ``seed`` (one
:class:`random.Random`) and the template list; no set or hash order is ever iterated.
"""

from workplace_env.taskgen import analytics, calendar, crm, email, multi, project  # noqa: F401
from workplace_env.taskgen.base import CATEGORIES, TEMPLATES, Draft, Template
from workplace_env.taskgen.core import (
    MAX_TASK_COUNT,
    generate_tasks,
    generate_to,
    is_failure_output,
    iter_tasks,
    replay,
    write_jsonl,
)
from workplace_env.taskgen.world import NOW, SYSTEM_PROMPT, World

__all__ = [
    "CATEGORIES",
    "MAX_TASK_COUNT",
    "NOW",
    "SYSTEM_PROMPT",
    "TEMPLATES",
    "Draft",
    "Template",
    "World",
    "generate_tasks",
    "generate_to",
    "is_failure_output",
    "iter_tasks",
    "replay",
    "write_jsonl",
]
