"""The order of a mutant's tests under mutmut: quick tests first, grouped by module.

mutmut hands a mutant's tests to pytest with ``-x`` in no useful order, so a mutant the first
quick test kills could first wait for a 20-second checkpoint test. With the durations mutmut
recorded (``mutmut-stats.json`` in its working directory), the tests under half a second run
first, module by module (so module fixtures start once), then the slower ones, quickest first.
Only the order changes: every test that would run still runs for a surviving mutant.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

SLOW_S = 0.5


def quickest_first(items: list[Any], stats: Path = Path("mutmut-stats.json")) -> None:
    """Reorder pytest ``items`` in place by the durations in ``stats``; no file, no change."""
    try:
        durations = json.loads(stats.read_text())["duration_by_test"]
    except (OSError, ValueError, KeyError):
        return
    position = {id(item): index for index, item in enumerate(items)}

    def key(item: Any) -> tuple[bool, float, str, int]:
        seconds = durations.get(item.nodeid, 0.0)
        slow = seconds >= SLOW_S
        return (slow, seconds if slow else 0.0, item.nodeid.split("::")[0], position[id(item)])

    items.sort(key=key)
