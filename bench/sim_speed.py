"""How long a simulated evaluation takes: every bundled task's starter on a `sim:` device, the
full pipeline (compile, CPU correctness on visible and hidden workloads, predicted performance
at GPU sizes), one warm harness, wall clock per task.

    PYTHONPATH=. python3 bench/sim_speed.py --device sim:h200 --json bench/results/sim_speed.json
    PYTHONPATH=. python3 bench/sim_speed.py --tasks gemm/bf16_gemm,moe/fused_moe

Target (issue 10): at most 15 s per task on 2 CPU cores. Prints one line per task and the
median and maximum; the JSON keeps per-stage seconds, the machine, and each performance
workload's predicted microseconds and counting seconds (to check that a speed-up of the
simulator left its predictions where they were).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from core.evaluation.evaluator import Evaluator
from core.tasks.discovery import discover


def machine() -> dict:
    model = next(
        (
            line.split(":", 1)[1].strip()
            for line in subprocess.run(
                ["lscpu"], capture_output=True, text=True, check=False
            ).stdout.splitlines()
            if line.startswith("Model name")
        ),
        platform.processor(),
    )
    return {
        "cpus": os.cpu_count(),
        "model": model,
        "python": platform.python_version(),
        "load_1min": os.getloadavg()[0],
    }


def task_filter(values: list[str] | None) -> set[str]:
    """Task ids from `--tasks a b` or `--tasks a,b` (empty: every task)."""
    return {part for value in values or [] for part in value.split(",") if part}


def predictions(result: object) -> list[dict]:
    """Each performance workload's predicted candidate and baseline time, and its counting time."""
    return [
        {
            "workload": w.label,
            "candidate_us": w.candidate.get("median_us"),
            "baseline_us": w.baseline.get("median_us"),
            "count_s": w.candidate.get("count_s"),
        }
        for w in result.workloads  # type: ignore[attr-defined]
    ]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="sim:h200")
    parser.add_argument(
        "--tasks", nargs="*", help="task ids, space- or comma-separated (default: all)"
    )
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    wanted = task_filter(args.tasks)
    tasks = [t for t in discover() if not wanted or t.id in wanted]
    unknown = wanted - {t.id for t in tasks}
    if unknown:
        parser.error(f"no such task: {', '.join(sorted(unknown))}")
    records = []
    with Evaluator(args.device) as evaluator:
        for task in tasks:
            t0 = time.monotonic()
            result = evaluator.evaluate(task, task.file("starter.py"), seed=1)
            wall = time.monotonic() - t0
            stages = {s.name: round(s.seconds or 0.0, 2) for s in result.stages}
            failed = result.stage(result.failed_stage).message if result.failed_stage else None
            slowest = max(
                result.workloads, key=lambda w: w.candidate.get("count_s") or 0.0, default=None
            )
            records.append(
                {
                    "task": task.id,
                    "status": result.status,
                    "wall_s": round(wall, 2),
                    "stages": stages,
                    "speedup": result.speedup,
                    "message": (failed or "")[:400] or None,
                    "slowest_count_s": slowest.candidate.get("count_s") if slowest else None,
                    "load_1min": os.getloadavg()[0],
                    "predictions": predictions(result),
                }
            )
            print(
                f"{task.id:42s} {result.status:8s} {wall:6.1f} s  {stages} {(failed or '')[:300]}",
                flush=True,
            )
    walls = [r["wall_s"] for r in records]
    summary = {
        "median_s": statistics.median(walls),
        "max_s": max(walls),
        "over_15s": [r["task"] for r in records if r["wall_s"] > 15],
    }
    print(json.dumps(summary))
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "device": args.device,
                    "machine": machine(),
                    "records": records,
                    "summary": summary,
                },
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
