"""Where a warm visible-only evaluation (an episode's turn, `profile="train"`) spends its time.

One warm Evaluator, then `--repeats` evaluations of the task's starter; for each, the
seconds between the call and the harness's first event (engine side: scan, job build, the
job's hand-over to the warm harness), each stage's own seconds as the harness reports them,
the gaps between stages, and the seconds after the last event (assembling the result).
It also turns the harness's trace on (core/harness/trace.py) and sums, per warm evaluation, the
seconds of each span: each op a worker answered (`trusted expect`, `candidate check`, ...), each
request the parent waited for (`candidate<- check`), the start-up and the end steps; the median
over the warm evaluations is `spans` in the report, largest first.

    PYTHONPATH=. python3 bench/turn_profile.py --device cuda:0 --tasks gemm/bf16_gemm --out DIR
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

os.environ["ARENA_HARNESS_TRACE"] = "1"  # read by the engine when it starts its harness

from core.evaluation.evaluator import Evaluator
from core.harness import trace
from core.tasks.discovery import discover


def one(ev: Evaluator, task: Any, seed: int) -> dict[str, Any]:
    """One evaluation's timeline; `spans`: the harness's trace of it."""
    marks: list[tuple[float, Any]] = []
    t0 = time.monotonic()
    result = asyncio.run(
        ev.aevaluate(
            task,
            task.path / "starter.py",
            seed=seed,
            visible_only=True,
            profile="train",
            on_event=lambda e: marks.append((time.monotonic(), e)),
        )
    )
    end = time.monotonic()
    row: dict[str, Any] = {"total_s": end - t0, "status": result.status}
    if marks:
        row["before_first_event_s"] = marks[0][0] - t0
        row["after_last_event_s"] = end - marks[-1][0]
    last = None
    gaps = 0.0
    for at, e in marks:
        kind = type(e).__name__
        if kind == "StageStarted":
            if last is not None:
                gaps += at - last
        elif kind == "StageFinished":
            row[f"{e.stage}_s"] = e.seconds
            last = at
    row["between_stages_s"] = gaps
    if marks:
        first = marks[0][1]
        if type(first).__name__ == "EvaluationStarted":
            row["harness_start_to_compile_s"] = next(
                (at - marks[0][0] for at, e in marks if type(e).__name__ == "StageStarted"), 0.0
            )
        row["last_stage_to_finished_s"] = next(
            (marks[-1][0] - at for at, e in reversed(marks) if type(e).__name__ == "StageFinished"),
            0.0,
        )
    out = {k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()}
    out["spans"] = {
        k: round(v, 4) for k, v in trace.totals(ev.root / trace.FILE_NAME, t0, end).items()
    }
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--tasks", nargs="+", default=["gemm/bf16_gemm"])
    ap.add_argument("--repeats", type=int, default=4)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    tasks = {t.id: t for t in discover()}
    report: dict[str, Any] = {"device": args.device, "tasks": {}}
    with Evaluator(args.device) as ev:
        for name in args.tasks:
            rows = [one(ev, tasks[name], 20261201 + i) for i in range(args.repeats + 1)]
            warm = rows[1:]  # the first call starts the harness and fills the JIT cache
            keys = [k for k in warm[0] if k not in ("status", "spans")]
            median = {k: round(statistics.median(r.get(k, 0.0) for r in warm), 3) for k in keys}
            names = {k for r in warm for k in r["spans"]}
            median_spans = dict(
                sorted(
                    (
                        (k, round(statistics.median(r["spans"].get(k, 0.0) for r in warm), 4))
                        for k in names
                    ),
                    key=lambda kv: -kv[1],
                )
            )
            report["tasks"][name] = {
                "cold": rows[0],
                "warm": warm,
                "median_warm": median,
                "spans": median_spans,
            }
            print(name, "cold", {k: v for k, v in rows[0].items() if k != "spans"}, flush=True)
            print("  warm median", median, flush=True)
            for key, seconds in list(median_spans.items())[:25]:
                print(f"    {seconds:8.4f} s  {key}", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "turn_profile.json").write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
