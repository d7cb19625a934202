"""Every bundled task on a GPU, in one device call: each task's baseline, submitted as a
candidate, passes its own task with no flag (full pipeline; its times and fraction of speed of
light per visible workload are the figures of docs/tasks.md), then each starter passes.

    PYTHONPATH=. python3 bench/tasks_gpu.py --device cuda:0 --out $OUT [--tasks ID ...] [--part K/N]
    PYTHONPATH=. python3 bench/tasks_gpu.py --impls --device cuda:0 --out $OUT [--tasks ID ...]

`--impls` instead times every baseline implementation each task's baseline.py can run here
(bench/baseline_impls.py: the peaks probe first, then one correctness run and the harness's
timer per workload and implementation) and writes baselines_gpu.json: one record per
(gpu, task, workload, baseline_impl), with the launch floor and both speed-of-light fractions.

Writes tasks_gpu.json (every result, after each task, so a run cut short keeps what it
measured) and tasks_gpu.md (the per-workload table) under --out; exits 1 if a starter or a
baseline failed or was flagged.
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
from core.tasks.discovery import discover


def table(records: list[dict]) -> str:
    lines = [
        "| task | workload | model | baseline (µs) | spread | roofline (µs) | baseline SOL | starter (µs) | starter / baseline |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in records:
        starter = {w["label"]: w for w in (r.get("starter") or {}).get("workloads", [])}
        for w in (r.get("baseline") or {}).get("workloads", []):
            if w["hidden"]:
                continue
            base, roof = w["baseline"], w["roofline_us"]
            roof_text, sol = (
                (f"{roof:.2f}", f"{roof / base['median_us'] * 100:.1f}%") if roof else ("–", "–")
            )
            s = starter.get(w["label"])
            cand = (
                (
                    f"{s['candidate']['median_us']:.2f}",
                    f"{base['median_us'] / s['candidate']['median_us']:.2f}×",
                )
                if s
                else ("–", "–")
            )
            lines.append(
                f"| {r['task']} | {w['label']} | {w.get('model') or ''} | {base['median_us']:.2f} | ±{base['spread'] * 100:.1f}% | "
                f"{roof_text} | {sol} | {cand[0]} | {cand[1]} |"
            )
    return "\n".join(lines) + "\n"


def _summary(result) -> dict:
    return {
        "status": result.status,
        "failed_stage": result.failed_stage,
        "message": result.stage(result.failed_stage).message if result.failed_stage else None,
        "flags": result.integrity_flags,
        "notes": result.review_notes,
    }


def impls_main(args) -> int:
    """`--impls`: every baseline implementation, on this process's device."""
    import torch

    from bench.baseline_impls import measure_task
    from core.devices.device import probe
    from core.harness.probe import measure_peaks

    info = probe(args.device)
    device = torch.device("cuda:0" if args.device.startswith("cuda") else args.device)
    cpu = device.type == "cpu"
    peaks = {} if cpu else measure_peaks(str(device))
    print(f"peaks probe: {peaks}", flush=True)
    floors = {"graph": peaks.get("launch_graph_us"), "eager": peaks.get("launch_eager_us")}
    tasks = [t for t in discover() if not t.multi_rank and (not args.tasks or t.id in args.tasks)]
    if args.tasks:  # in the order given: a run cut short by the device's limit keeps the first
        tasks.sort(key=lambda t: args.tasks.index(t.id))
    data: dict = {
        "device": {**info.to_json(), "versions": info.versions},
        "peaks_probe": peaks,
        "records": [],
    }
    t0 = time.monotonic()
    bad = 0
    for task in tasks:
        print(f"[{time.monotonic() - t0:6.1f}s] {task.id}", flush=True)
        try:
            recs = measure_task(task, info, device, floors, cpu=cpu, only=args.only_impls)
        except Exception:  # noqa: BLE001 - a task whose files do not load must not hide the others
            recs = [{"task": task.id, "correct": False, "error": traceback.format_exc()[-1500:]}]
            print(recs[0]["error"], flush=True)
        bad += sum(not r.get("correct") for r in recs)
        data["records"] += recs
        (args.out / "baselines_gpu.json").write_text(json.dumps(data, indent=1, default=str))
    print(f"done in {time.monotonic() - t0:.0f} s; {bad} record(s) not correct", flush=True)
    return 1 if bad else 0


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--out", type=Path, default=Path("."))
    parser.add_argument("--tasks", nargs="*")
    parser.add_argument("--part", help="K/N: the K-th of N equal slices of the tasks")
    parser.add_argument(
        "--roles",
        nargs="+",
        default=["baseline", "starter"],
        choices=["baseline", "starter"],
        help="which files to evaluate, in this order",
    )
    parser.add_argument(
        "--impls",
        action="store_true",
        help="time every baseline implementation (bench/baseline_impls.py) instead of the pipeline",
    )
    parser.add_argument(
        "--only-impls", nargs="*", help="with --impls: only these implementation names"
    )
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.impls:
        return impls_main(args)
    # Multi-rank tasks need a world of ranks: bench/comm_gpu.py runs those.
    tasks = [t for t in discover() if not t.multi_rank and (not args.tasks or t.id in args.tasks)]
    stem = "tasks_gpu"
    if args.part:
        k, n = (int(x) for x in args.part.split("/"))
        tasks = tasks[(k - 1) * len(tasks) // n : k * len(tasks) // n]
        stem = f"tasks_gpu-{k}-of-{n}"
    records = [{"task": t.id} for t in tasks]
    bad = 0
    t0 = time.monotonic()
    # Baselines first (their times are docs/tasks.md's figures), then starters: a run cut
    # short by the device's time limit still has every baseline.
    with Evaluator(args.device) as full:
        info = {**full.info.to_json(), "versions": full.info.versions}
        for role in args.roles:
            for task, record in zip(tasks, records):
                start = time.monotonic()
                try:
                    result = full.evaluate(task, task.file(f"{role}.py"), seed=1234)
                    record[role] = {
                        **_summary(result),
                        "seconds": round(time.monotonic() - start, 1),
                        "speedup": result.speedup,
                        "sol_fraction": result.sol_fraction,
                        "workloads": [w.__dict__ for w in result.workloads],
                    }
                    ok = result.status == "passed" and not result.integrity_flags
                except Exception:  # noqa: BLE001 - one broken task must not hide the others
                    record[role] = {"status": "error", "error": traceback.format_exc()}
                    ok = False
                bad += not ok
                (args.out / f"{stem}.json").write_text(
                    json.dumps({"device": info, "records": records}, indent=1, default=str)
                )
                (args.out / f"{stem}.md").write_text(table(records))
                r = record[role]
                print(
                    f"[{time.monotonic() - t0:6.1f}s] {'ok  ' if ok else 'FAIL'} {task.id:40s} {role:8s} {r.get('status')} {r.get('failed_stage') or ''} "
                    f"speedup {r.get('speedup', 0):.2f} sol {r.get('sol_fraction')} ({r.get('seconds')} s) "
                    f"{(r.get('message') or r.get('error') or '')[:400]} {r.get('flags') or ''}",
                    flush=True,
                )
    print(table(records))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
