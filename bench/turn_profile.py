"""Where a warm visible-only evaluation (an episode's turn, `profile="train"`) spends its time.

One warm Evaluator, then `--repeats` evaluations of the task's starter; for each, the
seconds between the call and the harness's first event (engine side: scan, job build, the
job's hand-over to the warm harness), each stage's own seconds as the harness reports them,
the gaps between stages, and the seconds after the last event (assembling the result).

    PYTHONPATH=. python3 bench/turn_profile.py --device cuda:0 --tasks gemm/bf16_gemm --out DIR
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from core.evaluation.evaluator import Evaluator
from core.tasks.discovery import discover


def one(ev: Evaluator, task: Any, seed: int) -> dict[str, Any]:
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
    return {k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()}


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
            keys = [k for k in warm[0] if k != "status"]
            median = {k: round(statistics.median(r.get(k, 0.0) for r in warm), 3) for k in keys}
            report["tasks"][name] = {"cold": rows[0], "warm": warm, "median_warm": median}
            print(name, "cold", rows[0], "\n  warm median", median, flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "turn_profile.json").write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
