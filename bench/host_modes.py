"""Does the host's CPU itself run in slow and fast modes? (issue 35: the host-bound tasks'
rounds read up to 2x apart for the same code, docs/fidelity.md "What is still open".)

One process, pinned to each CPU in turn, times a fixed piece of pure Python (no GPU, no
allocation: a loop summing integers, about a millisecond) in `--windows` windows of `--reps`
repetitions each; a window's figure is its median. If the CPU's speed changes from window to
window by as much as the host-bound rounds do, the modes are the host's (its clocks, its
hypervisor's scheduling of the vCPU), whatever the arena does; if pure Python stays steady,
they come with CUDA's host path (launches, synchronizes). `--cuda` times, in the same windows,
a call of 8 small launches and one synchronize, the shape of those tasks' host work.

    python3 bench/host_modes.py --out $OUT/host_modes.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path


def pure_python(n: int = 20_000) -> int:
    total = 0
    for i in range(n):
        total += i
    return total


def timed(fn, reps: int) -> float:
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e6


def cuda_call():
    import torch

    x = torch.zeros(1024, device="cuda")

    def call() -> None:
        for _ in range(8):
            x.add_(1.0)
        torch.cuda.synchronize()

    call()
    return call


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cpus", type=int, nargs="*")
    p.add_argument("--windows", type=int, default=40)
    p.add_argument("--reps", type=int, default=25)
    p.add_argument(
        "--gap-s", type=float, default=0.05, help="idle between windows, as between rounds"
    )
    p.add_argument("--cuda", action="store_true")
    p.add_argument("--out", type=Path)
    args = p.parse_args()
    cpus = args.cpus or sorted(os.sched_getaffinity(0))
    kinds = {"python": pure_python}
    if args.cuda:
        kinds["cuda"] = cuda_call()
    rows = []
    for cpu in cpus:
        os.sched_setaffinity(0, {cpu})
        series: dict[str, list[float]] = {k: [] for k in kinds}
        for _ in range(args.windows):
            for kind, fn in kinds.items():
                series[kind].append(round(timed(fn, args.reps), 2))
            time.sleep(args.gap_s)
        for kind, values in series.items():
            row = {
                "cpu": cpu,
                "kind": kind,
                "window_median_us": values,
                "min": min(values),
                "median": statistics.median(values),
                "max": max(values),
                "max_over_min": round(max(values) / min(values), 3),
            }
            rows.append(row)
            print(
                f"cpu {cpu:2d} {kind:6s}: windows {row['min']:8.1f}-{row['max']:8.1f} us "
                f"(median {row['median']:8.1f}), max/min {row['max_over_min']}",
                flush=True,
            )
    if args.out:
        args.out.write_text(json.dumps({"command": " ".join(sys.argv), "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
