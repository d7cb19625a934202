"""Calibrate and validate the sim: model on H200 timings, on the CPU.

    PYTHONPATH=. python3 bench/sim_fit.py features --extra bench/results/sim_collect_h200/sim_collect.json   # (~25 min)
    PYTHONPATH=. python3 bench/sim_fit.py fit        # fit, validate, write the constants (seconds)
    PYTHONPATH=. python3 bench/sim_fit.py features --validation bench/results/sim_validate_h200/sim_collect.json   # (~10 min)

Data: the H200 timings in bench/results:
- Triton: the starters of activation/silu_mul, gemm/bf16_gemm and norm/add_rmsnorm, every
  workload, timed the arena's way (h200_gpu_validate_run1.json, role `starter`);
- PyTorch: the baselines of the bundled tasks (h200_tasks.json, h200_tasks_run2.json, and the
  `baseline` role of h200_gpu_validate_run1.json);
- Triton variants: 158 tile/warp/stage variants of nine starters, three workloads each
  (bench/sim_collect_gpu.py; raw timings and variants.tar.gz, the variant files, in bench/results/sim_collect_h200),
  passed with `features --extra bench/results/sim_collect_h200/sim_collect.json`.
`features` runs the sim's own counting (sim_predict) on each, at the shapes the GPU ran, and
stores the counts in bench/results/sim_features_h200.json; `fit` evaluates the model
(core/harness/sim/model.py) on them, fits at most six constants by coordinate search on the
squared log error, validates with each task family held out in turn, and writes the fitted
constants to core/data/sim_constants.json and the figures to bench/results/sim_fit_h200.json.

The validation set (`sim_collect_gpu.py --set validation`: variants of starters the fit never
sees) is counted with `features --validation` into its own file, never fitted on: `fit` scores
the fitted constants on it, the out-of-sample figure.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
RESULTS = ROOT / "bench" / "results"
FEATURES = RESULTS / "sim_features_h200.json"
FIGURES = RESULTS / "sim_fit_h200.json"
VALIDATION_FEATURES = RESULTS / "sim_features_h200_validation.json"
FITTED = (
    "launch_us",
    "mma_eff",
    "latency_us",
    "lib_launch_us",
    "lib_mm_eff",
    "lib_mem_eff",
)  # six constants
BOUNDS = {
    "launch_us": (1.0, 12.0),
    "lib_launch_us": (1.0, 15.0),
    "dram_eff": (0.3, 1.0),
    "mma_eff": (0.1, 1.0),
    "latency_us": (0.05, 3.0),
    "lib_mm_eff": (0.3, 1.0),
    "lib_mem_eff": (0.2, 1.0),
}
DECISIVE = 0.10  # pairs whose measured times differ by more than 10%


# --- data ----------------------------------------------------------------------------------


def measured_points(extra: list[Path], committed: bool = True) -> list[dict[str, Any]]:
    """(task, workload axes, kind, measured µs) from the committed H200 timings (unless
    `committed` is False) and the variant timings in `extra`; a baseline timed twice keeps the
    later file's figure."""
    points: dict[tuple[str, str, str], dict[str, Any]] = {}

    def add(task: str, w: dict[str, Any], kind: str, us: float, source: str) -> None:
        points[(task, w["label"], kind)] = {
            "task": task,
            "label": w["label"],
            "axes": w["axes"],
            "kind": kind,
            "measured_us": us,
            "source": source,
        }

    validate = (
        json.loads((RESULTS / "h200_gpu_validate_run1.json").read_text())
        if committed
        else {"evaluations": []}
    )
    for e in validate["evaluations"]:
        for w in e["workloads"]:
            if e["role"] == "starter":
                add(
                    e["task_id"],
                    w,
                    "triton",
                    w["candidate"]["median_us"],
                    "h200_gpu_validate_run1.json",
                )
            add(e["task_id"], w, "torch", w["baseline"]["median_us"], "h200_gpu_validate_run1.json")
    for name in ("h200_tasks.json", "h200_tasks_run2.json") if committed else ():
        for r in json.loads((RESULTS / name).read_text())["records"]:
            for w in (r.get("baseline") or {}).get("workloads", []):
                add(r["task"], w, "torch", w["baseline"]["median_us"], name)
    for path in extra:
        for r in json.loads(path.read_text())["records"]:
            if "error" in r:
                continue  # a variant that failed to compile, run or agree with its starter
            candidate = (path.parent / r["candidate"]).resolve()
            points[(r["task"], r["variant"] + ":" + r["label"], "triton")] = {
                "task": r["task"],
                "label": r["label"],
                "axes": r["axes"],
                "kind": "triton",
                "measured_us": r["median_us"],
                "source": path.name,
                "variant": r["variant"],
                "candidate": str(candidate.relative_to(ROOT))
                if candidate.is_relative_to(ROOT)
                else str(candidate),
            }
    return list(points.values())


def _load(path: Path, name: str) -> Any:
    from core.tasks.modules import load_module

    return load_module(path, name)


def point_job(task: Any, axes: dict[str, Any], n: int) -> tuple[list[dict], dict, Any]:
    """What the harness's counting takes for one measured point: the input specs, the workload
    (axes and concrete shapes) and the task's make_inputs (its inputs.py, loaded as `inputs_n`)."""
    specs = [s.to_json() for s in task.inputs]
    shapes = task.tensor_shapes(axes)
    custom = (
        _load(task.file("inputs.py"), f"inputs_{n}").make_inputs
        if task.file("inputs.py").is_file()
        else None
    )
    return specs, {"axes": axes, "shapes": shapes}, custom


def features(
    extra: list[Path], only: set[str] | None = None, out: Path = FEATURES, committed: bool = True
) -> None:
    """Count every measured kernel at its GPU size with the sim's own code (as the harness does)
    into `out`. With `only`, count just those tasks' points and keep the other rows of the
    existing file; without `committed`, only the points of `extra` (the validation set)."""
    from core.devices.device import sim_info
    from core.devices.sim import sim_section
    from core.harness.sim import predict as sim_predict
    from core.harness.triton_cpu import enable_interpreter
    from core.tasks.discovery import find_task

    section = sim_section(sim_info("sim:h200"))
    compiler = sim_predict.CompileCache(
        section["aot"], None
    )  # before the interpreter (sim_aot.PristineLanguage)
    enable_interpreter()
    modules: dict[str, Any] = {}
    kept = {_key(r): r for r in json.loads(out.read_text())["points"]} if only else {}
    rows = []
    for n, p in enumerate(measured_points(extra, committed)):
        if only and p["task"] not in only:
            if _key(p) in kept:
                rows.append(kept[_key(p)])
            continue
        task = find_task(p["task"])
        if any(a not in p["axes"] for a in task.axes):
            continue  # the task's axes changed since it was timed
        specs, workload, custom = point_job(task, p["axes"], n)
        t0 = time.perf_counter()
        if p["kind"] == "triton":
            path = (
                variant_file(ROOT / p["candidate"])
                if p.get("candidate")
                else task.file("starter.py")
            )
            key = str(path)
            if key not in modules:
                modules[key] = _load(path, f"candidate_{len(modules)}")
            reply = sim_predict.predict_candidate(
                modules[key].run, specs, workload, 1, custom, compiler
            )
            row = {**p, "launches": reply["launches"], "torch_ops": reply["torch_ops"]}
        else:
            baseline = _load(task.file("baseline.py"), f"baseline_{n}")
            formula = {
                "flops": task.flops_for(task_workload(task, p["axes"])),
                "bytes": task.bytes_for(task_workload(task, p["axes"])),
                "dtype": task.peak,
            }
            reply = sim_predict.predict_baseline(baseline.run, specs, workload, 1, custom, formula)
            row = {
                **p,
                "launches": [],
                "torch_ops": reply["torch_ops"],
                "baseline_source": reply["source"],
            }
        row["count_s"] = time.perf_counter() - t0
        rows.append(row)
        print(
            f"{p['kind']:6s} {p['task']:34s} {p['label']:28s} {row['count_s']:5.2f} s", flush=True
        )
    out.write_text(json.dumps({"device": "sim:h200", "points": rows}, indent=1, default=str))


_EXTRACTED: dict[Path, Path] = {}


def variant_file(path: Path) -> Path:
    """A timed variant's source. The corpus keeps them as `variants.tar.gz` beside the timings
    (158 near-copies of the starters are data, not code to maintain), so a path under
    `.../variants/` that is not on disk is read from that archive, extracted once."""
    if path.is_file():
        return path
    folder = path.parent
    archive = folder.parent / "variants.tar.gz"
    if folder.name != "variants" or not archive.is_file():
        raise FileNotFoundError(f"{path}: no such variant, and no {archive} to read it from")
    if archive not in _EXTRACTED:
        out = Path(tempfile.mkdtemp(prefix="sim_variants_"))
        with tarfile.open(archive) as tar:
            tar.extractall(out, filter="data")
        _EXTRACTED[archive] = out / "variants"
    return _EXTRACTED[archive] / path.name


def _key(point: dict[str, Any]) -> tuple[str, str, str, str]:
    return (point["task"], point["label"], point["kind"], point.get("variant") or "")


def task_workload(task: Any, axes: dict[str, int]) -> Any:
    from core.model.workload import Workload

    return Workload(axes)


# --- the fit -------------------------------------------------------------------------------


def predict(row: dict[str, Any], target: Any, constants: Any) -> float:
    from core.harness.sim.model import predict_side

    return predict_side(
        [(s, s.get("resources")) for s in row["launches"]], row["torch_ops"], target, constants
    )["median_us"]


def loss(rows: list[dict[str, Any]], target: Any, constants: Any) -> float:
    return sum(math.log(predict(r, target, constants) / r["measured_us"]) ** 2 for r in rows) / max(
        len(rows), 1
    )


def fit(rows: list[dict[str, Any]], target: Any, start: Any, rounds: int = 6) -> Any:
    """Coordinate search in log space, each constant in turn over a shrinking bracket."""
    best = start
    best_loss = loss(rows, target, best)
    for r in range(rounds):
        for name in FITTED:
            lo, hi = BOUNDS[name]
            value = getattr(best, name)
            span = 2.0 ** (2.0 / (r + 1))
            grid = sorted({min(hi, max(lo, value * span ** (k / 4))) for k in range(-4, 5)})
            for v in grid:
                trial = best.with_values(**{name: v})
                trial_loss = loss(rows, target, trial)
                if trial_loss < best_loss:
                    best, best_loss = trial, trial_loss
    return best


def kendall_tau(pred: list[float], meas: list[float]) -> float | None:
    n = len(pred)
    conc = disc = 0
    for i in range(n):
        for j in range(i + 1, n):
            s = (pred[i] - pred[j]) * (meas[i] - meas[j])
            conc += s > 0
            disc += s < 0
    pairs = n * (n - 1) / 2
    return (conc - disc) / pairs if pairs else None


def decisive_pairs(pred: list[float], meas: list[float]) -> tuple[int, int]:
    """Among pairs whose measured times differ by more than 10%: how many the prediction
    orders the same way, and how many there are."""
    right = total = 0
    for i in range(len(pred)):
        for j in range(i + 1, len(pred)):
            if max(meas[i], meas[j]) > (1 + DECISIVE) * min(meas[i], meas[j]):
                total += 1
                right += (pred[i] - pred[j]) * (meas[i] - meas[j]) > 0
    return right, total


def decisive_share(pred: list[float], meas: list[float]) -> tuple[float | None, int]:
    right, total = decisive_pairs(pred, meas)
    return (right / total if total else None), total


def figures(rows: list[dict[str, Any]], preds: list[float]) -> dict[str, Any]:
    meas = [r["measured_us"] for r in rows]
    errors = [abs(p / m - 1) for p, m in zip(preds, meas)]
    share, pairs = decisive_share(preds, meas)
    return {
        "points": len(rows),
        "kendall_tau": kendall_tau(preds, meas),
        "decisive_pair_share": share,
        "decisive_pairs": pairs,
        "median_abs_error": statistics.median(errors) if errors else None,
        "p80_abs_error": sorted(errors)[int(0.8 * (len(errors) - 1))] if errors else None,
    }


def head_to_head(rows: list[dict[str, Any]], preds: list[float]) -> dict[str, Any]:
    """Per workload timed with both a Triton kernel and the torch baseline: does the prediction
    say which is faster (where the measured gap exceeds 10%)? The ranking question itself."""
    by: dict[tuple[str, str], dict[str, tuple[float, float]]] = {}
    for r, p in zip(rows, preds):
        if r.get("variant"):
            continue  # a tile variant timed at the same workload is not the starter (it used to overwrite it here)
        by.setdefault((r["task"], r["label"]), {})[r["kind"]] = (p, r["measured_us"])
    right = total = 0
    for sides in by.values():
        if "triton" in sides and "torch" in sides:
            (pt, mt), (pb, mb) = sides["triton"], sides["torch"]
            if max(mt, mb) > (1 + DECISIVE) * min(mt, mb):
                total += 1
                right += (pt - pb) * (mt - mb) > 0
    return {
        "decisive_workloads": total,
        "ordered_right": right,
        "share": right / total if total else None,
    }


def within_workload(rows: list[dict[str, Any]], preds: list[float]) -> dict[str, Any]:
    """Variants of one kernel at one shape (what an agent's edits produce): decisive pairs
    ordered right, pooled over every (task, workload) timed with more than one variant, and
    the median of the per-workload Kendall τ."""
    by: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for r, p in zip(rows, preds):
        if r["kind"] == "triton" and r.get("variant"):
            by.setdefault((r["task"], r["label"]), []).append((p, r["measured_us"]))
    right = total = 0
    taus = []
    for pairs in by.values():
        pred, meas = [p for p, _ in pairs], [m for _, m in pairs]
        r, n = decisive_pairs(pred, meas)
        right += r
        total += n
        if len(pairs) > 2:
            taus.append(kendall_tau(pred, meas))
    return {
        "workloads": len(by),
        "decisive_pairs": total,
        "decisive_pair_share": right / total if total else None,
        "median_kendall_tau": statistics.median(taus) if taus else None,
    }


def validation(rows: list[dict[str, Any]], target: Any, constants: Any) -> dict[str, Any]:
    """The out-of-sample figures: every point of the validation set, each of its tasks, and the
    variants of one kernel at one shape, predicted with constants fitted without them."""
    preds = [predict(r, target, constants) for r in rows]
    tasks = sorted({r["task"] for r in rows})
    return {
        "all": figures(rows, preds),
        "within_workload": within_workload(rows, preds),
        "by_task": {
            t: figures(
                [r for r in rows if r["task"] == t],
                [p for r, p in zip(rows, preds) if r["task"] == t],
            )
            for t in tasks
        },
        "per_point": [
            {
                "task": r["task"],
                "variant": r.get("variant"),
                "label": r["label"],
                "measured_us": r["measured_us"],
                "predicted_us": p,
            }
            for r, p in zip(rows, preds)
        ],
    }


def run_fit() -> None:
    from core.devices.device import sim_info
    from core.devices.sim import sim_section
    from core.harness.sim.model import Constants, Target

    rows = json.loads(FEATURES.read_text())["points"]
    section = sim_section(sim_info("sim:h200"))
    target = Target.from_json(section["target"])
    data = json.loads((ROOT / "core" / "data" / "sim_constants.json").read_text())
    start = Constants.from_json(data["default"])
    family = lambda r: r["task"].split("/")[0]
    families = sorted({family(r) for r in rows})
    fitted = fit(rows, target, start)
    preds = [predict(r, target, fitted) for r in rows]
    report: dict[str, Any] = {
        "constants": {k: getattr(fitted, k) for k in FITTED},
        "in_sample": figures(rows, preds),
        "in_sample_triton": figures(
            [r for r in rows if r["kind"] == "triton"],
            [p for r, p in zip(rows, preds) if r["kind"] == "triton"],
        ),
        "in_sample_torch": figures(
            [r for r in rows if r["kind"] == "torch"],
            [p for r, p in zip(rows, preds) if r["kind"] == "torch"],
        ),
        "head_to_head_in_sample": head_to_head(rows, preds),
        "held_out": {},
    }
    held_errors: list[float] = []
    held_rows: list[dict[str, Any]] = []
    held_preds: list[float] = []
    for fam in families:
        train = [r for r in rows if family(r) != fam]
        test = [r for r in rows if family(r) == fam]
        c = fit(train, target, start)
        p = [predict(r, target, c) for r in test]
        held_rows += test
        held_preds += p
        held_errors += [abs(x / r["measured_us"] - 1) for x, r in zip(p, test)]
        tri = [(r, x) for r, x in zip(test, p) if r["kind"] == "triton"]
        report["held_out"][fam] = {
            **figures(test, p),
            "kinds": sorted({r["kind"] for r in test}),
            "head_to_head": head_to_head(test, p),
            "triton_only": figures([r for r, _ in tri], [x for _, x in tri]) if tri else None,
            "constants": {k: round(getattr(c, k), 4) for k in FITTED},
        }
    report["held_out_all"] = figures(held_rows, held_preds)
    report["held_out_triton"] = figures(
        [r for r in held_rows if r["kind"] == "triton"],
        [x for r, x in zip(held_rows, held_preds) if r["kind"] == "triton"],
    )
    report["held_out_torch"] = figures(
        [r for r in held_rows if r["kind"] == "torch"],
        [x for r, x in zip(held_rows, held_preds) if r["kind"] == "torch"],
    )
    report["held_out_head_to_head"] = head_to_head(held_rows, held_preds)
    report["within_workload_in_sample"] = within_workload(rows, preds)
    report["within_workload_held_out"] = within_workload(held_rows, held_preds)
    if VALIDATION_FEATURES.is_file():  # kernels never fitted on: the fitted constants as they ship
        report["validation"] = validation(
            json.loads(VALIDATION_FEATURES.read_text())["points"], target, fitted
        )
    band = report["held_out_triton"]["p80_abs_error"]
    lib_band = report["held_out_torch"]["p80_abs_error"]
    report["band"], report["lib_band"] = band, lib_band
    report["per_point"] = [
        {
            "task": r["task"],
            "label": r["label"],
            "kind": r["kind"],
            "measured_us": r["measured_us"],
            "predicted_us": p,
        }
        for r, p in zip(rows, preds)
    ]
    FIGURES.write_text(json.dumps(report, indent=1))
    glue = (
        (data["fitted"].get("h200") or {}).get("constants", {}).get("glue_launch_us")
    )  # bench/sim_validate.py fit-glue's, kept
    data["fitted"]["h200"] = {
        "label": f"calibrated (on {len(rows)} H200 timings)",
        "constants": {
            **{k: round(getattr(fitted, k), 4) for k in FITTED},
            "dram_eff": 1.0,
            "band": round(band, 3),
            "lib_band": round(lib_band, 3),
            **({"glue_launch_us": glue} if glue is not None else {}),
        },
        "data": f"bench/results/sim_features_h200.json (from {', '.join(sorted({r['source'] for r in rows}))})",
        "figures": "bench/results/sim_fit_h200.json",
        "command": "PYTHONPATH=. python3 bench/sim_fit.py fit",
    }
    (ROOT / "core" / "data" / "sim_constants.json").write_text(
        json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    )
    shown = {k: v for k, v in report.items() if k != "per_point"}
    if "validation" in shown:
        shown["validation"] = {k: v for k, v in shown["validation"].items() if k != "per_point"}
    print(json.dumps(shown, indent=1))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("step", choices=("features", "fit"))
    parser.add_argument(
        "--extra", nargs="*", type=Path, default=[], help="raw JSON of bench/sim_collect_gpu.py"
    )
    parser.add_argument(
        "--only", help="features: recount only these comma-separated tasks, keep the other rows"
    )
    parser.add_argument(
        "--validation",
        type=Path,
        help="features: count this validation set (raw JSON of sim_collect_gpu.py --set validation) into its own file",
    )
    args = parser.parse_args()
    if args.step == "features" and args.validation:
        features(
            [args.validation],
            set(args.only.split(",")) if args.only else None,
            VALIDATION_FEATURES,
            committed=False,
        )
    elif args.step == "features":
        features(args.extra, set(args.only.split(",")) if args.only else None)
    else:
        run_fit()
    return 0


if __name__ == "__main__":
    sys.exit(main())
