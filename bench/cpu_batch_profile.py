"""Where a CPU batch's seconds go against one at a time (issue 42, item 4): six variants of
activation/silu_mul's starter as one `train` batch, then three one at a time, in one
`Arena(["cpu"])` with the harness's trace on; per candidate, the trace's spans summed.

    PYTHONPATH=. python3 bench/cpu_batch_profile.py
"""

import asyncio
import os
import sys
import time

os.environ["ARENA_HARNESS_TRACE"] = "1"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(1, os.path.join(ROOT, "bench"))
from published_batches import spans_between, timeline, trace_lines

from core.rl.arena import Arena, EvalRequest
from core.tasks.discovery import discover

task = next(t for t in discover() if t.id == "activation/silu_mul")
starter = task.file("starter.py").read_text()


async def main():
    async with Arena(["cpu"], cpu_slots=1) as arena:
        await arena.aevaluate(task.id, starter, seed=7, profile="train")
        srcs = [starter + f"\n# v{i}\n" for i in range(6)]
        t0 = time.monotonic()
        out = await arena.aevaluate_many(
            [EvalRequest(task.id, s, seed=7, profile="train") for s in srcs]
        )
        wall = time.monotonic() - t0
        sp = spans_between(arena.root, t0, time.monotonic())
        print("batch wall", round(wall, 2), [r.result.status for r in out])
        print("timeline", timeline(trace_lines(arena.root, t0, t0 + wall), t0, t0 + wall))
        for k, v in sorted(sp.items(), key=lambda kv: -kv[1])[:30]:
            print(f"{v / 6:7.3f}  {k}")
        t0 = time.monotonic()
        for s in srcs[:3]:
            await arena.aevaluate(task.id, s + "#single\n", seed=7, profile="train")
        wall = time.monotonic() - t0
        sp = spans_between(arena.root, t0, time.monotonic())
        print("singles wall each", round(wall / 3, 2))
        for k, v in sorted(sp.items(), key=lambda kv: -kv[1])[:30]:
            print(f"{v / 3:7.3f}  {k}")


if __name__ == "__main__":
    asyncio.run(main())
