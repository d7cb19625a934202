"""How long a simulated evaluation takes: every bundled task's starter on a `sim:` device, the
full pipeline (compile, CPU correctness on visible and hidden workloads, predicted performance
at GPU sizes), one warm harness, wall clock per task.

    PYTHONPATH=. python3 bench/sim_speed.py --device sim:h200 --json bench/results/sim_speed.json
    PYTHONPATH=. python3 bench/sim_speed.py --tasks gemm/bf16_gemm,moe/fused_moe
    PYTHONPATH=. python3 bench/sim_speed.py --tasks elementwise/kv_cache_write --seeds 0,1,2,3

Target (issue 10, issue 36: the median task): at most 15 s per task on 2 CPU cores. Prints one
line per task (wall clock, and the CPU seconds of the harness's process tree: on a shared
machine the wall clock also counts the others' work) and the median and maximum; the JSON keeps per-stage seconds, the machine, and each performance
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


def tree_cpu_s(root: int) -> float:
    """CPU seconds (user + system) spent so far by `root`'s live descendants and the children
    they reaped: the harness's warm parent and its forked workers. On a shared machine the wall
    clock says how busy the others were; this says what the evaluation itself cost."""
    tick = os.sysconf("SC_CLK_TCK")
    parents: dict[int, int] = {}
    times: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(entry)] = int(fields[1])
        times[int(entry)] = sum(int(x) for x in fields[11:15]) / tick  # utime stime cutime cstime
    inside, todo = set(), [root]
    while todo:
        pid = todo.pop()
        for child, parent in parents.items():
            if parent == pid and child not in inside:
                inside.add(child)
                todo.append(child)
    with open(f"/proc/{root}/stat") as f:
        own = f.read().rsplit(")", 1)[1].split()
    return sum(times.get(p, 0.0) for p in inside) + sum(int(x) for x in own[13:15]) / tick


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
            # its first count's sample fell short of a hold: counted again with more programs
            "recounted": any(str(n).startswith("recounted") for n in w.notes or []),
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
    parser.add_argument(
        "--seeds",
        default="1",
        help="evaluation seeds, comma-separated: each task is evaluated once per seed (the "
        "seed draws the hidden workloads and every workload's inputs)",
    )
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    wanted = task_filter(args.tasks)
    tasks = [t for t in discover() if not wanted or t.id in wanted]
    unknown = wanted - {t.id for t in tasks}
    if unknown:
        parser.error(f"no such task: {', '.join(sorted(unknown))}")
    records = []
    with Evaluator(args.device) as evaluator:
        for task, seed in [(t, s) for t in tasks for s in seeds]:
            t0, cpu0 = time.monotonic(), tree_cpu_s(os.getpid())
            result = evaluator.evaluate(task, task.file("starter.py"), seed=seed)
            wall = time.monotonic() - t0
            cpu = tree_cpu_s(os.getpid()) - cpu0
            stages = {s.name: round(s.seconds or 0.0, 2) for s in result.stages}
            stage = result.stage(result.failed_stage) if result.failed_stage else None
            failed = (stage.message or f"{stage.name}: {stage.status}") if stage else None
            slowest = max(
                result.workloads, key=lambda w: w.candidate.get("count_s") or 0.0, default=None
            )
            records.append(
                {
                    "task": task.id,
                    "seed": seed,
                    "status": result.status,
                    "wall_s": round(wall, 2),
                    # what it cost on 2 idle cores, at best: its CPU seconds over two
                    "cpu_s": round(cpu, 2),
                    "stages": stages,
                    "speedup": result.speedup,
                    "message": (failed or "")[:400] or None,
                    "slowest_count_s": slowest.candidate.get("count_s") if slowest else None,
                    "load_1min": os.getloadavg()[0],
                    "predictions": predictions(result),
                }
            )
            label = task.id if len(seeds) == 1 else f"{task.id} seed {seed}"
            print(
                f"{label:42s} {result.status:8s} {wall:6.1f} s  cpu {cpu:6.1f} s  {stages} {(failed or '')[:300]}",
                flush=True,
            )
    walls = [r["wall_s"] for r in records]
    cpus = [r["cpu_s"] for r in records]
    summary = {
        "median_s": statistics.median(walls),
        "max_s": max(walls),
        "over_15s": [r["task"] for r in records if r["wall_s"] > 15],
        "median_cpu_s": statistics.median(cpus),
        "median_cpu_s_over_2_cores": statistics.median(cpus) / 2,
        "load_1min_mean": statistics.fmean(r["load_1min"] for r in records),
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
