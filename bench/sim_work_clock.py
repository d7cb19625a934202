"""The sample's clock (core/harness/sim/clock.py), calibrated on this machine: interpreter seconds
against interpreted work, per counted launch, over real kernels.

    PYTHONPATH=. python3 bench/sim_work_clock.py measure    # on an idle machine (~10 min on 2 cores)
    PYTHONPATH=. python3 bench/sim_work_clock.py fit        # seconds ≈ a·ops + b·elements, its error

`measure` counts, as a `sim:h200` candidate's worker counts them (sim_predict.predict_candidate,
without exact programs), the Triton candidates behind the held-out figures: every bundled task's
starter, the baseline.py of the tasks whose baseline runs Liger's Triton kernels on `sim:`, and
the published kernels of bench/sim_published/, each at every GPU workload its task was measured at
(bench/sim_heldout.py's points). For every launch it records the interpreter seconds its sample
took (`Launch.interpreter_s`), the builder operations and elements tallied (`Launch.interpreted`)
and, apart, the elements of the array arguments of loads, stores, atomics and dots (part of the
elements: what `fit` weighs the choice to tally them by). One process, one point at a time:
the seconds are an idle machine's, which is what the budgets' seconds meant.

`fit` fits seconds ≈ a·ops + b·elements on the launches that took at least `MIN_S`, by least
squares on the relative error, and prints the constants clock.py takes (OP_WORK = a/b,
WORK_PER_S = 1/b), the error of the fit (|predicted / measured − 1| as a percentage, in log
terms: median, 90th percentile, worst; and the largest measured / predicted), its error on the
shorter launches, and the same fit with the elements of results alone (no array arguments).
Results: bench/results/sim_work_clock.json.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

OUT = ROOT / "bench" / "results" / "sim_work_clock.json"
POINT_TIMEOUT_S = 180
# Launches shorter than this are left out of the fit: they are far from every budget (the
# smallest is a quarter of a second), and mostly what a kernel's first programs cost once (its
# source parsed for its loops, first calls); their error is reported apart, from `SHORT_S`.
MIN_S = 0.1
SHORT_S = 0.02


def candidates() -> list[dict[str, Any]]:
    """(task, candidate file, axes) to count: each Triton candidate at its task's measured
    workloads."""
    from sim_heldout import measured_points, run_file

    from core.tasks.discovery import find_task

    points = measured_points(run_file())
    axes_by_task: dict[str, list[dict[str, Any]]] = {}
    liger_tasks: set[str] = set()
    for p in points:
        if p["kind"] == "identity":
            axes_by_task.setdefault(p["task"], [])
            if p["axes"] not in axes_by_task[p["task"]]:
                axes_by_task[p["task"]].append(p["axes"])
            if p["impl"] == "liger":
                liger_tasks.add(p["task"])
    chosen: list[dict[str, Any]] = []

    def spread(task: str) -> list[dict[str, Any]]:
        return axes_by_task.get(task, [])

    for task in sorted(axes_by_task):
        files = [find_task(task).file("starter.py")]
        if task in liger_tasks:
            files.append(find_task(task).file("baseline.py"))
        for path in files:
            if path.is_file():
                chosen += [{"task": task, "path": str(path), "axes": a} for a in spread(task)]
    published = sorted({(p["task"], p["candidate"]) for p in points if p["kind"] == "published"})
    for task, candidate in published:
        chosen += [{"task": task, "path": str(ROOT / candidate), "axes": a} for a in spread(task)]
    return chosen


def measure(only: list[str] | None = None) -> None:
    import signal

    from sim_fit import point_job

    from core.devices.device import sim_info
    from core.devices.sim import sim_section
    from core.harness.protocol import SIM_GPU_ENV
    from core.harness.sim import count as sim_count
    from core.harness.sim import hooks as sim_hooks
    from core.harness.sim import predict as sim_predict
    from core.harness.triton_cpu import enable_interpreter
    from core.tasks.discovery import find_task
    from core.tasks.modules import load_module

    section = sim_section(sim_info("sim:h200"))
    compiler = sim_predict.CompileCache(section["aot"], None)  # before the interpreter
    enable_interpreter()
    import os

    os.environ[SIM_GPU_ENV] = "sim:h200"  # baseline.py takes Liger's Triton branch, as on sim:

    # The elements of the array arguments of loads, stores, atomics and dots, by launch: part of
    # each launch's elements, recorded apart to weigh the choice to tally them.
    arrays: dict[int, int] = {}
    tallied_arrays = sim_hooks._arrays

    def recorded_arrays(args: tuple[Any, ...]) -> int:
        n = tallied_arrays(args)
        c = sim_count.Counting.active
        if c is not None and c.current is not None:
            arrays[id(c.current)] = arrays.get(id(c.current), 0) + n
        return n

    sim_hooks._arrays = recorded_arrays
    launches: list[dict[str, Any]] = []
    exit_counting = sim_count.Counting.__exit__

    def recorded_exit(self: Any, *exc: object) -> None:
        for launch in self.launches:
            launches.append(
                {
                    "kernel": launch.kernel,
                    "programs": launch.num_programs,
                    "sampled": len(launch.programs),
                    "seconds": launch.interpreter_s,
                    "ops": launch.interpreted.ops,
                    "elements": launch.interpreted.elements,
                    "array_elements": arrays.get(id(launch), 0),
                }
            )
        exit_counting(self, *exc)

    sim_count.Counting.__exit__ = recorded_exit  # type: ignore[method-assign]

    def too_slow(_signum: int, _frame: Any) -> None:
        raise TimeoutError(f"not counted within {POINT_TIMEOUT_S} s")

    signal.signal(signal.SIGALRM, too_slow)
    rows = []
    chosen = candidates()
    if only:
        chosen = [p for p in chosen if any(o in p["path"] or o == p["task"] for o in only)]
    for n, point in enumerate(chosen):
        task = find_task(point["task"])
        specs, workload, custom = point_job(task, point["axes"], n)
        launches.clear()
        arrays.clear()
        began = time.perf_counter()
        error = None
        try:
            module = load_module(Path(point["path"]), f"clock_candidate_{n}")
            signal.alarm(POINT_TIMEOUT_S)
            try:
                sim_predict.predict_candidate(
                    module.run, specs, workload, 1, custom, compiler, exact=False
                )
            finally:
                signal.alarm(0)
        except Exception as exc:  # noqa: BLE001 - recorded: a point the sim could not count
            error = f"{type(exc).__name__}: {exc}"[:200]
        name = Path(point["path"]).relative_to(ROOT)
        print(
            f"{point['task']:36s} {str(name)[-40:]:40s} {len(launches):3d} launches "
            f"{time.perf_counter() - began:6.1f} s {error or ''}",
            flush=True,
        )
        rows.append({**point, "path": str(name), "error": error, "launches": list(launches)})
    OUT.write_text(
        json.dumps(
            {
                "machine": f"{_cpu_model()}, {os.cpu_count()} cores",
                "measured": time.strftime("%Y-%m-%d"),
                "points": rows,
            },
            indent=1,
        )
    )
    print(f"wrote {OUT}: {sum(len(r['launches']) for r in rows)} launches")


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _least_squares(rows: list[tuple[float, float, float]]) -> tuple[float, float]:
    """(a, b) minimising Σ ((a·x + b·y) / t − 1)² over rows (x, y, t): the relative error."""
    sxx = sum((x / t) ** 2 for x, _, t in rows)
    syy = sum((y / t) ** 2 for _, y, t in rows)
    sxy = sum(x * y / t**2 for x, y, t in rows)
    sx = sum(x / t for x, _, t in rows)
    sy = sum(y / t for _, y, t in rows)
    det = sxx * syy - sxy**2
    return (sx * syy - sy * sxy) / det, (sy * sxx - sx * sxy) / det


def _pct(log_error: float) -> float:
    return round(100 * (math.exp(log_error) - 1), 1)


def _errors(rows: list[tuple[float, float, float]], a: float, b: float) -> dict[str, float]:
    """|log(predicted / measured)| over rows, as percentages of the measured seconds."""
    logs = sorted(abs(math.log((a * x + b * y) / t)) for x, y, t in rows)
    ratios = [t / (a * x + b * y) for x, y, t in rows]
    return {
        "median_pct": _pct(statistics.median(logs)),
        "p90_pct": _pct(logs[int(0.9 * (len(logs) - 1))]),
        "worst_pct": _pct(logs[-1]),
        "slowest_measured_over_predicted": round(max(ratios), 2),
    }


def _rows(launches: list[dict[str, Any]], results_only: bool = False) -> list[tuple[float, ...]]:
    """(ops, elements, seconds) per launch; `results_only`: without the array arguments."""
    return [
        (
            float(x["ops"]),
            float(x["elements"] - (x["array_elements"] if results_only else 0)),
            float(x["seconds"]),
        )
        for x in launches
    ]


def fit() -> None:
    data = json.loads(OUT.read_text())
    every = [x for p in data["points"] for x in p["launches"] if x["ops"] > 0]
    launches = [x for x in every if x["seconds"] >= MIN_S]
    short = [x for x in every if SHORT_S <= x["seconds"] < MIN_S]
    kept = _rows(launches)
    a, b = _least_squares(kept)
    a2, b2 = _least_squares(_rows(launches, results_only=True))
    kernels = {(p["path"], x["kernel"]) for p in data["points"] for x in p["launches"]}
    figures = {
        "machine": data["machine"],
        "measured": data["measured"],
        "candidates": len({p["path"] for p in data["points"]}),
        "points": len(data["points"]),
        "kernels": len(kernels),
        "launches": len(launches),
        "seconds": round(sum(t for *_, t in kept), 1),
        "fit": {
            "seconds_per_op": a,
            "seconds_per_element": b,
            "OP_WORK": round(a / b),
            "WORK_PER_S": round(1 / b),
            **_errors(kept, a, b),
        },
        f"short_launches_{SHORT_S:g}_to_{MIN_S:g}_s": {
            "launches": len(short),
            **_errors(_rows(short), a, b),
        },
        "fit_results_only": {
            "seconds_per_op": a2,
            "seconds_per_element": b2,
            **_errors(_rows(launches, results_only=True), a2, b2),
        },
    }
    data["figures"] = figures
    OUT.write_text(json.dumps(data, indent=1))
    print(json.dumps(figures, indent=1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("step", choices=["measure", "fit"])
    parser.add_argument("--only", nargs="*", help="measure: these tasks or candidate files only")
    args = parser.parse_args()
    measure(args.only) if args.step == "measure" else fit()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
