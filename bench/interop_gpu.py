"""Imported tasks on a GPU, in one device call: each task's starter (the problem's own model,
eager) and, where given, a candidate written for it, through the full pipeline.

    PYTHONPATH=. python3 bench/interop_gpu.py --tasks-dir DIR --out $OUT \
        kernelbench/l1_019_relu=bench/interop_candidates/kernelbench_relu_triton.py kernelbench/l1_001_square_matrix_multiplication

Each argument is TASK_ID or TASK_ID=CANDIDATE. Writes interop_gpu.json (every result, after
each evaluation) and interop_gpu.md (the table docs/interop.md shows) under --out.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from core.evaluation.evaluator import Evaluator
from core.tasks.discovery import find_task


def row(task_id: str, role: str, r: dict) -> str:
    if r.get("status") != "passed":
        why = (r.get("message") or r.get("error") or "")[:120].replace("|", "/").replace("\n", " ")
        return f"| {task_id} | {role} | {r.get('status')} {r.get('failed_stage') or ''} | – | – | – | {why} |"
    w = r["workloads"][0]
    sol = f"{r['sol_fraction'] * 100:.1f}%" if r.get("sol_fraction") else "–"
    return f"| {task_id} | {role} | passed | {w['baseline']['median_us']:.1f} | {w['candidate']['median_us']:.1f} | {r['speedup']:.2f}× | SOL {sol} |"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--tasks-dir", type=Path, required=True)
    parser.add_argument("--out", type=Path, default=Path("."))
    parser.add_argument("items", nargs="+", metavar="TASK[=CANDIDATE]")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    records: list[dict] = []
    lines = [
        "| task | candidate | status | baseline (µs, visible) | candidate (µs) | speedup (all workloads) | notes |",
        "| --- | --- | --- | ---: | ---: | ---: | --- |",
    ]
    t0 = time.monotonic()
    with Evaluator(args.device) as evaluator:
        info = {**evaluator.info.to_json(), "versions": evaluator.info.versions}
        for item in args.items:
            task_id, _, candidate = item.partition("=")
            try:
                task = find_task(task_id, args.tasks_dir)
            except Exception as exc:  # noqa: BLE001 - a task that does not load is a finding, not the end of the call
                r = {
                    "task": task_id,
                    "role": "load",
                    "status": "error",
                    "error": f"{type(exc).__name__}: {exc}",
                }
                records.append(r)
                lines.append(row(task_id, "load", r))
                print(f"{task_id}: does not load: {r['error'][:300]}", flush=True)
                continue
            for role, path in [("starter", task.file("starter.py"))] + (
                [("candidate", Path(candidate))] if candidate else []
            ):
                start = time.monotonic()
                try:
                    result = evaluator.evaluate(task, path, seed=1234)
                    r = {
                        "task": task_id,
                        "role": role,
                        "candidate": str(path),
                        "status": result.status,
                        "failed_stage": result.failed_stage,
                        "message": result.stage(result.failed_stage).message
                        if result.failed_stage
                        else None,
                        "flags": result.integrity_flags,
                        "speedup": result.speedup,
                        "sol_fraction": result.sol_fraction,
                        "seconds": round(time.monotonic() - start, 1),
                        "workloads": [w.__dict__ for w in result.workloads],
                    }
                except Exception:  # noqa: BLE001 - one broken task must not hide the others
                    r = {
                        "task": task_id,
                        "role": role,
                        "status": "error",
                        "error": traceback.format_exc(),
                    }
                records.append(r)
                lines.append(row(task_id, role, r))
                (args.out / "interop_gpu.json").write_text(
                    json.dumps({"device": info, "records": records}, indent=1, default=str)
                )
                (args.out / "interop_gpu.md").write_text("\n".join(lines) + "\n")
                print(
                    f"[{time.monotonic() - t0:6.1f}s] {task_id} {role}: {r['status']} {r.get('failed_stage') or ''} speedup {r.get('speedup', 0):.2f} ({r.get('seconds')} s) {(r.get('message') or r.get('error') or '')[:300]}",
                    flush=True,
                )
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
