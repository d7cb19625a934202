"""Every baseline implementation of every single-device task, timed on one device: the
figures behind docs/tasks.md's baseline table and the measured-baseline table of the sim.

For each task, each implementation its baseline.py lists in `IMPLS` (task.yaml's
`baselines:`, best first) that imports here, and each visible GPU workload: one correctness
run against the reference (the harness's own judge, check.py included), then the harness's
own timer (core/harness/timing.py: fresh inputs every call, L2 flushed, CUDA graph replays
for workloads whose roofline is under 50 µs, as the arena times them; the median and the
interquartile spread). The device's launch floor is measured first by the peaks probe
(core/harness/probe.py) and every workload's speed of light is max(roofline, floor).

Run by `bench/tasks_gpu.py --impls` (the same device call as the full pipeline's runs).
This is not the full pipeline: no alternation with a candidate's process, one correctness
seed. Records are keyed by (gpu, task, workload, baseline_impl).
"""

from __future__ import annotations

import importlib.util
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from core.devices.device import DeviceInfo
from core.evaluation import scoring
from core.evaluation.job import GRAPH_BELOW_US, roofline_for, spec_json
from core.harness import checking, inputs, timing
from core.model.task import Task


def _module(path: Path, name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def impls_of(task: Task) -> tuple[Any, dict[str, Callable | None]]:
    """(baseline module, its IMPLS) — a module without IMPLS has one: `run`, under the
    task's only declared name."""
    mod = _module(task.file("baseline.py"), f"bench_baseline_{task.id.replace('/', '_')}")
    impls = getattr(mod, "IMPLS", None)
    if impls is None:
        impls = {task.baselines[0].impl: mod.run}
    return mod, dict(impls)


class TaskBench:
    """What timing any implementation of one task needs: its reference, input maker, checker and
    rule, loaded once."""

    def __init__(self, task: Task, info: DeviceInfo, device: torch.device):
        self.task, self.info, self.device = task, info, device
        self.ref = _module(
            task.file("reference.py"), f"bench_reference_{task.id.replace('/', '_')}"
        ).run
        self.custom = (
            _module(task.file("inputs.py"), "bench_inputs").make_inputs
            if task.file("inputs.py").is_file()
            else None
        )
        self.check = checking.load_check(task.path)
        self.specs = [spec_json(s) for s in task.inputs]
        self.out_specs = [spec_json(s) for s in task.outputs]
        self.rule = {
            "atol": task.correctness.atol,
            "rtol": task.correctness.rtol,
            "min_match": task.correctness.min_match,
        }

    def workload(self, w: Any) -> dict[str, Any]:
        return {"axes": w.axes, "shapes": self.task.tensor_shapes(w.axes)}

    def measure(
        self,
        fn: Callable,
        w: Any,
        floors: dict[str, float | None],
        budget_ms: float = 100.0,
    ) -> dict[str, Any]:
        """One correctness run of `fn` against the reference, then the harness's timer at
        workload `w`: {correct, message, median_us, spread, mode, ...}."""
        wl = self.workload(w)
        roof = roofline_for(self.task, w, self.info) if self.info.sol_peaks else None
        graph = self.device.type == "cuda" and roof is not None and roof < GRAPH_BELOW_US
        rec: dict[str, Any] = {}
        try:
            args = inputs.correctness_inputs(self.specs, wl, 1234, self.device, self.custom)
            ref_args = [
                a.clone() if isinstance(a, torch.Tensor) else a for a in args
            ]  # in-place tasks write args
            with torch.no_grad():
                want = self.ref(*ref_args)
                got = fn(*args)
            want = list(want) if isinstance(want, (tuple, list)) else [want]
            got = list(got) if isinstance(got, (tuple, list)) else [got]
            verdict = checking.judge(
                self.out_specs,
                [g.to(self.device) for g in got],
                want,
                ref_args,
                self.rule,
                self.check,
            )
            bad = {k: v.get("message") for k, v in verdict.items() if not v.get("passed")}
            rec["correct"] = not bad
            rec["message"] = "; ".join(f"{k}: {v}" for k, v in bad.items())[:300] or None
            fresh = inputs.FreshInputs(self.specs, wl, 99, self.device, self.custom)
            timed = timing.time_calls(fn, fresh, self.device, budget_ms, 3, 1000, 0, graph)
            s = timing.summarize(timed["times_us"])
            floor = floors.get("graph" if timed["mode"] == "graph" else "eager")
            sol_us = scoring.reachable_us(roof, floor)
            rec.update(
                median_us=s["median_us"],
                spread=s["spread"],
                ci_rel=s.get("ci_rel"),
                calls=s["n"],
                mode=timed["mode"],
                roofline_us=roof,
                launch_floor_us=floor,
                sol_us=sol_us,
                sol_fraction=scoring.sol_fraction(sol_us, s["median_us"]),
                roofline_fraction=scoring.sol_fraction(roof, s["median_us"]),
                graph_error=timed.get("graph_error"),
            )
        except Exception as exc:  # noqa: BLE001 - one implementation failing must not hide the others
            rec.update(
                correct=False,
                message=f"{type(exc).__name__}: {exc}"[:300],
                error=traceback.format_exc()[-1500:],
            )
        return rec


def measure_task(
    task: Task,
    info: DeviceInfo,
    device: torch.device,
    floors: dict[str, float | None],
    cpu: bool = False,
    budget_ms: float = 100.0,
    only: list[str] | None = None,
    log: Callable[[str], None] = print,
    workloads: list[Any] | None = None,
) -> list[dict[str, Any]]:
    """One record per (workload, implementation); `workloads`: the task's visible ones unless given."""
    mod, impls = impls_of(task)
    bench = TaskBench(task, info, device)
    records = []
    for w in workloads if workloads is not None else task.workloads(cpu=cpu).visible:
        selected = None  # what run() itself picks for this workload on this device (its IMPL)
        try:
            mod.run(
                *inputs.correctness_inputs(bench.specs, bench.workload(w), 7, device, bench.custom)
            )
            selected = (
                getattr(mod, "IMPL", None) if hasattr(mod, "IMPLS") else task.baselines[0].impl
            )
        except Exception:  # noqa: BLE001 - reported through the per-implementation records
            pass
        for name, fn in impls.items():
            if fn is None or (only and name not in only):
                continue
            rec: dict[str, Any] = {
                "gpu": info.peaks_key or info.model,
                "device_model": info.model,
                "task": task.id,
                "workload": w.label,
                "axes": w.axes,
                "model": w.model,
                "baseline_impl": name,
                "kind": (task.baseline_impl(name).kind if task.baseline_impl(name) else None),
                "selected": name == selected,  # the implementation the task's baseline runs here
            }
            t0 = time.monotonic()
            rec.update(bench.measure(fn, w, floors, budget_ms))
            rec["seconds"] = round(time.monotonic() - t0, 2)
            records.append(rec)
            log(
                f"  {task.id:36s} {w.label[:44]:44s} {name:10s} {'ok ' if rec.get('correct') else 'BAD'} "
                f"{rec.get('median_us', float('nan')):10.2f} µs  sol {100 * (rec.get('sol_fraction') or 0):5.1f}%  "
                f"roofline {100 * (rec.get('roofline_fraction') or 0):5.1f}% {rec.get('mode') or ''} {rec.get('message') or ''}"
            )
            sys.stdout.flush()
    return records
