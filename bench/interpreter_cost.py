"""What an interpreted Triton call costs on the CPU device, with the harness's interpreter patches
as they are against Triton's own front end for the three that only save time (issue 42, item 4:
docs/performance.md, "The interpreter's cost per program").

Each task's starter runs on its CPU visible workloads' inputs (drawn as the harness draws them,
seed 1), in a fresh process per side: `arena`, `triton_cpu.enable_interpreter()` as the harness
calls it; `triton`, the same with the dead overflow checks, the interned block types and the
same-shape broadcast left out (the correctness patches, bf16 and fp8, stay on both sides: without
them the kernels compute something else). The sides alternate, `--repeats` times each; per task
the median milliseconds a call (the best of 3 timings of `--calls` calls) on each side, their
ratio and its spread over the repeats, and whether both sides' outputs are equal bit for bit.

    PYTHONPATH=. python3 bench/interpreter_cost.py --out bench/results/interpreter_cost.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TASKS = (
    "activation/silu_mul",
    "norm/add_rmsnorm",
    "elementwise/rope",
    "gemm/bf16_gemm",
    "moe/route_topk_softmax",
)
SPEED_ONLY = ("_skip_dead_overflow_checks", "_interned_block_types", "_same_shapes_not_broadcast")


def side(task_id: str, mode: str, calls: int) -> dict:
    """In this process: one task's starter, `calls` calls per visible workload, 3 timings."""
    sys.path.insert(0, str(ROOT))
    from core.harness import triton_cpu

    if mode == "triton":
        for name in SPEED_ONLY:
            setattr(triton_cpu, name, lambda: None)
    triton_cpu.enable_interpreter()
    import hashlib

    import torch

    from core.devices.device import probe
    from core.evaluation.job import build_job
    from core.harness import inputs
    from core.harness.worker_tools import module_from_source
    from core.tasks.discovery import discover

    task = next(t for t in discover() if t.id == task_id)
    with tempfile.TemporaryDirectory() as tmp:
        job = build_job(task, task.file("starter.py"), probe("cpu"), "cpu", 1, Path(tmp))
    starter = module_from_source(task.file("starter.py").read_bytes(), "starter", "starter.py")
    device = torch.device("cpu")
    best, digest = float("inf"), hashlib.sha256()
    workloads = job["stages"]["correctness"]
    args = [inputs.correctness_inputs(job["inputs"], w, 1, device, None) for w in workloads]
    for a in args:  # the first call of each workload outside the timing
        starter.run(*a)
    for _ in range(3):
        t0 = time.perf_counter()
        for a in args:
            for _ in range(calls):
                out = starter.run(*a)
        best = min(best, (time.perf_counter() - t0) / (calls * len(args)))
    for a in args:
        out = starter.run(*a)
        for t in out if isinstance(out, (tuple, list)) else [out]:
            digest.update(t.contiguous().view(torch.uint8).numpy().tobytes())
    return {"ms_per_call": best * 1e3, "outputs_sha256": digest.hexdigest()}


def run_side(task_id: str, mode: str, calls: int) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OPENBLAS_NUM_THREADS": "1"}
    code = f"import json,sys; sys.path.insert(0,{str(ROOT / 'bench')!r}); import interpreter_cost as b; print(json.dumps(b.side({task_id!r},{mode!r},{calls})))"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"{task_id} ({mode}) failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tasks", nargs="*", default=list(TASKS))
    p.add_argument("--calls", type=int, default=3)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--out", type=Path)
    args = p.parse_args()
    rows = []
    for task_id in args.tasks:
        got: dict[str, list[dict]] = {"triton": [], "arena": []}
        for r in range(args.repeats):
            for mode in ("triton", "arena") if r % 2 == 0 else ("arena", "triton"):
                got[mode].append(run_side(task_id, mode, args.calls))
        ratios = [t["ms_per_call"] / a["ms_per_call"] for t, a in zip(got["triton"], got["arena"])]
        row = {
            "task": task_id,
            "triton_ms": round(statistics.median(x["ms_per_call"] for x in got["triton"]), 2),
            "arena_ms": round(statistics.median(x["ms_per_call"] for x in got["arena"]), 2),
            "speedup_median": round(statistics.median(ratios), 2),
            "speedup_range": [round(min(ratios), 2), round(max(ratios), 2)],
            "same_outputs": len({x["outputs_sha256"] for x in got["triton"] + got["arena"]}) == 1,
        }
        rows.append(row)
        print(
            f"{task_id}: {row['triton_ms']} ms -> {row['arena_ms']} ms a call, "
            f"{row['speedup_median']}x ({row['speedup_range'][0]}-{row['speedup_range'][1]}), "
            f"same outputs: {row['same_outputs']}",
            flush=True,
        )
    report = {
        "command": " ".join(["python3", *sys.argv]),
        "machine": {
            "cpus": os.cpu_count(),
            "processor": platform.processor() or platform.machine(),
        },
        "rows": rows,
    }
    if args.out:
        args.out.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
