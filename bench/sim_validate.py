"""Validate `sim:h200`'s predicted *speedups* against the H200's measured ones, on the CPU.

    PYTHONPATH=. python3 bench/sim_validate.py predict [--jobs 2]      # count every point (~15 min on 2 cores)
    PYTHONPATH=. python3 bench/sim_validate.py report                  # figures: bench/results/sim_validate_speedups_h200.json

Points (a candidate, a workload, its measured H200 time):
- `starter`: every bundled starter at every workload the H200 ran it (bench/results/h200_tasks*.json;
  the newest run of each wins);
- `baseline`: each baseline submitted as a candidate (the same files' baseline timings: measured
  speedup about 1; a pure-PyTorch candidate, billed by sim_torch.TorchCalls);
- `variant`: the validation corpus, variants of eight starters the fit never saw
  (bench/results/sim_validate_h200/sim_collect.json);
- `heldout`: glue-heavy and unfused rewrites and baselines timed for this on the H200
  (bench/sim_collect_gpu.py --set heldout; bench/results/sim_heldout_h200/sim_collect.json), and
  tile and warp variants of three starters with no variant anywhere else (--set heldout_tiles;
  bench/results/sim_heldout_tiles_h200/sim_collect.json).

Each is counted as a `sim:h200` evaluation's performance stage counts it (sim_predict, then the
parent's checks and model, sim_stage and sim_model), and divided into the baseline time that
evaluation would use (core/data/sim_baselines.json: measured there, or the task's model). The
measured speedup divides the same record's baseline timing (or the table's) by the candidate's.
Targets (issue 22): median |predicted / measured - 1| <= 20%, and >= 90% on the right side of 1x
where the measured speedup is more than 10% away from 1. Reported for every point and for the
points whose task had no kernel in the fit (bench/sim_collect_gpu.py FAMILIES).
"""

from __future__ import annotations

import argparse
import glob
import importlib.util
import json
import multiprocessing
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
RESULTS = ROOT / "bench" / "results"
POINTS = RESULTS / "sim_validate_points_h200.json"
REPORT = RESULTS / "sim_validate_speedups_h200.json"
FIGURE = ROOT / "docs" / "sim_speedups_h200.svg"
FIT_TASKS = {
    "gemm/bf16_gemm",
    "attention/prefill_gqa",
    "activation/silu_mul",
    "gemm/fp8_blockscale_gemm",
    "attention/decode_paged_gqa",
    "moe/fused_moe",
    "gemm/small_m_gemm",
    "norm/add_rmsnorm",
    "elementwise/rope",
}  # sim_collect_gpu.FAMILIES: the fit's kernels
COLLECTED = [
    ("variant", RESULTS / "sim_validate_h200" / "sim_collect.json"),
    ("heldout", RESULTS / "sim_heldout_h200" / "sim_collect.json"),
    ("heldout", RESULTS / "sim_heldout_tiles_h200" / "sim_collect.json"),
]


def measured() -> list[dict[str, Any]]:
    from core.devices.sim.baselines import axes_key

    points: dict[tuple[str, str, str, str], dict[str, Any]] = {}
    for path in sorted(glob.glob(str(RESULTS / "h200_tasks*.json"))):
        for r in json.loads(Path(path).read_text())["records"]:
            for side in ("starter", "baseline"):
                for w in (r.get(side) or {}).get("workloads") or []:
                    cand, base = (
                        (w.get("candidate") or {}).get("median_us"),
                        (w.get("baseline") or {}).get("median_us"),
                    )
                    if cand and base:
                        points[(side, r["task"], side, axes_key(w["axes"]))] = {
                            "kind": side,
                            "task": r["task"],
                            "variant": side,
                            "axes": w["axes"],
                            "label": w["label"],
                            "measured_us": cand,
                            "measured_baseline_us": base,
                            "source": Path(path).name,
                            "candidate": None,
                        }
    for kind, path in COLLECTED:
        if not path.is_file():
            continue
        for r in json.loads(path.read_text())["records"]:
            if "error" in r:
                continue
            points[(kind, r["task"], r["variant"], axes_key(r["axes"]))] = {
                "kind": kind,
                "task": r["task"],
                "variant": r["variant"],
                "axes": r["axes"],
                "label": r["label"],
                "measured_us": r["median_us"],
                "measured_baseline_us": None,
                "source": str(path.relative_to(ROOT)),
                "candidate": str((path.parent / r["candidate"]).relative_to(ROOT)),
            }
    return list(points.values())


def _load(path: Path, name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def _count(batch: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Count a batch of points in this process, as a candidate worker would."""
    sys.path.insert(0, str(ROOT / "bench"))
    from sim_fit import variant_file

    from core.devices.device import sim_info
    from core.devices.sim import sim_section
    from core.evaluation.job import spec_json
    from core.harness.sim import predict as sim_predict
    from core.harness.sim import stage as sim_stage
    from core.harness.sim.model import Constants, Target, predict_side
    from core.harness.triton_cpu import enable_interpreter
    from core.tasks.discovery import find_task

    section = sim_section(sim_info("sim:h200"))
    compiler = sim_predict.CompileCache(section["aot"], None)
    enable_interpreter()
    target, constants = (
        Target.from_json(section["target"]),
        Constants.from_json(section["constants"]),
    )
    modules: dict[str, Any] = {}
    out = []
    for n, p in enumerate(batch):
        task = find_task(p["task"])
        if any(a not in p["axes"] for a in task.axes):
            continue
        specs = [spec_json(s) for s in task.inputs]
        shapes = {
            s.name: list(s.concrete_shape(p["axes"]))
            for s in task.inputs + task.outputs
            if s.shape is not None
        }
        workload = {"axes": p["axes"], "shapes": shapes}
        custom = (
            _load(task.file("inputs.py"), f"inputs_{n}").make_inputs
            if task.file("inputs.py").is_file()
            else None
        )
        path = (
            variant_file(ROOT / p["candidate"])
            if p["candidate"]
            else task.file("starter.py" if p["kind"] == "starter" else "baseline.py")
        )
        t0 = time.perf_counter()
        row = dict(p)
        try:
            if str(path) not in modules:
                modules[str(path)] = _load(path, f"candidate_{len(modules)}_{n}")
            if (
                p["kind"] == "baseline" or p["variant"] == "baseline"
            ):  # pure PyTorch: the fake pass only (real GPU-size torch on 2 cores is minutes)
                from core.harness.sim import torch_ops as sim_torch

                reply = {
                    "ok": True,
                    "launches": [],
                    "torch_ops": sim_torch.count_fake(
                        modules[str(path)].run, sim_predict.fake_inputs(specs, workload, 1, custom)
                    ),
                    "notes": [],
                }
            else:
                reply = sim_predict.predict_candidate(
                    modules[str(path)].run, specs, workload, 1, custom, compiler
                )
            launches = sim_stage.checked_launches(reply)
            refused = (
                sim_stage.refused_launch(reply) or (sim_stage.uncounted_launch(reply) or (None,))[0]
            )
            side = predict_side(
                launches,
                sim_stage.checked_ops(reply.get("torch_ops", []), "candidate"),
                target,
                constants,
            )
            ops = sim_stage.checked_ops(reply.get("torch_ops", []), "candidate")
            row.update(
                predicted_us=side["median_us"],
                bound=side["bound"],
                launches=side["launches"],
                refused=refused,
                notes=reply.get("notes", []),
                counted={
                    "launches": [[summary, resources] for summary, resources in launches],
                    "torch_ops": ops,
                },
            )
        except Exception as exc:  # noqa: BLE001 - recorded: a point the sim could not count
            row.update(predicted_us=None, error=f"{type(exc).__name__}: {exc}"[:300])
        row["count_s"] = time.perf_counter() - t0
        print(
            f"{p['kind']:8s} {p['task']:38s} {p['variant'][:22]:22s} {p['label'][:30]:30s} {row['count_s']:6.2f} s "
            f"pred {row.get('predicted_us') or 0:9.1f} meas {p['measured_us']:9.1f}",
            flush=True,
        )
        out.append(row)
    return out


def predict(jobs: int, only: str | None) -> None:
    points = [p for p in measured() if not only or p["kind"] == only]
    kept = (
        [p for p in json.loads(POINTS.read_text())["points"] if only and p["kind"] != only]
        if POINTS.is_file()
        else []
    )
    # one candidate's points stay in one process (its module, its compiles), the biggest groups first
    groups: dict[str, list[dict[str, Any]]] = {}
    for p in points:
        groups.setdefault(f"{p['task']}:{p['variant']}:{p['kind']}", []).append(p)
    batches: list[list[dict[str, Any]]] = [[] for _ in range(jobs)]
    for g in sorted(groups.values(), key=len, reverse=True):
        min(batches, key=len).extend(g)
    with multiprocessing.get_context("spawn").Pool(jobs) as pool:
        rows = [r for part in pool.map(_count, batches) for r in part]
    POINTS.write_text(
        json.dumps({"device": "sim:h200", "points": kept + rows}, indent=1, default=str)
    )
    print(f"wrote {POINTS}: {len(rows)} points counted")


def fit_glue() -> None:
    """`glue_launch_us`, the one constant the torch-glue billing adds: fitted on the baselines
    submitted as candidates (pure PyTorch: every launch is glue), by the median log error of
    the predicted time, never on the held-out glue-heavy kernels it is validated on."""
    import math

    from core.devices.device import sim_info
    from core.devices.sim import sim_section
    from core.devices.sim.targets import CONSTANTS_FILE
    from core.harness.sim.model import Constants, Target, predict_side

    section = sim_section(sim_info("sim:h200"))
    target, constants = (
        Target.from_json(section["target"]),
        Constants.from_json(section["constants"]),
    )
    rows = [
        r
        for r in json.loads(POINTS.read_text())["points"]
        if r["kind"] == "baseline" and r.get("counted")
    ]

    def loss(value: float) -> float:
        c = constants.with_values(glue_launch_us=value)
        return statistics.median(
            abs(
                math.log(
                    predict_side([], r["counted"]["torch_ops"], target, c)["median_us"]
                    / r["measured_us"]
                )
            )
            for r in rows
        )

    best = min((v / 10 for v in range(5, 81)), key=loss)
    data = json.loads(CONSTANTS_FILE.read_text())
    data["fitted"]["h200"]["constants"]["glue_launch_us"] = best
    CONSTANTS_FILE.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    print(
        f"glue_launch_us = {best} µs on {len(rows)} baseline points (median |log error| {loss(best):.3f}); wrote {CONSTANTS_FILE}"
    )


def report() -> dict[str, Any]:
    from core.devices.device import sim_info
    from core.devices.sim import sim_section
    from core.devices.sim.baselines import baseline_for
    from core.evaluation.job import roofline_for
    from core.harness.sim.model import Constants, Target, predict_side
    from core.model.workload import Workload
    from core.tasks.discovery import find_task

    info = sim_info("sim:h200")
    section = sim_section(info)
    target, constants = (
        Target.from_json(section["target"]),
        Constants.from_json(section["constants"]),
    )
    rows = json.loads(POINTS.read_text())["points"]
    scored = []
    for r in rows:
        if r.get(
            "counted"
        ):  # predicted again with the shipped constants (the counts do not depend on them)
            r["predicted_us"] = predict_side(
                [tuple(x) for x in r["counted"]["launches"]],
                r["counted"]["torch_ops"],
                target,
                constants,
            )["median_us"]
        if not r.get("predicted_us"):
            continue
        task = find_task(r["task"])
        roof = roofline_for(task, Workload(r["axes"]), info)
        known = baseline_for("h200", r["task"], None, r["axes"], roof)
        if known is None:
            continue
        measured_base = r.get("measured_baseline_us") or (
            known["median_us"] if known["source"] == "measured" else None
        )
        if not measured_base:
            continue
        pred_speedup, meas_speedup = (
            known["median_us"] / r["predicted_us"],
            measured_base / r["measured_us"],
        )
        spec_roof = roofline_for(task, Workload(r["axes"]), info, info.spec)
        scored.append(
            {
                **{k: r[k] for k in ("kind", "task", "variant", "label")},
                "predicted_speedup": pred_speedup,
                "measured_speedup": meas_speedup,
                "ratio": pred_speedup / meas_speedup,
                "baseline_source": known["source"],
                "refused": r.get("refused"),
                "below_floor": bool(spec_roof and r["predicted_us"] < 0.9 * spec_roof),
            }
        )

    def figures(sel: list[dict[str, Any]]) -> dict[str, Any]:
        if not sel:
            return {"points": 0}
        errors = sorted(abs(s["ratio"] - 1) for s in sel)
        decisive = [s for s in sel if abs(s["measured_speedup"] - 1) > 0.10]
        right = [s for s in decisive if (s["predicted_speedup"] > 1) == (s["measured_speedup"] > 1)]
        return {
            "points": len(sel),
            "median_abs_error": statistics.median(errors),
            "p80_abs_error": errors[int(0.8 * (len(errors) - 1))],
            "decisive": len(decisive),
            "right_side": len(right) / len(decisive) if decisive else None,
            "below_floor": sum(s["below_floor"] for s in sel),
            "refused": sum(bool(s["refused"]) for s in sel),
        }

    unseen = [s for s in scored if s["task"] not in FIT_TASKS]
    out = {
        "all": figures(scored),
        "never_seen_tasks": figures(unseen),
        "fit_tasks": figures([s for s in scored if s["task"] in FIT_TASKS]),
        "by_kind": {
            k: figures([s for s in scored if s["kind"] == k])
            for k in ("starter", "baseline", "variant", "heldout")
        },
        "by_task": {
            t: figures([s for s in scored if s["task"] == t])
            for t in sorted({s["task"] for s in scored})
        },
        "points": scored,
    }
    REPORT.write_text(json.dumps(out, indent=1))
    FIGURE.write_text(scatter(scored))
    for name in ("all", "never_seen_tasks", "fit_tasks"):
        print(name, json.dumps(out[name]))
    for k, f in out["by_kind"].items():
        print(k, json.dumps(f))
    for t, f in out["by_task"].items():
        print(f"  {t:40s} {json.dumps(f)}")
    return out


COLOURS = {"starter": "#1f77b4", "baseline": "#7f7f7f", "variant": "#2ca02c", "heldout": "#d62728"}


def scatter(points: list[dict[str, Any]], size: int = 520, pad: int = 50) -> str:
    """Predicted against measured speedup, log-log, one dot per point (colour: its kind), the
    diagonal and the ±20% target lines: an SVG written by hand (no plotting library needed)."""
    import math

    lo, hi = 1 / 64, 64.0

    def at(v: float) -> float:
        return pad + (math.log(min(max(v, lo), hi)) - math.log(lo)) / (
            math.log(hi) - math.log(lo)
        ) * (size - 2 * pad)

    def xy(x: float, y: float) -> tuple[float, float]:
        return at(x), size - at(y)

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{size}" height="{size}" font-family="sans-serif" font-size="11">',
        f'<rect width="{size}" height="{size}" fill="white"/>',
    ]
    for tick in (1 / 64, 1 / 8, 1, 8, 64):
        (x, _), (_, y) = xy(tick, lo), xy(lo, tick)
        label = f"{tick:g}" if tick >= 1 else f"1/{1 / tick:g}"
        parts += [
            f'<line x1="{x:.1f}" y1="{pad}" x2="{x:.1f}" y2="{size - pad}" stroke="#eee"/>',
            f'<text x="{x:.1f}" y="{size - pad + 14}" text-anchor="middle">{label}</text>',
            f'<line x1="{pad}" y1="{y:.1f}" x2="{size - pad}" y2="{y:.1f}" stroke="#eee"/>',
            f'<text x="{pad - 6}" y="{y + 4:.1f}" text-anchor="end">{label}</text>',
        ]
    for factor, dash in ((1.0, ""), (1.2, "4,3"), (1 / 1.2, "4,3")):
        (x1, y1), (x2, y2) = (
            xy(lo, lo * factor),
            xy(hi / factor if factor > 1 else hi, (hi / factor if factor > 1 else hi) * factor),
        )
        parts.append(
            f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" stroke="#999" stroke-dasharray="{dash}"/>'
        )
    (cx, _), (_, cy) = xy(1, lo), xy(lo, 1)
    parts += [
        f'<line x1="{cx:.1f}" y1="{pad}" x2="{cx:.1f}" y2="{size - pad}" stroke="#ccc"/>',
        f'<line x1="{pad}" y1="{cy:.1f}" x2="{size - pad}" y2="{cy:.1f}" stroke="#ccc"/>',
    ]
    for p in points:
        x, y = xy(p["measured_speedup"], p["predicted_speedup"])
        parts.append(
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="2.6" fill="{COLOURS.get(p["kind"], "black")}" fill-opacity="0.7"/>'
        )
    for i, (kind, colour) in enumerate(COLOURS.items()):
        parts.append(
            f'<circle cx="{pad + 10}" cy="{pad + 10 + 15 * i}" r="4" fill="{colour}"/><text x="{pad + 20}" y="{pad + 14 + 15 * i}">{kind}</text>'
        )
    parts += [
        f'<text x="{size / 2}" y="{size - 12}" text-anchor="middle">measured speedup on the H200</text>',
        f'<text x="14" y="{size / 2}" text-anchor="middle" transform="rotate(-90 14 {size / 2})">predicted speedup (sim:h200)</text>',
        "</svg>",
    ]
    return "\n".join(parts) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("predict")
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument(
        "--only",
        choices=["starter", "baseline", "variant", "heldout"],
        help="recount this kind, keep the others",
    )
    sub.add_parser("report")
    sub.add_parser(
        "fit-glue",
        help="fit glue_launch_us on the baselines run as candidates; writes core/data/sim_constants.json",
    )
    args = parser.parse_args()
    if args.command == "predict":
        predict(args.jobs, args.only)
    if args.command == "fit-glue":
        fit_glue()
    report()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
