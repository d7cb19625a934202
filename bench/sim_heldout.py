"""`sim:h200` against the H200: the identity, the held-out published kernels and the band, on
the CPU, from the GPU call's records (bench/sim_h200.py).

    PYTHONPATH=. python3 bench/sim_heldout.py predict [--jobs 2]   # count every point (~10-20 min on 2 cores)
    PYTHONPATH=. python3 bench/sim_heldout.py fit                  # the library constants and the bands -> core/data/sim_constants.json
    PYTHONPATH=. python3 bench/sim_heldout.py report               # figures -> bench/results/sim_heldout_h200.json, docs/simulation.md

Points (a candidate at a workload, with its measured H200 time), from `RUN`
(bench/results/sim_h200.json; before that call, the production-baseline run
bench/results/h200_baselines.json stands in for the baselines):
- `identity`: each task's baseline.py submitted as the candidate, at every workload where the
  implementation it runs on `sim:` (Liger through the interpreter, else its torch composition)
  was measured: the predicted time against that implementation's measured time. A `sim:`
  speedup of the baseline against itself divides the implementation the GPU selects, which is
  another one where it cannot run on the CPU (a vendor CUDA library): those points say which was
  predicted against which;
- `published`: the kernels of bench/sim_published/ (Liger, FlagGems, Unsloth, vLLM, SGLang, the
  Triton tutorials), `fit` or `heldout` by their catalogue entry: the predicted speedup (the
  table's measured baseline over the predicted time) against the measured one (the same run's
  baseline over the kernel's measured time).

`predict` counts each point as a `sim:h200` evaluation's performance stage counts it
(core/harness/sim/predict.py, the parent's checks in sim/stage.py) and keeps the counts, so that
`fit` and `report` re-price them with any constants in seconds. `fit` fits the constants of the
library model behind torch calls (model.glue_time) on the identity points of the torch
compositions only, and the launch costs inside CUDA graphs on them and the fit half of the
published set; the held-out half never enters it. The published set is split by kernel: every
other kernel of each family, by name, is the fit half (`split_published`). The ± bands are
then the 85th percentile of the fit half's errors per family, compounded with each baseline's
own uncertainty; the report says how often they cover the held-out half (the aim: 80%).
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

RESULTS = ROOT / "bench" / "results"
RUN = RESULTS / "sim_h200.json"
STAND_IN = RESULTS / "h200_baselines.json"  # until RUN exists: the baselines measured 2026-12-01
POINTS = RESULTS / "sim_heldout_points_h200.json"
REPORT = RESULTS / "sim_heldout_h200.json"
DOC = ROOT / "docs" / "simulation.md"
BEGIN, END = "<!-- sim_heldout:begin -->", "<!-- sim_heldout:end -->"
ON_CPU = ("torch", "liger")  # the implementations a baseline.py runs on a sim: device
COVER = 0.8  # a band covers this share of the held-out cases
CALIBRATE = 0.85  # the quantile of the fit half a band is set to: a margin for a small fit half
MIN_FAMILY = 8  # fit points a family needs for a band of its own


def run_file() -> Path:
    return RUN if RUN.is_file() else STAND_IN


def measured_points(path: Path) -> list[dict[str, Any]]:
    """Every point of one GPU run: identity points (baselines on the CPU's implementations) and
    published kernels, with the workload's measured baselines by implementation."""
    from core.devices.sim.baselines import axes_key

    data = json.loads(path.read_text())
    baselines: dict[tuple[str, str], dict[str, Any]] = {}
    for r in data.get("records") or []:
        if r.get("correct") and r.get("median_us"):
            b = baselines.setdefault((r["task"], axes_key(r["axes"])), {})
            b[r["baseline_impl"]] = {
                "median_us": r["median_us"],
                "spread": r.get("spread"),
                "mode": r.get("mode"),
                "selected": bool(r.get("selected")),
            }
    points = []
    for r in data.get("records") or []:
        if not (r.get("correct") and r.get("median_us")) or r["baseline_impl"] not in ON_CPU:
            continue
        impls = baselines[(r["task"], axes_key(r["axes"]))]
        selected = next((i for i, b in impls.items() if b["selected"]), r["baseline_impl"])
        points.append(
            {
                "kind": "identity",
                "task": r["task"],
                "candidate": "baseline.py",
                "impl": r["baseline_impl"],
                "axes": r["axes"],
                "label": r.get("workload"),
                "note": r.get("model"),
                "measured_us": r["median_us"],
                "mode": r.get("mode"),
                "split": "fit",  # the library constants (torch) and graph launch costs (Liger)
                "baseline_impl": selected,
                "measured_baseline_us": impls[selected]["median_us"],
                "baseline_spread": impls[selected].get("spread"),
            }
        )
    for r in data.get("published") or []:
        if not (r.get("correct") and r.get("median_us")):
            continue
        impls = baselines.get((r["task"], axes_key(r["axes"]))) or {}
        selected = next((i for i, b in impls.items() if b["selected"]), None)
        points.append(
            {
                "kind": "published",
                "task": r["task"],
                "candidate": f"bench/sim_published/{r['kernel']}.py",
                "kernel": r["kernel"],
                "source": r.get("source"),
                "split": r.get("split", "heldout"),
                "axes": r["axes"],
                "label": r.get("workload"),
                "measured_us": r["median_us"],
                "mode": r.get("mode"),
                "baseline_impl": selected,
                "measured_baseline_us": impls[selected]["median_us"] if selected else None,
                "baseline_spread": impls[selected].get("spread") if selected else None,
            }
        )
    return points


# A point counted longer than this is recorded as not counted (`predict --point-timeout-s`; the
# fp8 grouped GEMM's largest baseline points take 300-420 s on two loaded cores).
POINT_TIMEOUT_S = float(os.environ.get("SIM_POINT_TIMEOUT_S", "180"))


class TooSlow(Exception):
    pass


def _alarm(_signum: int, _frame: Any) -> None:
    raise TooSlow(f"not counted within {POINT_TIMEOUT_S:.0f} s")


def _count(batch: list[dict[str, Any]], sink: Path | None = None) -> list[dict[str, Any]]:
    """Count a batch of points in this process, as a sim:h200 candidate worker would. A point
    whose counting takes longer than POINT_TIMEOUT_S (a torch composition run for real at GPU
    size, such as prefill's chunked attention) is recorded as not counted. Each row is also
    appended to `sink` as it is made, so that a process killed on the way loses nothing it
    finished (`_count_all`)."""
    import signal

    signal.signal(signal.SIGALRM, _alarm)
    from sim_fit import point_job  # the same job a measured point is counted with there

    from core.devices.device import sim_info
    from core.devices.sim import sim_section
    from core.devices.sim.anchors import counter_code
    from core.devices.sim.provenance import task_code
    from core.harness.protocol import SIM_GPU_ENV
    from core.harness.sim import predict as sim_predict
    from core.harness.sim import stage as sim_stage
    from core.harness.triton_cpu import enable_interpreter
    from core.tasks.discovery import find_task
    from core.tasks.modules import load_module as _load

    section = sim_section(sim_info("sim:h200"))
    compiler = sim_predict.CompileCache(section["aot"], None)
    enable_interpreter()
    modules: dict[str, Any] = {}
    out = []
    for n, p in enumerate(batch):
        task = find_task(p["task"])
        specs, workload, custom = point_job(task, p["axes"], n)
        path = task.file("baseline.py") if p["kind"] == "identity" else ROOT / p["candidate"]
        # a sim: device's candidate worker sets this: baseline.py takes Liger's Triton branch
        if p.get("impl") == "torch":
            os.environ.pop(SIM_GPU_ENV, None)
        else:
            os.environ[SIM_GPU_ENV] = "sim:h200"
        t0 = time.perf_counter()
        row = dict(p)
        try:
            if str(path) not in modules:
                modules[str(path)] = _load(path, f"candidate_{len(modules)}_{n}")
            module = modules[str(path)]
            signal.alarm(int(POINT_TIMEOUT_S))
            try:
                reply = sim_predict.predict_candidate(
                    module.run, specs, workload, 1, custom, compiler, exact=False
                )
            finally:
                signal.alarm(0)
            ran = getattr(module, "IMPL", None)
            launches = sim_stage.checked_launches(reply)
            problem = (
                sim_stage.refused_launch(reply) or (sim_stage.uncounted_launch(reply) or (None,))[0]
            )
            row.update(
                ran=ran,
                refused=problem,
                notes=reply.get("notes", [])[:8],
                launches=[[s, r] for s, r in launches],
                torch_ops=sim_stage.checked_ops(reply.get("torch_ops", []), "candidate"),
            )
        except Exception as exc:  # noqa: BLE001 - recorded: a point the sim could not count
            row.update(error=f"{type(exc).__name__}: {exc}"[:300])
        row["count_s"] = round(time.perf_counter() - t0, 2)
        # what counted it: an anchor is only the model's count while both are today's (anchors)
        row["counter_sha256"] = counter_code()
        row["code_sha256"] = task_code(task.path).code_sha256
        print(
            f"{p['kind']:9s} {p['task']:36s} {(p.get('kernel') or p.get('impl'))[:26]:26s} "
            f"{str(p['label'])[:34]:34s} {row['count_s']:6.2f} s {row.get('error') or ''}",
            flush=True,
        )
        out.append(row)
        if sink is not None:
            with (sink / f"{os.getpid()}.jsonl").open("a") as f:
                f.write(json.dumps(row, default=str) + "\n")
    return out


def _point_id(p: dict[str, Any]) -> str:
    return f"{p['kind']}|{p['task']}|{p.get('kernel') or p.get('impl')}|{_key(p)}"


def _batches(points: list[dict[str, Any]], jobs: int) -> list[list[dict[str, Any]]]:
    groups: dict[str, list[dict[str, Any]]] = {}
    for p in points:  # one candidate's points in one process (its module, its compiles)
        groups.setdefault(f"{p['task']}:{p.get('kernel') or p.get('impl')}", []).append(p)
    batches: list[list[dict[str, Any]]] = [[] for _ in range(max(1, jobs))]
    for g in sorted(groups.values(), key=len, reverse=True):
        min(batches, key=len).extend(g)
    return [b for b in batches if b]


def _count_all(points: list[dict[str, Any]], jobs: int) -> list[dict[str, Any]]:
    """Count `points` on `jobs` processes. A process that dies (the kernel's OOM killer: a torch
    composition run for real at GPU size can take 22 GB) used to hang the pool and lose every
    count; now the rows it finished are read back, the rest is counted again one process at a
    time, and a point that kills a process on its own is recorded as not counted."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="sim_heldout_") as folder:
        return _count_into(points, jobs, Path(folder))


def _count_into(points: list[dict[str, Any]], jobs: int, sink: Path) -> list[dict[str, Any]]:
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    def finished() -> dict[str, dict[str, Any]]:
        rows = {}
        for path in sink.glob("*.jsonl"):
            for line in path.read_text().splitlines():
                if line.strip():
                    row = json.loads(line)
                    rows[_point_id(row)] = row
        return rows

    lost: list[dict[str, Any]] = []
    todo, width = points, max(1, jobs)
    while todo:
        batches = _batches(todo, width)
        try:
            with ProcessPoolExecutor(
                len(batches), mp_context=multiprocessing.get_context("spawn")
            ) as pool:
                list(pool.map(_count, batches, [sink] * len(batches)))
        except BrokenProcessPool:
            print("a counting process died (out of memory?): counting the rest", flush=True)
        done = finished()
        left = [p for b in batches for p in b if _point_id(p) not in done]  # in counting order
        if left and width == 1:  # alone, the first point not finished is the one that killed it
            culprit, left = left[0], left[1:]
            print(f"not counted: {_point_id(culprit)} killed its process", flush=True)
            lost.append(
                dict(culprit, error="not counted: killed its counting process (out of memory?)")
            )
        todo, width = left, 1
    done = finished()
    return [done[_point_id(p)] for p in points if _point_id(p) in done] + lost


def predict(jobs: int, only: list[str] | None, anchor_points: bool = False) -> None:
    """Count the points (`only`: of these tasks or kernels; `anchor_points`: only the identity
    points of the implementation baseline.py runs on sim:, what `anchors` keeps), keeping the
    other points' counts from POINTS."""
    path = run_file()

    def chosen(p: dict[str, Any], sim_impls: dict[str, str]) -> bool:
        if anchor_points and not (p["kind"] == "identity" and p["impl"] == sim_impls[p["task"]]):
            return False
        return not only or p["task"] in only or p.get("kernel") in only

    every = measured_points(path)
    sim_impls: dict[str, str] = {}
    for p in every:
        if p["kind"] == "identity":
            sim_impls[p["task"]] = (
                "liger" if "liger" in (sim_impls.get(p["task"]), p["impl"]) else "torch"
            )
    points = [p for p in every if chosen(p, sim_impls)]
    kept = []
    if (only or anchor_points) and POINTS.is_file():
        kept = [p for p in json.loads(POINTS.read_text())["points"] if not chosen(p, sim_impls)]
    print(f"{len(points)} points from {path.relative_to(ROOT)} on {jobs} processes", flush=True)
    rows = _count_all(points, jobs)
    POINTS.write_text(
        json.dumps(
            {"run": str(path.relative_to(ROOT)), "device": "sim:h200", "points": kept + rows},
            indent=1,
            default=str,
        )
    )
    print(f"wrote {POINTS}: {len(rows)} points counted")


# --- pricing, fitting, figures -----------------------------------------------------------


def _target_constants() -> tuple[Any, Any]:
    from core.devices.device import sim_info
    from core.devices.sim import sim_section
    from core.harness.sim.model import Constants, Target

    section = sim_section(sim_info("sim:h200"))
    return Target.from_json(section["target"]), Constants.from_json(section["constants"])


def graph_timed(p: dict[str, Any]) -> bool:
    """Whether the GPU timed this point as a CUDA graph replay (the arena's rule: a roofline
    under 50 µs); the record's own mode where it has one."""
    if p.get("mode"):
        return p["mode"] == "graph"
    from core.devices.device import sim_info
    from core.evaluation.job import GRAPH_BELOW_US, roofline_for
    from core.model.workload import Workload
    from core.tasks.discovery import find_task

    roof = roofline_for(find_task(p["task"]), Workload(p["axes"]), sim_info("sim:h200"))
    return roof is not None and roof < GRAPH_BELOW_US


def price(p: dict[str, Any], target: Any, c: Any) -> float | None:
    from core.harness.sim.model import predict_side

    if p.get("error") or p.get("launches") is None:
        return None
    side = predict_side(
        [(s, r) for s, r in p["launches"]], p["torch_ops"], target, c, graph=graph_timed(p)
    )
    return side["median_us"] or None


GLUE = {  # name: (low, high): the library model behind torch calls
    "glue_launch_us": (1.0, 5.0),  # the eager launch measured by the probe: 4.4 µs
    "glue_graph_us": (0.5, 6.0),
    "gemm_eff": (0.2, 1.0),
    "gemm_mem_eff": (0.3, 1.0),
    "gemm_fixed_us": (0.0, 20.0),
    "attn_eff": (0.05, 1.0),
    "sort_fixed_us": (0.0, 60.0),
    "sort_mem_eff": (0.02, 1.0),
    "reduce_mem_eff": (0.1, 1.0),
    "glue_mem_eff": (0.1, 1.0),
}
LAUNCH = {"launch_graph_us": (1.0, 6.0), "next_graph_us": (0.5, 5.0)}


def _loss(rows: list[dict[str, Any]], target: Any, c: Any) -> float:
    """Mean |log(predicted / measured)|: robust to the few points no constant can reach (a
    backend's pathological shape), which a squared loss would let pull every other point."""
    errs = []
    for p in rows:
        t = price(p, target, c)
        if t:
            errs.append(abs(math.log(t / p["measured_us"])))
    return statistics.fmean(errs) if errs else float("inf")


def coordinate_fit(
    rows: list[dict[str, Any]], target: Any, start: Any, bounds: dict[str, tuple[float, float]]
) -> Any:
    """Coordinate search in log space, each constant in turn over a shrinking bracket (as
    bench/sim_fit.py fits the Triton constants)."""
    best, best_loss = start, _loss(rows, target, start)
    for r in range(6):
        for name, (lo, hi) in bounds.items():
            value = getattr(best, name) or (lo + hi) / 2
            span = 2.0 ** (2.0 / (r + 1))
            for k in range(-4, 5):
                v = min(hi, max(lo, value * span ** (k / 4)))
                trial = best.with_values(**{name: v})
                trial_loss = _loss(rows, target, trial)
                if trial_loss < best_loss:
                    best, best_loss = trial, trial_loss
    return best


def _points() -> list[dict[str, Any]]:
    if not POINTS.is_file():
        raise SystemExit(f"{POINTS} is missing: run `python3 bench/sim_heldout.py predict` first")
    points = json.loads(POINTS.read_text())["points"]
    split_published(points)
    return points


def split_published(points: list[dict[str, Any]]) -> None:
    """Every other published kernel of each family, by name, is the fit half (the bands and the
    graph launch costs are calibrated on it); the others are held out and never enter a fit. By
    kernel, not by workload: a held-out kernel's shapes are no help to the band it is judged by."""
    kernels: dict[str, set[str]] = {}
    for p in points:
        if p["kind"] == "published":
            kernels.setdefault(p["task"].split("/")[0], set()).add(p["kernel"])
    fit_half = {k for names in kernels.values() for i, k in enumerate(sorted(names)) if i % 2}
    for p in points:
        if p["kind"] == "published":
            p["split"] = "fit" if p["kernel"] in fit_half else "heldout"


def fit() -> None:
    """The library constants on the torch compositions' identity points; the graph launch cost
    of Triton kernels on Liger's identity points and the fit half of the published set. Then
    the bands (report's coverage) into core/data/sim_constants.json."""
    from core.devices.sim.targets import CONSTANTS_FILE

    target, start = _target_constants()
    # a point whose candidate ran other code than was measured (its IMPL says so) fits nothing
    points = [
        p
        for p in _points()
        if not p.get("error")
        and not p.get("refused")
        and (p["kind"] != "identity" or p.get("ran") in (None, p.get("impl")))
    ]
    torch_rows = [p for p in points if p["kind"] == "identity" and p.get("impl") == "torch"]
    triton_rows = [
        p
        for p in points
        if (p["kind"] == "identity" and p.get("impl") != "torch")
        or (p["kind"] == "published" and p["split"] == "fit")
    ]
    c = coordinate_fit(
        [p for p in torch_rows + triton_rows if graph_timed(p)], target, start, LAUNCH
    )
    c = coordinate_fit(torch_rows, target, c, GLUE)
    c = coordinate_fit([p for p in torch_rows + triton_rows if graph_timed(p)], target, c, LAUNCH)
    bands = family_bands(points, target, c)
    anchored_bands = family_bands(points, target, c, anchors(points))
    data = json.loads(CONSTANTS_FILE.read_text())
    fitted = data["fitted"]["h200"]
    names = list(GLUE) + list(LAUNCH)
    fitted["constants"].update({k: round(getattr(c, k), 4) for k in names})
    fitted["bands"] = bands
    fitted["anchored_bands"] = anchored_bands  # a prediction anchored to its baseline's count
    fitted["library_fit"] = {
        "data": str(POINTS.relative_to(ROOT)),
        "command": "PYTHONPATH=. python3 bench/sim_heldout.py fit",
        "points": {
            "torch compositions": len(torch_rows),
            "Triton (graph launch)": len(triton_rows),
        },
    }
    CONSTANTS_FILE.write_text(json.dumps(data, indent=2) + "\n")
    from core.tasks import manifest

    manifest.record([CONSTANTS_FILE])  # bundled engine data
    print(f"wrote {CONSTANTS_FILE}: " + ", ".join(f"{k}={getattr(c, k):.4g}" for k in names))
    print(f"bands by family: {bands}; anchored: {anchored_bands}")


def speedups(p: dict[str, Any], predicted_us: float) -> tuple[float, float] | None:
    """(predicted, measured) speedup of a point: the table's measured baseline (the one a
    sim:h200 evaluation divides by) over the predicted time, and the same run's baseline over
    the measured time."""
    base = p.get("measured_baseline_us")
    if not base or not predicted_us:
        return None
    return base / predicted_us, base / p["measured_us"]


def anchors(points: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    """Per (task, workload): the identity point of the implementation a task's baseline.py runs
    on `sim:` (Liger where the task measured it, through the interpreter; else its torch
    composition): the model's count of the baseline and that implementation's measured time."""
    from core.devices.sim.baselines import axes_key

    by: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
    for p in points:
        if p["kind"] == "identity" and not p.get("error") and not p.get("refused"):
            by.setdefault((p["task"], axes_key(p["axes"])), {})[p["impl"]] = p
    liger = {task for (task, _), impls in by.items() if "liger" in impls}
    return {
        key: impls["liger" if key[0] in liger else "torch"]
        for key, impls in by.items()
        if ("liger" if key[0] in liger else "torch") in impls
    }


def anchored_time(
    p: dict[str, Any], anchor: dict[str, Any] | None, target: Any, c: Any
) -> tuple[float, float] | None:
    """(the candidate's anchored time, the anchor's own band): the model's time of the candidate
    times measured(baseline) / model(baseline), both counted alike, so an error of the model
    common to both sides cancels and the baseline as the candidate is predicted at exactly its
    measured time. None without an anchor at this workload."""
    t = price(p, target, c)
    if not t or not anchor:
        return None
    model_b = price(anchor, target, c)
    if not model_b:
        return None
    band = max(0.02, float(anchor.get("baseline_spread") or 0.0) / 2)
    if anchor.get("baseline_impl") != anchor.get("impl"):
        band = 0.02  # the anchor's own figure: its spread was recorded for the selected one only
    return t * anchor["measured_us"] / model_b, band


def family_bands(
    points: list[dict[str, Any]],
    target: Any,
    c: Any,
    anchored: dict[tuple[str, str], dict[str, Any]] | None = None,
) -> dict[str, float]:
    """Per family: the band that covers CALIBRATE of the fit half's published speedups once
    compounded with the baseline's own uncertainty (core/evaluation/verdict.py compounds the two
    the same way): that quantile of |log(pred / meas)| less the baseline's, as a ± fraction,
    rounded up. A family with fewer than MIN_FAMILY fit points takes the quantile of them all.
    The held-out half says whether it covers COVER (report)."""
    by: dict[str, list[float]] = {}
    for p in points:
        if p["kind"] != "published" or p["split"] != "fit":
            continue
        t: float | None
        base_band = max(0.02, float(p.get("baseline_spread") or 0.0) / 2)
        if anchored is None:
            t = price(p, target, c)
        else:
            a = anchored_time(p, anchored.get((p["task"], _key(p))), target, c)
            t, base_band = (a[0], a[1]) if a else (None, base_band)
        if not t:
            continue
        need = abs(math.log(t / p["measured_us"])) - math.log1p(base_band)
        by.setdefault(p["task"].split("/")[0], []).append(max(0.0, need))

    def band(needs: list[float]) -> float:
        q = sorted(needs)[min(len(needs) - 1, math.ceil(CALIBRATE * len(needs)) - 1)]
        return max(0.05, math.ceil(math.expm1(q) * 1000) / 1000)

    pooled = band([n for needs in by.values() for n in needs]) if by else 0.5
    families = {p["task"].split("/")[0] for p in points if p["kind"] == "published"}
    return {
        f: band(by[f]) if len(by.get(f, [])) >= MIN_FAMILY else pooled for f in sorted(families)
    }


def _key(p: dict[str, Any]) -> str:
    from core.devices.sim.baselines import axes_key

    return axes_key(p["axes"])


def report() -> None:
    target, c = _target_constants()
    from core.devices.sim.targets import load_constants

    fitted = load_constants()["fitted"]["h200"]
    bands, anchored_bands = fitted.get("bands") or {}, fitted.get("anchored_bands") or {}
    points = _points()
    anchored = anchors(points)
    rows = []
    for p in points:
        t = price(p, target, c)
        row = {
            k: p.get(k)
            for k in (
                "kind",
                "task",
                "candidate",
                "kernel",
                "source",
                "impl",
                "ran",
                "split",
                "label",
                "measured_us",
                "baseline_impl",
                "measured_baseline_us",
                "refused",
                "error",
            )
        }
        row["predicted_us"] = t
        row["time_ratio"] = t / p["measured_us"] if t else None
        family = p["task"].split("/")[0]
        base_band = max(0.02, float(p.get("baseline_spread") or 0.0) / 2)
        s = speedups(p, t) if t else None
        if s:
            band = (1 + bands.get(family, c.band)) * (1 + base_band) - 1
            row.update(_scored(s, band))
        anchor = anchored.get((p["task"], _key(p)))
        a = anchored_time(p, anchor, target, c)
        if a and anchor:
            row["anchor_impl"] = anchor["impl"]
            row["anchored_us"] = a[0]
            row["anchored_time_ratio"] = a[0] / p["measured_us"]
            s = speedups(p, a[0])
            if s:
                # the anchor's figure, and the divided-by figure where it is another implementation
                divided = base_band if p.get("baseline_impl") != anchor["impl"] else 0.0
                band = (1 + anchored_bands.get(family, c.band)) * (1 + a[1]) * (1 + divided) - 1
                row.update({f"anchored_{k}": v for k, v in _scored(s, band).items()})
        rows.append(row)
    summary = summarize(rows)
    REPORT.write_text(
        json.dumps(
            {"run": json.loads(POINTS.read_text()).get("run"), **summary, "points": rows},
            indent=1,
            default=str,
        )
    )
    write_docs(summary)
    print(json.dumps({k: v for k, v in summary.items() if k != "identity_tasks"}, indent=1))
    print(f"wrote {REPORT} and {DOC.relative_to(ROOT)}")


def _scored(s: tuple[float, float], band: float) -> dict[str, Any]:
    """A point's predicted and measured speedups, their ratio, its band and whether it covers."""
    ratio = s[0] / s[1]
    return {
        "predicted_speedup": s[0],
        "measured_speedup": s[1],
        "ratio": ratio,
        "band": band,
        "covered": abs(math.log(ratio)) <= math.log1p(band),
    }


def _figures(rows: list[dict[str, Any]], pre: str = "") -> dict[str, Any]:
    """The issue's figures of a set of points; `pre` "anchored_": of their anchored predictions."""
    ratio, pred, meas, cov = (
        f"{pre}ratio",
        f"{pre}predicted_speedup",
        f"{pre}measured_speedup",
        f"{pre}covered",
    )
    ratios = [r[ratio] for r in rows if r.get(ratio)]
    decisive = [r for r in rows if r.get(ratio) and abs(r[meas] - 1) > 0.1]
    right = [r for r in decisive if (r[pred] > 1) == (r[meas] > 1)]
    covered = [r for r in rows if r.get(cov) is not None]
    return {
        "points": len(rows),
        "priced": len(ratios),
        "median_error": statistics.median(abs(x - 1) for x in ratios) if ratios else None,
        "decisive": len(decisive),
        "right_side": len(right) / len(decisive) if decisive else None,
        "band_coverage": (sum(1 for r in covered if r[cov]) / len(covered) if covered else None),
    }


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    published = [r for r in rows if r["kind"] == "published"]
    held = [r for r in published if r["split"] == "heldout"]
    families = sorted({r["task"].split("/")[0] for r in published})
    sources = sorted({r.get("source") or "" for r in published})
    identity: dict[str, Any] = {}
    for r in rows:
        if r["kind"] != "identity" or not r.get("time_ratio"):
            continue
        ran = r.get("ran") or r["impl"]
        name = (
            f"{r['task']} [{ran}]"
            if ran == r["impl"]
            else f"{r['task']} [{ran}, against the measured {r['impl']}]"
        )
        e = identity.setdefault(name, {"ratios": [], "against": set(), "anchored": []})
        e["ratios"].append(r["time_ratio"])
        if r.get("anchor_impl") == r["impl"] and r.get("anchored_time_ratio"):
            e["anchored"].append(r["anchored_time_ratio"])
        e["against"].add(r.get("baseline_impl"))
    identity_tasks = {
        k: {
            "workloads": len(v["ratios"]),
            "geomean": math.exp(statistics.fmean(math.log(x) for x in v["ratios"])),
            "worst": max(v["ratios"], key=lambda x: abs(math.log(x))),
            "within_10pct": sum(1 for x in v["ratios"] if abs(x - 1) <= 0.1),
            "divided_by": sorted(str(a) for a in v["against"]),
            # anchored: the implementation the sim runs is its own anchor (1.00 by construction);
            # the other one (a liger task's torch composition) is not what baseline.py runs there
            "anchored_within_10pct": sum(1 for x in v["anchored"] if abs(x - 1) <= 0.1),
            "anchored_workloads": len(v["anchored"]),
        }
        for k, v in sorted(identity.items())
    }
    figures: dict[str, Any] = {}
    for pre in ("", "anchored_"):
        figures[f"{pre}heldout"] = _figures(held, pre)
        figures[f"{pre}fit"] = _figures([r for r in published if r["split"] == "fit"], pre)
        figures[f"{pre}heldout_by_family"] = {
            f: _figures([r for r in held if r["task"].startswith(f + "/")], pre) for f in families
        }
        figures[f"{pre}heldout_by_source"] = {
            s: _figures([r for r in held if r.get("source") == s], pre) for s in sources
        }
    return {**figures, "identity_tasks": identity_tasks}


def write_anchors() -> None:
    """core/data/sim_anchors.json from POINTS: per task, the counts of the identity points of
    the implementation baseline.py runs on sim: (`anchors`), with the provenance they were
    counted under; a task with a point counted from other code than today's is left out (and
    named), so the file never holds a count of code that is not there any more."""
    from core.devices.sim.anchors import ANCHORS_FILE, RECOUNT, counter_code
    from core.devices.sim.provenance import task_code
    from core.tasks.discovery import find_task

    counter = counter_code()
    tasks: dict[str, Any] = {}
    stale: set[str] = set()
    for (task_id, key), p in sorted(anchors(_points()).items()):
        code = task_code(find_task(task_id).path).code_sha256
        if p.get("counter_sha256") != counter or p.get("code_sha256") != code:
            stale.add(task_id)
            continue
        entry = tasks.setdefault(
            task_id,
            {"impl": p["impl"], "code_sha256": code, "counter_sha256": counter, "workloads": {}},
        )
        launches = [{**summary, "resources": r} for summary, r in p["launches"]]
        entry["workloads"][key] = {"launches": launches, "torch_ops": p["torch_ops"]}
    for task_id in stale:
        tasks.pop(task_id, None)
    lost = _lost_workloads(tasks)
    ANCHORS_FILE.write_text(
        json.dumps(
            {
                "command": RECOUNT,
                "gpus": {"h200": tasks},
            },
            indent=1,
            sort_keys=True,
        )
        + "\n"
    )
    from core.tasks import manifest

    manifest.record([ANCHORS_FILE])  # bundled engine data
    print(f"wrote {ANCHORS_FILE.relative_to(ROOT)}: {len(tasks)} tasks")
    if stale:
        print(f"left out, counted from other code than today's: {', '.join(sorted(stale))}")
    if lost:
        print(
            "anchored before, not now (a point not counted: its error in "
            f"{POINTS.relative_to(ROOT)}; `predict --point-timeout-s` for slow ones): "
            + "; ".join(lost)
        )


def _lost_workloads(tasks: dict[str, Any]) -> list[str]:
    """`task: workload` anchored in the file as it stands and missing from `tasks`."""
    from core.devices.sim.anchors import ANCHORS_FILE

    if not ANCHORS_FILE.exists():
        return []
    before = json.loads(ANCHORS_FILE.read_text()).get("gpus", {}).get("h200", {})
    return [
        f"{task_id}: {key}"
        for task_id, entry in sorted(before.items())
        for key in sorted(entry.get("workloads", {}))
        if key not in tasks.get(task_id, {}).get("workloads", {})
    ]


def anchor_report() -> None:
    """Whether to anchor, decided on the fit half only: the fit's own loss (mean |log(predicted
    / measured speedup)|, as coordinate_fit) of the published fit half anchored in part, the
    factor measured(baseline) / model(baseline) raised to alpha (0: not anchored, 1: anchored),
    and per class of baseline (Liger, counted as Triton like the candidates; a torch composition,
    priced by the library model). Then the held-out half's figures for the same choices."""
    target, c = _target_constants()
    points = _points()
    anchored = anchors(points)
    rows = []
    for p in points:
        t = price(p, target, c) if p["kind"] == "published" else None
        anchor = anchored.get((p["task"], _key(p)))
        a = anchored_time(p, anchor, target, c) if t else None
        if t and a and anchor and p.get("measured_baseline_us"):
            rows.append({"p": p, "plain": t, "factor": a[0] / t, "cls": anchor["impl"]})

    def ratio(r: dict[str, Any], alpha: float) -> float:
        return r["p"]["measured_us"] / (r["plain"] * r["factor"] ** alpha)  # pred / meas speedup

    def figures(rs: list[dict[str, Any]], alpha: float) -> str:
        if not rs:
            return "–"
        loss = statistics.fmean(abs(math.log(ratio(r, alpha))) for r in rs)
        median = statistics.median(abs(ratio(r, alpha) - 1) for r in rs)
        return f"loss {loss:.4f}, median {100 * median:4.1f}%"

    out: dict[str, Any] = {}
    for split in ("fit", "heldout"):
        rs = [r for r in rows if r["p"]["split"] == split]
        for alpha in (0.0, 0.25, 0.5, 0.75, 1.0):
            out[f"{split} alpha={alpha}"] = figures(rs, alpha)
        for cls in ("liger", "torch"):
            q = [r for r in rs if r["cls"] == cls]
            out[f"{split} baseline {cls} ({len(q)}): not anchored"] = figures(q, 0.0)
            out[f"{split} baseline {cls} ({len(q)}): anchored"] = figures(q, 1.0)
    for k, v in out.items():
        print(f"{k:45s} {v}")
    (RESULTS / "sim_anchor_h200.json").write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {(RESULTS / 'sim_anchor_h200.json').relative_to(ROOT)}")


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.0f}%"


def write_docs(summary: dict[str, Any]) -> None:
    """docs/simulation.md's tables between BEGIN and END, from the report's figures."""
    lines = [
        BEGIN,
        "",
        f"*Generated by `bench/sim_heldout.py report` from {json.loads(POINTS.read_text()).get('run')}; do not edit by hand.*",
        "",
        "**Held-out published kernels** (never in any fit): predicted speedup over measured, "
        "anchored (what `sim:h200` reports: the candidate's time × measured(baseline) / model(baseline)) "
        "and, for comparison, not anchored (the candidate's modelled time alone).",
        "",
        "| set | points | median \\|pred/meas − 1\\| | right side of 1× (decisive) | band covers | not anchored: median, right side, band |",
        "| --- | ---: | ---: | ---: | ---: | --- |",
    ]

    def row(name: str, f: dict[str, Any], u: dict[str, Any]) -> str:
        side = f"{_pct(f['right_side'])} of {f['decisive']}" if f["decisive"] else "–"
        plain = f"{_pct(u['median_error'])}, {_pct(u['right_side'])}, {_pct(u['band_coverage'])}"
        return f"| {name} | {f['priced']} | {_pct(f['median_error'])} | {side} | {_pct(f['band_coverage'])} | {plain} |"

    a = "anchored_"
    lines.append(row("**all held out**", summary[a + "heldout"], summary["heldout"]))
    for family, f in summary[a + "heldout_by_family"].items():
        lines.append(row(family, f, summary["heldout_by_family"][family]))
    for source, f in summary[a + "heldout_by_source"].items():
        lines.append(row(f"from {source}", f, summary["heldout_by_source"][source]))
    lines.append(row("the fit half (for comparison)", summary[a + "fit"], summary["fit"]))
    lines += [
        "",
        "**The identity**: each task's baseline.py as the candidate, predicted time over the measured time "
        "of the implementation it runs on `sim:` (geometric mean over the task's measured workloads).",
        "",
        "The model alone (columns 3–5) and anchored (column 6: the implementation baseline.py runs on `sim:` "
        "is the anchor, so it is predicted at its measured time; a Liger task's torch composition is not what runs there).",
        "",
        "| task [implementation predicted] | workloads | model / measured | worst | within ±10% | anchored within ±10% | a sim: speedup divides by |",
        "| --- | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for name, t in summary["identity_tasks"].items():
        lines.append(
            f"| {name} | {t['workloads']} | {t['geomean']:.2f} | {t['worst']:.2f} | "
            f"{t['within_10pct']} of {t['workloads']} | "
            + (
                f"{t['anchored_within_10pct']} of {t['anchored_workloads']}"
                if t["anchored_workloads"]
                else "– (not run on sim:)"
            )
            + f" | {', '.join(f'`{a}`' for a in t['divided_by'])} |"
        )
    lines += ["", END]
    text = DOC.read_text()
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        tail = rest.split(END, 1)[1]
        DOC.write_text(head + "\n".join(lines) + tail)
    else:
        DOC.write_text(text.rstrip("\n") + "\n\n" + "\n".join(lines) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("predict")
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument(
        "--only", nargs="*", help="these tasks or kernels only (the others' counts are kept)"
    )
    p.add_argument(
        "--anchors", action="store_true", help="only baseline.py's points on sim: (for `anchors`)"
    )
    p.add_argument(
        "--point-timeout-s",
        type=float,
        default=POINT_TIMEOUT_S,
        help="a point counted longer than this is recorded as not counted (default %(default)s)",
    )
    sub.add_parser("fit")
    sub.add_parser("report")
    sub.add_parser("anchor-report")
    sub.add_parser("anchors")
    args = parser.parse_args()
    if args.cmd == "predict":
        os.environ["SIM_POINT_TIMEOUT_S"] = str(
            args.point_timeout_s
        )  # the spawned counters read it
        predict(args.jobs, args.only, args.anchors)
    elif args.cmd == "fit":
        fit()
    elif args.cmd == "anchor-report":
        anchor_report()
    elif args.cmd == "anchors":
        write_anchors()
    else:
        report()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
