"""Profile the episode mix through the session store (no transport): where server time goes.

Usage: ``.venv/bin/python bench/profile_episode.py [--data-dir DIR] [--reps N] [--top K]``

Runs the episodes of ``../shared/data/bench/episode_mix.jsonl`` (seed, the recorded calls,
verify, close) ``--reps`` times under cProfile and prints the mean milliseconds per episode and
the functions with the most own time. Only the store's public methods are used, so the same
script profiles older revisions of the code for a before/after comparison.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import time
from pathlib import Path

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=str(SHARED / "workbench"))
    parser.add_argument("--mix", default=str(SHARED / "bench" / "episode_mix.jsonl"))
    parser.add_argument("--reps", type=int, default=50)
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args()

    from workplace_env.identity import EpisodeId, FunctionCall, Task, TaskId
    from workplace_env.sandbox.tables import BaseTables
    from workplace_env.sessions import SessionStore

    store = SessionStore(BaseTables.from_directory(args.data_dir))
    mix = [json.loads(line) for line in Path(args.mix).read_text().splitlines() if line.strip()]

    def episodes(tag: str) -> int:
        n = 0
        for rep in range(args.reps):
            for line in mix:
                n += 1
                sid, ep = f"{tag}-{rep}-{n}", EpisodeId("r", 0)
                truth = tuple(FunctionCall(c["name"], c["arguments"]) for c in line["ground_truth"])
                store.seed(
                    sid, ep, TaskId("bench", str(line["id"])), Task(id="t", ground_truth=truth)
                )
                for c in line["function_calls"]:
                    store.call_tool(sid, c["name"], c["arguments"])
                store.verify(
                    sid, [FunctionCall(c["name"], c["arguments"]) for c in line["function_calls"]]
                )
                store.close(sid, ep)
        return n

    episodes("warm")
    start = time.process_time()
    count = episodes("timed")
    cpu_ms = (time.process_time() - start) / count * 1e3
    profiler = cProfile.Profile()
    profiler.enable()
    episodes("profiled")
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(args.top)
    print(f"episodes: {count}  CPU per episode (store only, no profiler): {cpu_ms:.3f} ms")
    print("\n".join(out.getvalue().splitlines()[: args.top + 12]))


if __name__ == "__main__":
    main()
