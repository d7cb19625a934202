"""The engine's GPU proof, in one device call: the bundled tasks end to end, and the fidelity of
the arena's timer against `triton.testing.do_bench`.

    PYTHONPATH=. python3 bench/gpu_validate.py --device cuda:0 --out $OUT --alternations 5

1. Evaluates every bundled task's starter and baseline (as a candidate) on the device with the
   full pipeline (CUDA graphs for decode-sized workloads, as the arena times them).
2. Fidelity: alternates, `--alternations` times, an arena evaluation of each task's baseline
   with graphs off (so both timers see the same eager launches) with
   `do_bench(fn, warmup=25, rep=100, return_mode="median")` on the same shapes, and reports
   per workload the median of each over the alternations, their ratio, and the spread
   (max − min over the alternations, relative to the median).
Writes `gpu_validate.json` (raw) and `fidelity.md` (a table for docs/) under --out.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from core.evaluate import Evaluator  # noqa: E402
from core.tasks import discover  # noqa: E402


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def do_bench_median(task, axes: dict[str, int], seed: int) -> float:
    """do_bench's median for the task's baseline on one fixed input, in microseconds."""
    import torch
    import triton.testing

    from core.harness.inputs import make_inputs

    specs = [{"name": s.name, "dtype": s.dtype, "shape": list(s.shape) if s.shape else None, "init": s.init, "value": s.value} for s in task.inputs]
    gen = torch.Generator("cuda").manual_seed(seed)
    shapes = {s.name: list(s.concrete_shape(axes)) for s in task.inputs if s.shape is not None}
    args = make_inputs(specs, axes, shapes, gen)
    fn = _load(task.file("baseline.py"), f"baseline_{task.name}").run
    return triton.testing.do_bench(lambda: fn(*args), warmup=25, rep=100, return_mode="median") * 1e3


def spread(values: list[float]) -> float:
    return (max(values) - min(values)) / statistics.median(values)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--out", type=Path, default=Path("."))
    parser.add_argument("--alternations", type=int, default=5)
    parser.add_argument("--tasks", nargs="*", help="task ids (default: every bundled task)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    tasks = [t for t in discover() if not args.tasks or t.id in args.tasks]
    raw: dict = {"device": None, "evaluations": [], "fidelity": {}}
    t0 = time.monotonic()

    with Evaluator(args.device) as full, Evaluator(args.device, graphs=False) as eager:
        raw["device"] = {**full.info.to_json(), "versions": full.info.versions}
        print(f"device: {full.info.model} ({full.info.arch}), peaks {full.info.peaks_key}", flush=True)
        for task in tasks:
            for role in ("starter", "baseline"):
                r = full.evaluate(task, task.file(f"{role}.py"), seed=1234)
                raw["evaluations"].append({"role": role, **r.to_json()})
                print(f"[{time.monotonic() - t0:6.1f}s] {task.id} {role}: {r.status} failed_stage={r.failed_stage} speedup={r.speedup:.3f} sol={r.sol_fraction}", flush=True)
                for w in r.workloads:
                    print(f"    {w.label:<28} {w.mode:<6} cand {w.candidate['median_us']:9.2f} us ±{w.candidate['spread'] * 100:4.1f}%  base {w.baseline['median_us']:9.2f} us ±{w.baseline['spread'] * 100:4.1f}%  x{w.speedup:.3f}  sol {w.sol_fraction}", flush=True)
        for a in range(args.alternations):
            for task in tasks:
                r = eager.evaluate(task, task.file("baseline.py"), seed=1234)
                for w in r.workloads:
                    entry = raw["fidelity"].setdefault(f"{task.id} {w.label}", {"task": task.id, "workload": w.label, "axes": w.axes, "arena_us": [], "do_bench_us": [], "arena_candidate_side_us": []})
                    entry["arena_us"].append(w.baseline["median_us"])
                    entry["arena_candidate_side_us"].append(w.candidate["median_us"])
                    entry["do_bench_us"].append(do_bench_median(task, w.axes, seed=1000 + a))
            print(f"[{time.monotonic() - t0:6.1f}s] alternation {a + 1}/{args.alternations} done", flush=True)

    rows = []
    for key, e in raw["fidelity"].items():
        arena, bench = statistics.median(e["arena_us"]), statistics.median(e["do_bench_us"])
        e.update(arena_median_us=arena, do_bench_median_us=bench, ratio=arena / bench, arena_spread=spread(e["arena_us"]), do_bench_spread=spread(e["do_bench_us"]))
        rows.append(e)
    (args.out / "gpu_validate.json").write_text(json.dumps(raw, indent=1))
    lines = [
        "| task | workload | arena median (µs) | do_bench median (µs) | arena / do_bench | arena spread | do_bench spread |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for e in rows:
        lines.append(f"| {e['task']} | {e['workload']} | {e['arena_median_us']:.2f} | {e['do_bench_median_us']:.2f} | {e['ratio']:.3f} | {e['arena_spread'] * 100:.1f}% | {e['do_bench_spread'] * 100:.1f}% |")
    ratios = [e["ratio"] for e in rows]
    lines.append("")
    lines.append(f"Workloads within 3%: {sum(abs(r - 1) <= 0.03 for r in ratios)} of {len(ratios)}; ratio median {statistics.median(ratios):.3f}, min {min(ratios):.3f}, max {max(ratios):.3f}.")
    (args.out / "fidelity.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    print(f"total {time.monotonic() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
