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

from core.evaluation.evaluator import Evaluator
from core.tasks.discovery import discover


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

    specs = [
        {
            "name": s.name,
            "dtype": s.dtype,
            "shape": list(s.shape) if s.shape else None,
            "init": s.init,
            "value": s.value,
        }
        for s in task.inputs
    ]
    gen = torch.Generator("cuda").manual_seed(seed)
    shapes = {s.name: list(s.concrete_shape(axes)) for s in task.inputs if s.shape is not None}
    args = make_inputs(specs, axes, shapes, gen)
    fn = _load(task.file("baseline.py"), f"baseline_{task.name}").run
    return (
        triton.testing.do_bench(lambda: fn(*args), warmup=25, rep=100, return_mode="median") * 1e3
    )


def spread(values: list[float]) -> float:
    return (max(values) - min(values)) / statistics.median(values)


def measure_peaks() -> dict[str, float]:
    """The ceilings speed of light is measured against: a 2 GiB device-to-device copy (bytes
    read plus written), the best of three large bf16 matrix products, an empty Triton launch."""
    import torch
    import triton
    import triton.testing

    @triton.jit
    def _empty(x_ptr):
        pass

    src = torch.empty(2 * 1024**3, dtype=torch.uint8, device="cuda").random_(0, 255)
    dst = torch.empty_like(src)
    copy_ms = triton.testing.do_bench(
        lambda: dst.copy_(src), warmup=25, rep=200, return_mode="median"
    )
    best = 0.0
    for m, n, k in ((8192, 8192, 8192), (4096, 5120, 2048), (8192, 8192, 4096)):
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
        ms = triton.testing.do_bench(
            lambda a=a, b=b: torch.matmul(a, b.t()), warmup=25, rep=200, return_mode="median"
        )
        best = max(best, 2 * m * n * k / (ms * 1e-3) / 1e12)
    x = torch.empty(1, device="cuda")
    launch_ms = triton.testing.do_bench(
        lambda: _empty[(1,)](x), warmup=25, rep=200, return_mode="median"
    )
    return {
        "hbm_tbps": 2 * 2 * 1024**3 / (copy_ms * 1e-3) / 1e12,
        "bf16_tflops": best,
        "launch_overhead_us": launch_ms * 1e3,
    }


def fidelity_table(raw: dict) -> str:
    """Per workload: the arena's median (host synchronize after every call, its default), the
    arena with the calls queued back to back, and do_bench; medians over the alternations."""
    lines = [
        "| task | workload | arena (µs) | arena, queued (µs) | do_bench (µs) | arena / do_bench | queued / do_bench | arena spread | queued spread | do_bench spread |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    ratios, queued_ratios = [], []
    for e in raw["fidelity"].values():
        arena, queued, bench = (
            statistics.median(e[k]) for k in ("arena_us", "arena_queued_us", "do_bench_us")
        )
        ratios.append(arena / bench)
        queued_ratios.append(queued / bench)
        e.update(
            arena_median_us=arena,
            queued_median_us=queued,
            do_bench_median_us=bench,
            ratio=arena / bench,
            queued_ratio=queued / bench,
        )
        lines.append(
            f"| {e['task']} | {e['workload']} | {arena:.2f} | {queued:.2f} | {bench:.2f} | {arena / bench:.3f} | {queued / bench:.3f} | "
            f"{spread(e['arena_us']) * 100:.1f}% | {spread(e['arena_queued_us']) * 100:.1f}% | {spread(e['do_bench_us']) * 100:.1f}% |"
        )
    for name, rs in (("arena", ratios), ("arena, queued", queued_ratios)):
        if rs:
            lines.append("")
            lines.append(
                f"{name}: within 3% of do_bench on {sum(abs(r - 1) <= 0.03 for r in rs)} of {len(rs)} workloads; ratio median {statistics.median(rs):.3f}, min {min(rs):.3f}, max {max(rs):.3f}."
            )
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--out", type=Path, default=Path("."))
    parser.add_argument("--alternations", type=int, default=5)
    parser.add_argument("--tasks", nargs="*", help="task ids (default: every bundled task)")
    parser.add_argument(
        "--skip-full",
        action="store_true",
        help="only the fidelity study (no peaks, no full evaluations)",
    )
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    tasks = [t for t in discover() if not args.tasks or t.id in args.tasks]
    raw: dict = {"device": None, "peaks": None, "evaluations": [], "fidelity": {}}
    t0 = time.monotonic()

    def save() -> None:  # after every step: a run cut short still leaves its figures
        (args.out / "gpu_validate.json").write_text(json.dumps(raw, indent=1))
        (args.out / "fidelity.md").write_text(fidelity_table(raw))

    if not args.skip_full:
        raw["peaks"] = measure_peaks()
        print(f"[{time.monotonic() - t0:6.1f}s] peaks: {raw['peaks']}", flush=True)
    with (
        Evaluator(args.device) as full,
        Evaluator(args.device, graphs=False) as eager,
        Evaluator(args.device, graphs=False, sync_each_call=False) as queued,
    ):
        raw["device"] = {**full.info.to_json(), "versions": full.info.versions}
        print(
            f"device: {full.info.model} ({full.info.arch}), peaks {full.info.peaks_key}", flush=True
        )
        for task in tasks if not args.skip_full else []:
            for role in ("starter", "baseline"):
                start = time.monotonic()
                r = full.evaluate(task, task.file(f"{role}.py"), seed=1234)
                raw["evaluations"].append(
                    {"role": role, "wall_s": time.monotonic() - start, **r.to_json()}
                )
                save()
                print(
                    f"[{time.monotonic() - t0:6.1f}s] {task.id} {role}: {r.status} failed_stage={r.failed_stage} speedup={r.speedup:.3f} sol={r.sol_fraction} ({time.monotonic() - start:.1f} s)",
                    flush=True,
                )
                for w in r.workloads:
                    print(
                        f"    {w.label:<28} {w.mode:<6} cand {w.candidate['median_us']:9.2f} us ±{w.candidate['spread'] * 100:4.1f}%  base {w.baseline['median_us']:9.2f} us ±{w.baseline['spread'] * 100:4.1f}%  x{w.speedup:.3f}  sol {w.sol_fraction}",
                        flush=True,
                    )
        for a in range(args.alternations):
            for task in tasks:
                synced = eager.evaluate(task, task.file("baseline.py"), seed=1234)
                back_to_back = queued.evaluate(task, task.file("baseline.py"), seed=1234)
                for w, q in zip(synced.workloads, back_to_back.workloads):
                    entry = raw["fidelity"].setdefault(
                        f"{task.id} {w.label}",
                        {
                            "task": task.id,
                            "workload": w.label,
                            "axes": w.axes,
                            "arena_us": [],
                            "arena_queued_us": [],
                            "do_bench_us": [],
                        },
                    )
                    entry["arena_us"].append(w.baseline["median_us"])
                    entry["arena_queued_us"].append(q.baseline["median_us"])
                    entry["do_bench_us"].append(do_bench_median(task, w.axes, seed=1000 + a))
                save()
            print(
                f"[{time.monotonic() - t0:6.1f}s] alternation {a + 1}/{args.alternations} done",
                flush=True,
            )

    save()
    print(fidelity_table(raw))
    print(f"total {time.monotonic() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
