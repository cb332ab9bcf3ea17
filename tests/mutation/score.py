"""Print mutmut's results per module: killed, survived, timeout, no tests, and the survivors.

Reads the ``mutants/**/*.py.meta`` files ``mutmut run`` leaves (its exit codes per mutant,
classified by mutmut's own ``status_by_exit_code``). Run from the repository root after
``tests/mutation/run.sh``; ``--survivors`` lists the surviving mutants' names too.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

from mutmut.stats import status_by_exit_code

COLUMNS = ("killed", "survived", "timeout", "no tests", "not checked", "other")


def main() -> int:
    metas = sorted(Path("mutants").rglob("*.py.meta"))
    if not metas:
        print("no mutmut results under mutants/: run tests/mutation/run.sh first")
        return 1
    rows = []
    survivors: list[str] = []
    for meta in metas:
        codes = json.loads(meta.read_text(encoding="utf-8"))["exit_code_by_key"]
        if not codes:
            continue
        counts: Counter[str] = Counter()
        for name, code in codes.items():
            status = status_by_exit_code[code]
            column = status if status in COLUMNS else "other"
            counts[column] += 1
            if status == "survived":
                survivors.append(name)
        module = str(meta.relative_to("mutants"))[: -len(".py.meta")].replace("/", ".")
        rows.append((module, counts, len(codes)))
    print(f"{'module':38} {'mutants':>7} " + " ".join(f"{c:>11}" for c in COLUMNS) + "  score")
    for module, counts, total in rows:
        tested = counts["killed"] + counts["survived"] + counts["timeout"]
        score = f"{100 * counts['killed'] / tested:5.1f}%" if tested else "    -"
        cells = " ".join(f"{counts[c]:>11}" for c in COLUMNS)
        print(f"{module:38} {total:>7} {cells}  {score}")
    print("score = killed / (killed + survived + timeout); not checked: the run stopped first;")
    print("other: skipped, suspicious, segfault (mutmut's own classes)")
    if "--survivors" in sys.argv[1:]:
        print("\nsurvivors (mutmut show NAME prints the change):")
        print("\n".join(f"  {name}" for name in sorted(survivors)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
