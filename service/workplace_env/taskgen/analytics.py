"""Analytics templates: plots over a period, and plots that depend on what the data shows.

"Since X" runs from X to today (2023-11-30, NeMo Gym's clock) inclusive. A condition "at any time"
is checked on the per-day values the analytics tools report; thresholds keep clear of every
value (see :func:`~workplace_env.taskgen.base.threshold`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta
from random import Random

from workplace_env.sandbox.generate import TRAFFIC_SOURCES
from workplace_env.taskgen.base import (
    ANALYTICS_CATEGORY,
    Call,
    Draft,
    call,
    pick,
    template,
    threshold,
)
from workplace_env.taskgen.world import (
    CHART_NAMES,
    CORE_METRICS,
    METRIC_NAMES,
    PLOT_TYPES,
    TODAY,
    World,
    nl_date,
    ymd,
)


def plot(first: date, last: date, metric: str, plot_type: str) -> Call:
    """The ``analytics_create_plot`` call for ``metric`` over ``[first, last]``."""
    return call(
        "analytics_create_plot",
        time_min=ymd(first),
        time_max=ymd(last),
        value_to_plot=metric,
        plot_type=plot_type,
    )


def since_day(world: World, rng: Random, min_days: int = 1) -> date | None:
    """A start day with data, at least ``min_days`` before today (None without data)."""
    span = world.analytics_range()
    if span is None:
        return None
    days = [d for d in world.analytics_days(span[0] + timedelta(days=1)) if d < TODAY]
    days = [d for d in days if (TODAY - d).days >= min_days]
    return pick(rng, days)


def source_metric(source: str) -> str:
    """``"search engine"`` -> ``"visits_search_engine"``."""
    return "visits_" + source.replace(" ", "_")


@dataclass(frozen=True)
class MetricCondition:
    """Whether ``metric`` was ``side`` (more|less) than ``n`` at any time since ``since``."""

    since: date
    metric: str
    side: str
    n: int
    holds: bool

    @property
    def name(self) -> str:
        """How prompts name the metric: ``"total visits"``."""
        return METRIC_NAMES[self.metric]

    @property
    def clause(self) -> str:
        """The condition as prompts say it: ``"total visits was more than 5 at any time since
        November 2"``."""
        return f"{self.name} was {self.side} than {self.n} at any time since {nl_date(self.since)}"


def metric_condition(world: World, rng: Random, since: date) -> MetricCondition | None:
    """A core metric and a threshold on it since ``since``, drawn in that order.

    None when no threshold is clear of the data, or when "less" would depend on days without
    any visit (the tools leave such days out).
    """
    metric = rng.choice(CORE_METRICS)
    more = rng.random() < 0.5
    if not more and metric != "session_duration_seconds" and not world.covers(since):
        return None
    want = rng.random() < 0.5
    n = threshold(rng, world.daily(metric, since), more, want)
    if n is None:
        return None
    return MetricCondition(since, metric, "more" if more else "less", n, want)


@template("analytics_plot_since", ANALYTICS_CATEGORY)
def plot_since(world: World, rng: Random) -> Draft | None:
    """Make a chart of a metric since a date."""
    since = since_day(world, rng)
    if since is None:
        return None
    metric, kind = rng.choice(tuple(METRIC_NAMES)), rng.choice(PLOT_TYPES)
    name, chart = METRIC_NAMES[metric], CHART_NAMES[kind]
    prompt = rng.choice(
        (
            f"Can you make a {chart} of {name} since {nl_date(since)}?",
            f"Plot {name} since {nl_date(since)} as a {chart}",
        )
    )
    return Draft(prompt, [plot(since, TODAY, metric, kind)])


@template("analytics_plot_between", ANALYTICS_CATEGORY)
def plot_between(world: World, rng: Random) -> Draft | None:
    """Make a chart of a metric between two dates."""
    first = since_day(world, rng, min_days=2)
    if first is None:
        return None
    last = first + timedelta(days=rng.randint(1, (TODAY - first).days - 1))
    metric, kind = rng.choice(tuple(METRIC_NAMES)), rng.choice(PLOT_TYPES)
    prompt = (
        f"Make a {CHART_NAMES[kind]} of {METRIC_NAMES[metric]} between {nl_date(first)} and "
        f"{nl_date(last)}"
    )
    return Draft(prompt, [plot(first, last, metric, kind)])


@template("analytics_distribution_on", ANALYTICS_CATEGORY)
def distribution_on(world: World, rng: Random) -> Draft | None:
    """Plot the distribution of a metric on one day (a histogram)."""
    day = since_day(world, rng)
    if day is None:
        return None
    metric = rng.choice(tuple(METRIC_NAMES))
    prompt = rng.choice(
        (
            f"Plot the distribution of {METRIC_NAMES[metric]} on {nl_date(day)}",
            f"please plot the distribution of the {METRIC_NAMES[metric]} metric on {nl_date(day)}",
        )
    )
    return Draft(prompt, [plot(day, day, metric, "histogram")])


@template("analytics_two_metrics_since", ANALYTICS_CATEGORY)
def two_metrics_since(world: World, rng: Random) -> Draft | None:
    """Make charts of two metrics since a date (two plots, in the order asked)."""
    since = since_day(world, rng)
    if since is None:
        return None
    first, second = rng.sample(tuple(METRIC_NAMES), 2)
    kind = rng.choice(("bar", "line"))
    prompt = (
        f"can you make {kind} charts of {METRIC_NAMES[first]} and {METRIC_NAMES[second]} since "
        f"{nl_date(since)}?"
    )
    return Draft(prompt, [plot(since, TODAY, first, kind), plot(since, TODAY, second, kind)])


@template("analytics_threshold_plot", ANALYTICS_CATEGORY)
def threshold_plot(world: World, rng: Random) -> Draft | None:
    """If a metric was more/less than N at any time since a date, line-plot it since then."""
    since = since_day(world, rng)
    cond = None if since is None else metric_condition(world, rng, since)
    if cond is None:
        return None
    prompt = rng.choice(
        (
            f"Can you make a line chart of {cond.name} since {nl_date(cond.since)} if it was "
            f"{cond.side} than {cond.n} at any time since then?",
            f"If {cond.clause}, make a line plot of it since then",
        )
    )
    return Draft(prompt, [plot(cond.since, TODAY, cond.metric, "line")] if cond.holds else [])


@template("analytics_avg_duration_above", ANALYTICS_CATEGORY)
def avg_duration_above(world: World, rng: Random) -> Draft | None:
    """If the average session duration since a date was above N seconds, plot it; else nothing."""
    since = since_day(world, rng, min_days=3)
    if since is None:
        return None
    days = world.analytics_days(since)
    visits = sum(world.days[d].visits for d in days)
    overall = sum(world.days[d].seconds for d in days) / visits
    daily = world.daily("session_duration_seconds", since)
    averages = (overall, sum(daily) / len(daily))  # per visit, or the mean of daily means
    want = rng.random() < 0.5
    options = [
        n
        for n in range(max(1, int(min(averages)) - 8), int(max(averages)) + 9)
        if all(abs(a - n) >= 0.5 for a in averages)
        and (all(a > n for a in averages) if want else all(a < n for a in averages))
    ]
    n = pick(rng, options)
    if n is None:
        return None
    kind = rng.choice(PLOT_TYPES)
    prompt = (
        f"If the average session duration since {nl_date(since)} was above {n} seconds, make a "
        f"{CHART_NAMES[kind]} of it since then. Otherwise, don't do anything."
    )
    calls = [plot(since, TODAY, "session_duration_seconds", kind)] if want else []
    return Draft(prompt, calls)


@template("analytics_popular_source", ANALYTICS_CATEGORY)
def popular_source(world: World, rng: Random) -> Draft | None:
    """Plot the most (or least) popular traffic source since a date."""
    since = since_day(world, rng, min_days=3)
    if since is None:
        return None
    most = rng.random() < 0.5
    ranked = sorted(TRAFFIC_SOURCES, key=lambda s: world.source_total(s, since), reverse=most)
    totals = [world.source_total(s, since) for s in ranked]
    if totals[0] == totals[1]:
        return None  # a tie has no single answer
    kind = rng.choice(("line", "bar"))
    prompt = (
        f"Can you make a {kind} plot of the {'most' if most else 'least'} popular traffic source "
        f"since {nl_date(since)}?"
    )
    return Draft(prompt, [plot(since, TODAY, source_metric(ranked[0]), kind)])


@template("analytics_compare_sources", ANALYTICS_CATEGORY)
def compare_sources(world: World, rng: Random) -> Draft | None:
    """If we got more traffic from one source than another since a date, bar-chart both."""
    since = since_day(world, rng, min_days=3)
    if since is None:
        return None
    first, second = rng.sample(TRAFFIC_SOURCES, 2)
    a, b = world.source_total(first, since), world.source_total(second, since)
    if a == b:
        return None
    prompt = rng.choice(
        (
            f"If we got more traffic from {first} than {second} since {nl_date(since)}, make bar "
            "charts of both since then",
            f"Make bar charts of {first} and {second} visits since {nl_date(since)} if we got more "
            f"traffic from {first} than {second}",
        )
    )
    calls = [
        plot(since, TODAY, source_metric(first), "bar"),
        plot(since, TODAY, source_metric(second), "bar"),
    ]
    return Draft(prompt, calls if a > b else [])


@template("analytics_question", ANALYTICS_CATEGORY)
def question(world: World, rng: Random) -> Draft | None:
    """A question answered by reading: a metric on a day."""
    day = since_day(world, rng)
    if day is None:
        return None
    prompt = rng.choice(
        (
            f"How many visits did the site get on {nl_date(day)}?",
            f"What was the average session duration on {nl_date(day)}?",
            f"How many engaged users did we have on {nl_date(day)}?",
        )
    )
    return Draft(prompt, [])
