"""Regenerate core/data/sim_baselines.json: each task's measured baseline time per GPU and
workload, and the per-task model a `sim:` device uses for shapes the table lacks
(core/devices/sim/baselines.py, docs/simulation.md "Measured baselines").

    PYTHONPATH=. python3 bench/sim_baselines.py      # every bench/results/*_tasks*.json and *_baselines.json
    PYTHONPATH=. python3 bench/sim_baselines.py bench/results/h200_tasks_run4.json ...

Reads two formats. bench/tasks_gpu.py's ({device, records: [{task, baseline, starter}]}): every
timed workload of either side carries the baseline's own timing; a record's `baseline_impl`
(which implementation the baseline ran) keys the entry, and records made before that field
existed ran the task's torch composition (`torch`). The production-baseline runs
(bench/results/h200_baselines.json: {records: [{gpu, task, axes, baseline_impl, selected,
median_us}]}) time every importable implementation of a task's `baselines:` per workload, and
`selected` marks the one the baseline itself runs there: the table keeps each implementation's
times and, per implementation, the workloads where it is the selected one. A workload measured
in several runs keeps the median of their medians. The GPU is the device's peaks key (`h200`),
the one a `sim:` device id names.
"""

from __future__ import annotations

import argparse
import glob
import json
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from core.devices.device import DeviceError, sim_info
from core.devices.sim.baselines import DEFAULT_IMPL, TABLE_FILE, axes_key, fit_task_model
from core.evaluation.job import roofline_for
from core.model.workload import Workload
from core.tasks.discovery import find_task
from core.tasks.fields import TaskError


@dataclass
class Measured:
    """One (gpu, task, implementation): its medians per workload, and the workloads where the
    baseline selects it (from the production-baseline runs' `selected`)."""

    medians: dict[str, list[float]] = field(default_factory=dict)
    selected: set[str] = field(default_factory=set)


Found = dict[tuple[str, str, str], Measured]


def collect(paths: list[Path]) -> Found:
    """(gpu, task, impl) -> what was measured of it."""
    found: Found = {}

    def add(gpu: str, task: str, impl: str, axes: dict[str, Any], median: Any) -> Measured | None:
        if not (isinstance(median, (int, float)) and median > 0):
            return None
        m = found.setdefault((gpu, task, impl), Measured())
        m.medians.setdefault(axes_key(axes), []).append(float(median))
        return m

    for path in paths:
        data = json.loads(path.read_text())
        peaks = (data.get("device") or {}).get("peaks")
        for record in data.get("records") or []:
            if (
                "median_us" in record and "axes" in record
            ):  # a production-baseline run: one implementation at one workload
                gpu = record.get("gpu") or peaks
                if not gpu or not record.get("correct", True) or record.get("mode") == "predicted":
                    continue
                m = add(
                    gpu,
                    record["task"],
                    record.get("baseline_impl") or DEFAULT_IMPL,
                    record["axes"],
                    record["median_us"],
                )
                if m is not None and record.get("selected"):
                    m.selected.add(axes_key(record["axes"]))
                continue
            if not peaks:
                print(f"{path}: no device.peaks, skipped", file=sys.stderr)
                break
            for side in ("baseline", "starter", "candidate"):
                result = record.get(side)
                if not isinstance(result, dict):
                    continue
                impl = record.get("baseline_impl") or result.get("baseline_impl") or DEFAULT_IMPL
                for w in result.get("workloads") or []:
                    if w.get("mode") != "predicted":
                        add(
                            peaks,
                            record["task"],
                            impl,
                            w["axes"],
                            (w.get("baseline") or {}).get("median_us"),
                        )
    return found


def build(found: Found, sources: list[str]) -> dict[str, Any]:
    gpus: dict[str, Any] = {}
    for (gpu, task_id, impl), measured in sorted(found.items()):
        workloads = measured.medians
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
            entry["workloads"][key] = {
                "median_us": round(median, 4),
                "runs": len(medians),
                **({"roofline_us": round(roof, 4)} if roof else {}),
            }
            if roof:
                points.append((roof, median))
        if measured.selected:
            entry["selected"] = sorted(
                measured.selected
            )  # where the baseline runs this implementation
        model = fit_task_model(points)
        if model is not None:
            entry["model"] = {
                k: round(v, 4) if isinstance(v, float) else v for k, v in model.to_json().items()
            }
        gpus.setdefault(gpu, {}).setdefault(task_id, {})[impl] = entry
    return {
        "about": "measured baseline medians per GPU, task, baseline implementation and workload (axes sorted), the workloads "
        "where the baseline selects each implementation, and per task and implementation "
        "t = intercept_us + slope x roofline_us fitted on them; made by bench/sim_baselines.py",
        "sources": sources,
        "gpus": gpus,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "results",
        nargs="*",
        type=Path,
        help="bench/tasks_gpu.py or production-baseline JSON files (default: bench/results/*_tasks*.json and *_baselines.json)",
    )
    parser.add_argument("--out", type=Path, default=TABLE_FILE)
    args = parser.parse_args()
    paths = args.results or [
        Path(p)
        for pattern in ("*_tasks*.json", "*_baselines.json")
        for p in sorted(glob.glob(str(ROOT / "bench/results" / pattern)))
    ]
    if not paths:
        print("no results given and none in bench/results", file=sys.stderr)
        return 2
    for p in paths:
        if not p.is_file():
            print(f"{p}: no such file", file=sys.stderr)
            return 2
    table = build(
        collect(paths),
        [
            str(p.resolve().relative_to(ROOT)) if p.resolve().is_relative_to(ROOT) else str(p)
            for p in paths
        ],
    )
    args.out.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
    n = sum(
        len(e["workloads"]) for t in table["gpus"].values() for i in t.values() for e in i.values()
    )
    for gpu, tasks in table["gpus"].items():
        for task_id, impls in tasks.items():
            for impl, e in impls.items():
                m = e.get("model") or {}
                print(
                    f"{gpu} {task_id} [{impl}]: {len(e['workloads'])} workloads; model {m.get('intercept_us')} + {m.get('slope')} x roofline, ±{m.get('error')}"
                )
    print(f"wrote {args.out}: {n} measured workloads")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
