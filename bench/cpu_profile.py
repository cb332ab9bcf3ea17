"""Where a process's CPU goes: a sampler of the threads on CPU, and the profile report.

:class:`CpuSampler` samples the Python stacks of the threads that are using the CPU, every
thread of the process at once, beside any profiler (it needs neither ``sys.setprofile`` nor
``sys.monitoring``). :func:`report` prints a pstats file (the sampler's or cProfile's) by group
and by function. Used by ``profile_server.py`` and ``profile_gateway.py``.
"""

from __future__ import annotations

import marshal
import pstats
import random
import sys
import sysconfig
import threading
import time
import types
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]

#: pstats' key of a function: (file name, first line, name).
FunctionKey = tuple[str, int, str]
#: pstats' value of a function: (primitive calls, calls, own s, cumulative s, callers).
FunctionStats = tuple[int, int, float, float, dict[Any, Any]]


def thread_cpu_s(ident: int) -> float | None:
    """CPU seconds thread ``ident`` (a ``threading.get_ident()``) has used; None once it is gone."""
    try:
        return time.clock_gettime(time.pthread_getcpuclockid(ident))
    except OSError:
        return None


#: The pseudo function of the CPU no sample saw (its pstats key).
UNSEEN: FunctionKey = ("~", 0, "<CPU no sample saw: C code under a waiting call, wake-ups>")


class CpuSampler:
    """Every ``interval_s`` (jittered), one sample of each thread on CPU: its Python stack.

    A look reads every thread's stack and CPU clock. A thread whose clock moved since the last
    look is on CPU unless it is at a waiting place: an instruction where a look found a thread
    asleep (``S`` in ``/proc``) whose clock had not moved at all (a lock, a queue, a poll); a
    thread seen there used its CPU before it got there. While sampling, the switch interval is
    ``switch_s``, so a look stops a thread running Python within that much of its CPU, at the
    function it is in; C code that holds the GIL is seen at the Python line that called it. A
    sample stands for the time since the previous look, for the innermost function (own) and
    once for every function on the stack (cumulative); the samples are then scaled to the
    threads' CPU by their clocks (:attr:`cpu_s`) when they add up to more, and when they add
    up to less the rest is :data:`UNSEEN` (C code under a waiting call, such as grpcio's
    polling). A thread waiting for the GIL after a call into C counts as on CPU there, and a
    thread that wakes at one place more often than the looks come is never seen asleep there
    (that place stays a sample). The sampler's own thread is neither sampled nor counted.
    Linux only (``/proc``).
    """

    def __init__(self, interval_s: float = 0.001, switch_s: float = 2e-5) -> None:
        self.interval_s = interval_s
        self.switch_s = switch_s
        self.cpu_s = 0.0
        #: (innermost code, instruction, stack innermost first, s since the last look)
        self.samples: list[tuple[types.CodeType, int, tuple[types.CodeType, ...], float]] = []
        #: the (code, instruction) places a thread was seen waiting at
        self.waiting: set[tuple[types.CodeType, int]] = set()
        self._native_ids: dict[int, int | None] = {}
        self._cpu_at: dict[int, float] = {}
        self._looked_at = 0.0
        self._switch_was = sys.getswitchinterval()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cpu-sampler", daemon=True)

    def start(self) -> None:
        """Start sampling: the CPU the live threads used before this is not counted."""
        for ident in sys._current_frames():
            cpu = thread_cpu_s(ident)
            if cpu is not None:
                self._cpu_at[ident] = cpu
        self._looked_at = time.perf_counter()
        self._switch_was = sys.getswitchinterval()
        sys.setswitchinterval(self.switch_s)
        self._thread.start()

    def stop(self) -> None:
        """Stop sampling (returns once the sampler thread has ended)."""
        self._stop.set()
        self._thread.join()
        sys.setswitchinterval(self._switch_was)

    def _run(self) -> None:
        me = threading.get_ident()
        jitter = random.Random(0)  # looks in step with a periodic workload would skew it
        while not self._stop.wait(self.interval_s * jitter.uniform(0.5, 1.5)):
            self.sample(skip=me)

    def sample(self, skip: int | None = None) -> None:
        """One look at every thread but ``skip``: add the CPU each used since the last look (a
        thread first seen after :meth:`start`: since it began) to :attr:`cpu_s`, note where the
        threads that used none wait, and take the stack of each that did."""
        now = time.perf_counter()
        since, self._looked_at = now - self._looked_at, now
        cpu_at: dict[int, float] = {}
        for ident, frame in sys._current_frames().items():
            cpu = thread_cpu_s(ident) if ident != skip else None
            if cpu is None:
                continue
            cpu_at[ident] = cpu
            used = cpu - self._cpu_at.get(ident, 0.0)
            site = (frame.f_code, frame.f_lasti)
            if used <= 0:
                if site not in self.waiting and self._asleep(ident):  # not short of a core
                    self.waiting.add(site)
                continue
            self.cpu_s += used
            self.samples.append((*site, _codes(frame), since))
        self._cpu_at = cpu_at

    def _asleep(self, ident: int) -> bool:
        """Whether thread ``ident`` sleeps (``S``/``D`` in ``/proc``), not runnable."""
        if ident not in self._native_ids:
            self._native_ids.update(
                (t.ident, t.native_id) for t in threading.enumerate() if t.ident
            )
        native_id = self._native_ids.setdefault(ident, None)
        try:
            stat = Path(f"/proc/self/task/{native_id}/stat").read_text()
        except OSError:  # gone, or no native id
            return False
        return stat.rsplit(")", 1)[1].split()[0] in ("S", "D")

    def stats(self) -> dict[FunctionKey, FunctionStats]:
        """The samples taken on CPU in pstats' shape: ``{(file, first line, qualified name):
        (n, n, own_s, cum_s, {})}``, ``n`` the samples the function is on; plus
        :data:`UNSEEN`, the CPU left over."""
        taken = [s for s in self.samples if (s[0], s[1]) not in self.waiting]
        seen_s = sum(since for *_, since in taken)
        scale = min(1.0, self.cpu_s / seen_s) if seen_s else 0.0
        own: dict[FunctionKey, float] = {}
        on: dict[FunctionKey, tuple[int, float]] = {}
        for _, _, stack, since in taken:
            keys = [(c.co_filename, c.co_firstlineno, c.co_qualname) for c in stack]
            own[keys[0]] = own.get(keys[0], 0.0) + since * scale
            for key in set(keys):  # recursion: once per sample
                n, seconds = on.get(key, (0, 0.0))
                on[key] = (n + 1, seconds + since * scale)
        stats = {k: (n, n, own.get(k, 0.0), s, {}) for k, (n, s) in on.items()}
        if self.cpu_s > seen_s:
            unseen = self.cpu_s - seen_s
            stats[UNSEEN] = (0, 0, unseen, unseen, {})
        return stats

    def dump(self, path: str) -> None:
        """Write :meth:`stats` to ``path``, a file ``pstats.Stats`` reads."""
        with open(path, "wb") as out:
            marshal.dump(self.stats(), out)


def _codes(frame: types.FrameType | None) -> tuple[types.CodeType, ...]:
    """The code objects of ``frame``'s stack, innermost first."""
    codes = []
    while frame is not None:
        codes.append(frame.f_code)
        frame = frame.f_back
    return tuple(codes)


def group_of(filename: str, groups: dict[str, tuple[str, ...]], rest: str = "other") -> str:
    """The first group of ``groups`` with a needle in ``filename``; ``rest`` when none has."""
    for name, needles in groups.items():
        if any(n in filename for n in needles):
            return name
    return rest


_STDLIB = sysconfig.get_paths()["stdlib"] + "/"


def where(key: FunctionKey) -> str:
    """``file:line(name)`` of a pstats key, the file relative to site-packages, the standard
    library or this checkout; a builtin (cProfile's ``~``) by its name alone."""
    filename, line, name = key
    if filename == "~":
        return name
    if "site-packages/" in filename:
        filename = filename.rsplit("site-packages/", 1)[1]
    elif filename.startswith(_STDLIB):
        filename = filename[len(_STDLIB) :]
    elif filename.startswith(f"{REPO}/"):
        filename = filename[len(f"{REPO}/") :]
    return f"{filename}:{line}({name})"


def report(
    stats_file: str,
    top: int,
    *,
    title: str,
    groups: dict[str, tuple[str, ...]],
    rest: str = "other",
    episodes: int | None = None,
    counted: str = "calls",
) -> None:
    """Print the own time of pstats file ``stats_file`` by group (shares of the total), then
    the ``top`` functions by own and by cumulative time; in ms per episode when ``episodes`` is
    given, else in seconds. ``counted`` names the file's call counts (the sampler's: looks)."""
    stats: dict[FunctionKey, tuple[Any, ...]] = pstats.Stats(stats_file).stats  # type: ignore[attr-defined]
    total = sum(value[2] for value in stats.values()) or 1e-12
    scale, unit = (1e3 / episodes, "ms/ep") if episodes else (1.0, "s")
    by_group: dict[str, float] = {}
    for key, value in stats.items():
        group = "CPU no sample saw" if key == UNSEEN else group_of(key[0], groups, rest)
        by_group[group] = by_group.get(group, 0.0) + value[2]
    print(f"{title}: {total * scale:.3f} {unit} (own time by group)")
    for name, seconds in sorted(by_group.items(), key=lambda kv: -kv[1]):
        print(f"  {seconds / total:6.1%}  {seconds * scale:9.3f} {unit}  {name}")
    for heading, column in (("own", 2), ("cumulative", 3)):
        print(f"\ntop {top} functions by {heading} time")
        print(f"  {'own ' + unit:>12}  {'cum ' + unit:>12}  {counted:>8}  function")
        ranked = sorted(stats.items(), key=lambda kv: -kv[1][column])[:top]
        for key, (_, count, own, cumulative, *_) in ranked:
            line = f"  {own * scale:12.3f}  {cumulative * scale:12.3f}  {count:8d}  {where(key)}"
            print(line)
