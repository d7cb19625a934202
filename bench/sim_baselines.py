"""Regenerate core/data/sim_baselines.json: each task's measured baseline time per GPU and
workload, and the per-task model a `sim:` device uses for shapes the table lacks
(core/sim/baselines.py, docs/simulation.md "Measured baselines").

    PYTHONPATH=. python3 bench/sim_baselines.py                       # every bench/results/*_tasks*.json
    PYTHONPATH=. python3 bench/sim_baselines.py bench/results/h200_tasks_run4.json ...

Reads the JSON that bench/tasks_gpu.py writes ({device, records: [{task, baseline, starter}]}).
Every timed workload of either side carries the baseline's own timing; a workload measured in
several runs keeps the median of their medians. A record's `baseline_impl` (which implementation
the baseline ran: the torch composition, or a production library) keys the entry; records made
before that field existed ran the task's torch composition (`torch`). The GPU is the device's
peaks key (`h200`), the one a `sim:` device id names.
"""

from __future__ import annotations

import argparse
import glob
import json
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from core.devices import DeviceError, sim_info  # noqa: E402
from core.evaluate import roofline_for  # noqa: E402
from core.sim.baselines import DEFAULT_IMPL, TABLE_FILE, axes_key, fit_task_model  # noqa: E402
from core.tasks import TaskError, Workload, find_task  # noqa: E402


def collect(paths: list[Path]) -> dict[tuple[str, str, str], dict[str, list[float]]]:
    """(gpu, task, impl) -> axes key -> the baseline medians measured there."""
    found: dict[tuple[str, str, str], dict[str, list[float]]] = {}
    for path in paths:
        data = json.loads(path.read_text())
        gpu = (data.get("device") or {}).get("peaks")
        if not gpu:
            print(f"{path}: no device.peaks, skipped", file=sys.stderr)
            continue
        for record in data.get("records") or []:
            for side in ("baseline", "starter", "candidate"):
                result = record.get(side)
                if not isinstance(result, dict):
                    continue
                impl = record.get("baseline_impl") or result.get("baseline_impl") or DEFAULT_IMPL
                for w in result.get("workloads") or []:
                    median = (w.get("baseline") or {}).get("median_us")
                    if isinstance(median, (int, float)) and median > 0 and w.get("mode") != "predicted":
                        found.setdefault((gpu, record["task"], impl), {}).setdefault(axes_key(w["axes"]), []).append(float(median))
    return found


def build(found: dict[tuple[str, str, str], dict[str, list[float]]], sources: list[str]) -> dict[str, Any]:
    gpus: dict[str, Any] = {}
    for (gpu, task_id, impl), workloads in sorted(found.items()):
        try:
            task, info = find_task(task_id), sim_info(f"sim:{gpu}")
        except (TaskError, DeviceError) as exc:
            print(f"{task_id} on {gpu}: {exc}; skipped", file=sys.stderr)
            continue
        entry: dict[str, Any] = {"workloads": {}}
        points = []
        for key, medians in sorted(workloads.items()):
            axes = {k: int(v) for k, v in (kv.split("=") for kv in key.split(","))}
            median = statistics.median(medians)
            roof = roofline_for(task, Workload(axes), info)
            entry["workloads"][key] = {"median_us": round(median, 4), "runs": len(medians), **({"roofline_us": round(roof, 4)} if roof else {})}
            if roof:
                points.append((roof, median))
        model = fit_task_model(points)
        if model is not None:
            entry["model"] = {k: round(v, 4) if isinstance(v, float) else v for k, v in model.to_json().items()}
        gpus.setdefault(gpu, {}).setdefault(task_id, {})[impl] = entry
    return {
        "about": "measured baseline medians per GPU, task, baseline implementation and workload (axes sorted), and per task "
                 "t = intercept_us + slope x roofline_us fitted on them; made by bench/sim_baselines.py",
        "sources": sources, "gpus": gpus,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", nargs="*", type=Path, help="bench/tasks_gpu.py JSON files (default: bench/results/*_tasks*.json)")
    parser.add_argument("--out", type=Path, default=TABLE_FILE)
    args = parser.parse_args()
    paths = args.results or [Path(p) for p in sorted(glob.glob(str(ROOT / "bench/results/*_tasks*.json")))]
    if not paths:
        print("no results given and none in bench/results", file=sys.stderr)
        return 2
    for p in paths:
        if not p.is_file():
            print(f"{p}: no such file", file=sys.stderr)
            return 2
    table = build(collect(paths), [str(p.resolve().relative_to(ROOT)) if p.resolve().is_relative_to(ROOT) else str(p) for p in paths])
    args.out.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
    n = sum(len(e["workloads"]) for t in table["gpus"].values() for i in t.values() for e in i.values())
    for gpu, tasks in table["gpus"].items():
        for task_id, impls in tasks.items():
            for impl, e in impls.items():
                m = e.get("model") or {}
                print(f"{gpu} {task_id} [{impl}]: {len(e['workloads'])} workloads; model {m.get('intercept_us')} + {m.get('slope')} x roofline, ±{m.get('error')}")
    print(f"wrote {args.out}: {n} measured workloads")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
