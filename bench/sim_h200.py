"""The H200 call behind `sim:h200`: the measured-baseline table with its provenance, and the
published-kernel set the simulator is validated on, in one device call.

    python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
    PYTHONPATH=$PWD:/tmp/site python3 bench/sim_h200.py --out $OUT          # everything (~6 min of H200)
    PYTHONPATH=. python3 bench/sim_h200.py --tasks norm/add_rmsnorm --write-table   # re-measure one task's baseline

1. **Baselines.** For every single-device task (or `--tasks`): every implementation its
   baseline.py can run here (IMPLS: Liger, vLLM, ... where they import, and the torch
   composition), at every visible and fixed hidden GPU workload plus `--draws` shapes drawn from
   the hidden ranges with a fixed seed (one by default): one correctness run against the reference, then the
   harness's own timer (core/harness/timing.py: fresh inputs for every call, L2 flushed, CUDA
   graphs below 50 µs of roofline, as the arena times them; bench/baseline_impls.py). Each task's
   provenance (core/devices/sim/provenance.py: the code hash of baseline.py, what it imports
   from the task folder and inputs.py) and the library versions are recorded.
2. **Published kernels** (bench/sim_published/: Liger, FlagGems, Unsloth, vLLM, SGLang and the
   Triton tutorials, rewritten for the tasks' signatures) at the visible and fixed hidden
   workloads, the held-out ones first, timed the same way, after a correctness run. Their measured speedup divides the same run's baseline.

Writes under --out, after every task (a run cut short keeps what it measured):
- `sim_h200.json`: every record (copy it to bench/results/sim_h200.json);
- `sim_baselines.json`: the measured-baseline table rebuilt from every committed run and this
  one (bench/sim_baselines.py; copy it to core/data/sim_baselines.json, then
  `python -m core.tasks.manifest update`). `--write-table` writes core/data/sim_baselines.json
  itself and re-records the manifest (for a GPU machine that is also the checkout).
The CPU side (bench/sim_heldout.py) predicts every record on `sim:h200` and writes the figures
and docs/simulation.md's tables.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import random
import sys
import time
import traceback
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import sim_baselines
import torch
from baseline_impls import TaskBench, measure_task
from sim_published import KERNELS

from core.devices.device import probe
from core.devices.sim.baselines import TABLE_FILE
from core.devices.sim.provenance import library_versions, task_code
from core.model.task import Task
from core.model.workload import Workload
from core.tasks.discovery import discover

SOURCE_NAME = "bench/results/sim_h200.json"  # where the lead commits this run's records


def workloads_of(task: Task, draws: int, cpu: bool = False) -> list[Workload]:
    """Visible and fixed hidden GPU workloads, then `draws` shapes from the hidden ranges (a
    fixed seed: the same shapes every run, so runs can be compared). `cpu`: the CPU workloads
    (a check of the kernels on this machine, through Triton's interpreter)."""
    sets = task.workloads(cpu=cpu)
    found = list(sets.visible) + list(sets.hidden.fixed)
    if sets.hidden.draw is not None and draws and sets.hidden.fixed:
        rng = random.Random(f"sim_h200:{task.id}")
        taken = {w.label for w in found}
        for _ in range(50 * draws):
            if len([w for w in found if w.note == "drawn"]) >= draws:
                break
            base = rng.choice(sets.hidden.fixed)
            axes = dict(base.axes)
            for axis, (low, high) in sets.hidden.draw.ranges.items():
                axes[axis] = rng.randint(low, high)
            w = Workload(axes, base.model, "drawn")
            if w.label not in taken:
                taken.add(w.label)
                found.append(w)
    return found


def _load(path: Path, name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def measure_published(
    task: Task, kernel: Any, info: Any, device: torch.device, workloads: list[Workload]
) -> list[dict[str, Any]]:
    bench = TaskBench(task, info, device)
    path = ROOT / "bench" / "sim_published" / f"{kernel.name}.py"
    try:
        fn = _load(path, f"published_{kernel.name}").run
    except Exception as exc:  # noqa: BLE001 - a kernel that does not import here is a finding
        return [{"kernel": kernel.name, "task": task.id, "correct": False, "message": repr(exc)}]
    records = []
    for w in workloads:
        t0 = time.monotonic()
        rec = {
            "kernel": kernel.name,
            "source": kernel.source,
            "split": kernel.split,
            "task": task.id,
            "workload": w.label,
            "axes": w.axes,
            **bench.measure(fn, w, {}),
            "seconds": 0.0,
        }
        rec["seconds"] = round(time.monotonic() - t0, 2)
        records.append(rec)
        print(
            f"  {kernel.name:34s} {w.label[:44]:44s} {'ok ' if rec.get('correct') else 'BAD'} "
            f"{rec.get('median_us', float('nan')):10.2f} µs {rec.get('mode') or ''} {rec.get('message') or ''}",
            flush=True,
        )
    return records


def write(out: Path, data: dict[str, Any], table: bool) -> None:
    (out / "sim_h200.json").write_text(json.dumps(data, indent=1, default=str))
    if not table:
        return
    run = out / "sim_h200.json"
    # every committed run and this one, as bench/sim_baselines.py would rebuild it once this
    # run's file is committed as SOURCE_NAME
    paths = [p for p in sim_baselines.default_paths() if p.name != run.name] + [run]
    fresh = sim_baselines.build(
        sim_baselines.collect(paths, names={run: SOURCE_NAME}),
        [sim_baselines._name(p) for p in paths[:-1]] + [SOURCE_NAME],
    )
    (out / "sim_baselines.json").write_text(json.dumps(fresh, indent=1, sort_keys=True) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--out", type=Path, default=Path("."))
    parser.add_argument(
        "--tasks", nargs="*", help="these tasks only (default: every single-device task)"
    )
    parser.add_argument(
        "--draws",
        type=int,
        default=1,
        help="shapes drawn from each task's hidden ranges (baselines)",
    )
    parser.add_argument("--no-published", action="store_true", help="the baselines only")
    parser.add_argument("--no-baselines", action="store_true", help="the published kernels only")
    parser.add_argument("--kernels", nargs="*", help="these published kernels only")
    parser.add_argument(
        "--budget-s", type=float, default=420.0, help="stop starting new work after this long"
    )
    parser.add_argument(
        "--write-table",
        action="store_true",
        help="also write core/data/sim_baselines.json and re-record the manifest",
    )
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    info = probe(args.device)
    device = torch.device("cuda:0" if args.device.startswith("cuda") else args.device)
    cpu = device.type == "cpu"
    if cpu:  # a check of the set on this machine: Triton through its interpreter, CPU sizes
        from core.harness.triton_cpu import enable_interpreter

        enable_interpreter()
    tasks = [t for t in discover() if not t.multi_rank and (not args.tasks or t.id in args.tasks)]
    if args.tasks and len(tasks) < len(set(args.tasks)):
        missing = sorted(set(args.tasks) - {t.id for t in tasks})
        print(f"unknown or multi-rank task(s): {', '.join(missing)}", file=sys.stderr)
        return 2
    data: dict[str, Any] = {
        "device": {**info.to_json(), "versions": info.versions},
        "versions": library_versions(),
        "measured_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join(sys.argv),
        "provenance": {},
        "records": [],
        "published": [],
    }
    print(f"{info.model} ({args.device}); {data['versions']}", flush=True)
    bad = 0
    for task in [] if args.no_baselines else tasks:
        if time.monotonic() - t0 > args.budget_s:
            print(
                f"budget of {args.budget_s:.0f} s spent: {task.id} and later not measured",
                flush=True,
            )
            break
        print(f"[{time.monotonic() - t0:6.1f}s] {task.id}", flush=True)
        data["provenance"][task.id] = task_code(task.path).to_json()
        try:
            recs = measure_task(
                task, info, device, {}, workloads=workloads_of(task, args.draws, cpu)
            )
        except Exception:  # noqa: BLE001 - a task whose files do not load must not hide the others
            recs = [{"task": task.id, "correct": False, "error": traceback.format_exc()[-1500:]}]
            print(recs[0]["error"], flush=True)
        bad += sum(not r.get("correct") for r in recs)
        data["records"] += recs
        write(args.out, data, table=False)
    if not cpu and not args.no_baselines:
        write(args.out, data, table=True)
    by_id = {t.id: t for t in tasks}
    # held-out kernels first: a run cut short by its budget keeps what validates the model
    for kernel in [] if args.no_published else sorted(KERNELS, key=lambda k: k.split != "heldout"):
        task = by_id.get(kernel.task)
        if task is None or (args.kernels and kernel.name not in args.kernels):
            continue
        if time.monotonic() - t0 > args.budget_s:
            print(
                f"budget of {args.budget_s:.0f} s spent: {kernel.name} and later not measured",
                flush=True,
            )
            break
        print(
            f"[{time.monotonic() - t0:6.1f}s] published {kernel.name} ({kernel.source})", flush=True
        )
        try:
            # visible and fixed hidden workloads: the drawn shapes serve the baselines' model
            recs = measure_published(task, kernel, info, device, workloads_of(task, 0, cpu))
        except Exception:  # noqa: BLE001 - one kernel must not hide the others
            recs = [
                {
                    "kernel": kernel.name,
                    "task": task.id,
                    "correct": False,
                    "error": traceback.format_exc()[-1500:],
                }
            ]
            print(recs[0]["error"], flush=True)
        data["published"] += recs
        write(args.out, data, table=False)
    if not cpu and not args.no_baselines:
        write(args.out, data, table=True)
    if args.write_table and not cpu:
        from core.tasks import manifest

        TABLE_FILE.write_text((args.out / "sim_baselines.json").read_text())
        manifest.record([TABLE_FILE])  # the table is bundled engine data
        print(f"wrote {TABLE_FILE} (and the manifest)", flush=True)
    print(
        f"done in {time.monotonic() - t0:.0f} s: {len(data['records'])} baseline and "
        f"{len(data['published'])} published records, {bad} baseline record(s) not correct; "
        f"{args.out / 'sim_h200.json'}, {args.out / 'sim_baselines.json'}",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
