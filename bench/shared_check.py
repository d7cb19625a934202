"""Correctness runs through shared memory (core/harness/shared_check.py, issue 20): the
correctness and generalization stages' seconds, old path against new, for one evaluation and
for a batch.

    PYTHONPATH=. python3 bench/shared_check.py --out DIR [--device cuda:0] [--tasks norm/add_rmsnorm ...]
        [--repeat 3] [--batch 4]

For each task: one warm-up evaluation (JIT compiles), then `--repeat` times, alternately, the
old path (`Timing(shared_io=False)`: inputs drawn in the candidate's process, every output
relayed over the sockets through the harness parent) and the new one (inputs drawn by the
trusted worker into a memfd or CUDA IPC region, outputs written into its slots): one
evaluation, then a batch of `--batch` copies of the starter (`aevaluate_batch`). The
performance stage is skipped: only the stages this path changes are measured. Per row: status,
whether every run went through shared memory (no stage note says otherwise), the two stages'
seconds. Writes DIR/shared_check.json and DIR/shared_check.md (medians, spread, old/new ratio).
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

from core.evaluation.evaluator import Evaluator, Timing
from core.harness.shared_check import OLD_PATH_NOTE
from core.tasks.spec import load_task

STAGES = ("correctness", "generalization")
DEVICE_TYPE = ["cuda"]  # the --device's type, for its default Timing
CANDIDATE = ["starter.py"]  # --candidate
# One secret seed for every evaluation: the drawn hidden workloads (their shapes) are the same
# on both paths, so their seconds compare.
SEED = 20261201


def _row(result, shared: bool) -> dict:
    seconds = {s: result.stage(s).seconds or 0.0 for s in STAGES}
    return {
        "path": "shared" if shared else "old",
        "status": result.status,
        "flags": result.integrity_flags,
        "through_shared_memory": not any(
            OLD_PATH_NOTE in (result.stage(s).note or "") for s in STAGES
        ),
        "old_path_notes": [result.stage(s).note for s in STAGES if result.stage(s).note],  # why not
        "workloads": sum(len(result.stage(s).workloads) for s in STAGES),
        **{f"{s}_s": seconds[s] for s in STAGES},
        "checks_s": sum(seconds.values()),
    }


def _set(evaluator: Evaluator, shared: bool) -> None:
    base = evaluator.timing or Timing.for_device(DEVICE_TYPE[0])
    evaluator.timing = Timing(**{**base.__dict__, "shared_io": shared})


def _single(evaluator: Evaluator, task, shared: bool) -> dict:
    _set(evaluator, shared)
    t0 = time.monotonic()
    result = evaluator.evaluate(task, task.path / CANDIDATE[0], seed=SEED, performance=False)
    return {"kind": "single", "wall_s": time.monotonic() - t0, **_row(result, shared)}


def _batch(evaluator: Evaluator, task, shared: bool, size: int) -> list[dict]:
    _set(evaluator, shared)
    t0 = time.monotonic()
    results = asyncio.run(
        evaluator.aevaluate_batch(
            task, [task.path / CANDIDATE[0]] * size, seed=SEED, performance=False
        )
    )
    wall = time.monotonic() - t0
    return [{"kind": f"batch{size}", "wall_s": wall, **_row(r, shared)} for r in results]


def _summary(rows: list[dict], tasks: list[str]) -> list[str]:
    lines = [
        "| task | run | path | rows | all shared | status | checks s (median) | spread (min–max) | per workload s | old/new |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name in tasks:
        for kind in sorted({r["kind"] for r in rows}):
            medians = {}
            for path in ("old", "shared"):
                sel = [r for r in rows if (r["task"], r["kind"], r["path"]) == (name, kind, path)]
                if not sel:
                    continue
                secs = [r["checks_s"] for r in sel]
                medians[path] = statistics.median(secs)
                ratio = (
                    f"{medians['old'] / medians['shared']:.2f}x"
                    if path == "shared" and medians.get("shared")
                    else ""
                )
                lines.append(
                    f"| {name} | {kind} | {path} | {len(sel)} | {all(r['through_shared_memory'] for r in sel)} "
                    f"| {','.join(sorted({r['status'] for r in sel}))} | {medians[path]:.2f} "
                    f"| {min(secs):.2f}–{max(secs):.2f} | {medians[path] / max(1, sel[0]['workloads']):.3f} | {ratio} |"
                )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--tasks", nargs="*", default=["norm/add_rmsnorm", "activation/silu_mul"])
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--batch", type=int, default=4, help="0: no batch runs")
    parser.add_argument(
        "--candidate",
        default="starter.py",
        help="the task folder's file evaluated (reference.py: plain PyTorch, the harness's cost shows)",
    )
    parser.add_argument("--budget-s", type=float, default=0.0, help="start no repeat after this")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    DEVICE_TYPE[0], CANDIDATE[0] = args.device.split(":")[0], args.candidate
    rows: list[dict] = []
    started = time.monotonic()
    lines: list[str] = []
    with Evaluator(args.device) as evaluator:
        for name in args.tasks:
            task = load_task(ROOT / "tasks" / name)
            print(f"{name}: warm-up", flush=True)
            _single(evaluator, task, True)
            for k in range(args.repeat):
                if args.budget_s and time.monotonic() - started > args.budget_s:
                    print(f"{name}: budget spent, repeat {k} not run", flush=True)
                    break
                for shared in (False, True):
                    new = [_single(evaluator, task, shared)]
                    if args.batch:
                        new += _batch(evaluator, task, shared, args.batch)
                    for row in new:
                        row["task"] = name
                        print(json.dumps(row), flush=True)
                    rows += new
                    # after every row: a call's time limit may end the run at any point
                    (args.out / "shared_check.json").write_text(json.dumps(rows, indent=1))
                    lines = _summary(rows, args.tasks)
                    (args.out / "shared_check.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
