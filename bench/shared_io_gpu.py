"""The trusted-process input path on a GPU (issue 23): wall clock and per-call cost, old path
against new, on a few bundled tasks' starters (visible workloads only: an episode's turn).

    PYTHONPATH=. python3 bench/shared_io_gpu.py --out DIR [--tasks norm/add_rmsnorm ...] [--device cuda:0]

For each task: one warm-up evaluation (JIT compiles), then the old path
(`Timing(shared_io=False)`: inputs drawn in the candidate's process, sampled outputs over the
socket) and the new one (the trusted worker writes inputs through CUDA IPC; every call's outputs
come back through shared memory), alternately, `--repeat` times each. Reported per evaluation:
status, flags, notes, the evaluation's and the performance stage's seconds, and per timed call
the time the parent saw outside the candidate's timer (wall − reported) and, on the new path,
the part of it the trusted worker spent drawing and writing inputs. Writes DIR/shared_io.json
and DIR/shared_io.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from core.evaluation.evaluator import Evaluator
from core.evaluation.job import Timing
from core.tasks.spec import load_task


def _one(evaluator: Evaluator, task, shared: bool) -> dict:
    timed: list[dict] = []
    base = evaluator.timing or Timing.for_device("cuda")
    evaluator.timing = Timing(**{**base.__dict__, "shared_io": shared})
    t0 = time.monotonic()
    result = asyncio.run(
        evaluator.aevaluate(
            task,
            task.path / "starter.py",
            None,
            lambda e: timed.append(e.__dict__) if type(e).__name__ == "WorkloadTimed" else None,
            visible_only=True,
        )
    )
    wall = time.monotonic() - t0
    rounds = [r for w in timed for r in (w.get("candidate") or {}).get("rounds", [])]
    calls = sum(r["calls"] for r in rounds) or 1
    outside = sum(r["wall_s"] + (r.get("serve_s") or 0.0) - r["reported_s"] for r in rounds)
    serve = sum(r.get("serve_s") or 0.0 for r in rounds)
    return {
        "path": "shared" if shared else "old",
        "status": result.status,
        "flags": result.integrity_flags,
        "notes": result.review_notes,
        "wall_s": wall,
        "performance_s": result.stage("performance").seconds,
        "timed_calls": calls,
        "outside_us_per_call": outside / calls * 1e6,
        "serve_us_per_call": serve / calls * 1e6,
        "medians_us": {w["workload"]: (w.get("candidate") or {}).get("median_us") for w in timed},
        "workload_notes": sorted({n for w in timed for n in (w.get("notes") or [])}),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--tasks", nargs="*", default=["norm/add_rmsnorm", "activation/silu_mul"])
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    with Evaluator(args.device) as evaluator:
        for name in args.tasks:
            task = load_task(ROOT / "tasks" / name)
            print(f"{name}: warm-up", flush=True)
            _one(evaluator, task, True)
            for _ in range(args.repeat):
                for shared in (False, True):
                    row = {"task": name, **_one(evaluator, task, shared)}
                    rows.append(row)
                    print(
                        json.dumps(
                            {
                                k: row[k]
                                for k in (
                                    "task",
                                    "path",
                                    "status",
                                    "wall_s",
                                    "performance_s",
                                    "outside_us_per_call",
                                    "serve_us_per_call",
                                )
                            }
                        ),
                        flush=True,
                    )
    (args.out / "shared_io.json").write_text(json.dumps(rows, indent=1))
    lines = [
        "| task | path | status | flags / notes | eval wall s | performance s | timed calls | outside timer µs/call | of it, trusted refill µs/call |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        found = "; ".join([f[:60] for f in r["flags"]] + [n[:60] for n in r["notes"]]) or "none"
        lines.append(
            f"| {r['task']} | {r['path']} | {r['status']} | {found} | {r['wall_s']:.1f} | {r['performance_s']:.1f} | {r['timed_calls']} | {r['outside_us_per_call']:.0f} | {r['serve_us_per_call']:.0f} |"
        )
    for name in args.tasks:
        old = [r["wall_s"] for r in rows if r["task"] == name and r["path"] == "old"]
        new = [r["wall_s"] for r in rows if r["task"] == name and r["path"] == "shared"]
        if old and new:
            lines.append(
                f"\n{name}: visible-only evaluation {statistics.median(old):.1f} s (old) → {statistics.median(new):.1f} s (shared)"
            )
    (args.out / "shared_io.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
