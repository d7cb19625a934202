"""Does the host's CPU itself run in slow and fast modes? (issue 35: the host-bound tasks'
rounds read up to 2x apart for the same code, docs/fidelity.md "What is still open".)

One process, pinned to each CPU in turn, times a fixed piece of pure Python (no GPU, no
allocation: a loop summing integers, about a millisecond) in `--windows` windows of `--reps`
repetitions each; a window's figure is its median. If the CPU's speed changes from window to
window by as much as the host-bound rounds do, the modes are the host's (its clocks, its
hypervisor's scheduling of the vCPU), whatever the arena does; if pure Python stays steady,
they come with CUDA's host path (launches, synchronizes). `--cuda` times, in the same windows,
a call of 8 small launches and one synchronize, the shape of those tasks' host work.

`--clocks` asks what a slow window is made of. Each window also records the thread's own CPU
time for its loops and the hypervisor's steal time on that CPU (/proc/stat): if the steal
grows as the wall clock slows while the thread's CPU time stays, the vCPU is being descheduled
(a trusted process can then read the lost time); if the CPU time slows with the wall clock,
the core itself runs slower (a sibling thread, its clock). `--together` times the same loop on
two CPUs at once, to see whether the modes are one CPU's or the whole host's.

    python3 bench/host_modes.py --out $OUT/host_modes.json
    python3 bench/host_modes.py --cpus 15 --clocks --windows 200 --reps 10 --gap-s 0.02
    python3 bench/host_modes.py --together 14 15 --windows 200 --reps 10 --gap-s 0.02
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


def steal_ticks(cpu: int) -> int:
    """The hypervisor's steal time on `cpu` so far, in USER_HZ ticks (/proc/stat's 8th field)."""
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith(f"cpu{cpu} "):
            return int(line.split()[8])
    return 0


def clocked_window(cpu: int, reps: int) -> dict[str, float]:
    """One window of the pure-Python loop: its wall-clock median per repetition, the thread's
    CPU time per repetition over the window, and the steal on `cpu` over the window (ms)."""
    steal0, cpu0, wall0 = steal_ticks(cpu), time.thread_time(), time.perf_counter()
    wall = timed(pure_python, reps)
    cpu_us = (time.thread_time() - cpu0) / reps * 1e6
    span = time.perf_counter() - wall0
    ticks = steal_ticks(cpu) - steal0
    return {
        "t": round(wall0, 4),
        "wall_us": round(wall, 2),
        "cpu_us": round(cpu_us, 2),
        "span_ms": round(span * 1e3, 3),
        "steal_ms": round(ticks * 1e3 / os.sysconf("SC_CLK_TCK"), 1),
    }


def clocked_series(cpu: int, windows: int, reps: int, gap_s: float) -> list[dict[str, float]]:
    os.sched_setaffinity(0, {cpu})
    out = []
    for _ in range(windows):
        out.append(clocked_window(cpu, reps))
        time.sleep(gap_s)
    return out


def correlation(xs: list[float], ys: list[float]) -> float:
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    return sxy / (sxx * syy) ** 0.5 if sxx > 0 and syy > 0 else 0.0


def clocks_report(cpu: int, series: list[dict[str, float]]) -> dict:
    walls = [w["wall_us"] for w in series]
    cpus = [w["cpu_us"] for w in series]
    steal_share = [w["steal_ms"] / w["span_ms"] for w in series]
    row = {
        "cpu": cpu,
        "kind": "clocks",
        "windows": series,
        "wall_max_over_min": round(max(walls) / min(walls), 3),
        "cpu_time_max_over_min": round(max(cpus) / min(cpus), 3),
        "steal_share_median": round(statistics.median(steal_share), 3),
        "steal_share_max": round(max(steal_share), 3),
        # how much of the wall clock's window-to-window change the steal explains
        "corr_wall_steal": round(correlation(walls, steal_share), 3),
        "corr_wall_cpu_time": round(correlation(walls, cpus), 3),
    }
    print(
        f"cpu {cpu:2d} clocks: wall max/min {row['wall_max_over_min']}, thread CPU time max/min "
        f"{row['cpu_time_max_over_min']}, steal share median {row['steal_share_median']} max "
        f"{row['steal_share_max']}; corr(wall, steal) {row['corr_wall_steal']}, corr(wall, "
        f"CPU time) {row['corr_wall_cpu_time']}",
        flush=True,
    )
    return row


def together_report(cpus: list[int], series: list[list[dict[str, float]]]) -> dict:
    """Two CPUs' windows side by side, matched by start time (each window to the other CPU's
    nearest): the correlation of their wall-clock medians."""
    a, b = series
    pairs = []
    for w in a:
        nearest = min(b, key=lambda v: abs(v["t"] - w["t"]))
        if abs(nearest["t"] - w["t"]) < 0.02:
            pairs.append((w["wall_us"], nearest["wall_us"]))
    corr = correlation([p[0] for p in pairs], [p[1] for p in pairs]) if pairs else 0.0
    row = {
        "cpus": cpus,
        "kind": "together",
        "series": series,
        "matched": len(pairs),
        "corr_wall": round(corr, 3),
    }
    print(
        f"cpus {cpus} together: {len(pairs)} windows matched, corr(wall, wall) {row['corr_wall']}",
        flush=True,
    )
    return row


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
    p.add_argument("--clocks", action="store_true", help="also the thread's CPU time and the steal")
    p.add_argument("--together", type=int, nargs=2, metavar="CPU", help="two CPUs at once")
    p.add_argument("--out", type=Path)
    args = p.parse_args()
    if args.clocks or args.together:
        rows = []
        if args.together:
            from multiprocessing import Pool

            plan = [(cpu, args.windows, args.reps, args.gap_s) for cpu in args.together]
            with Pool(2) as pool:
                rows.append(together_report(args.together, pool.starmap(clocked_series, plan)))
        for cpu in (args.cpus or sorted(os.sched_getaffinity(0))) if args.clocks else []:
            rows.append(
                clocks_report(cpu, clocked_series(cpu, args.windows, args.reps, args.gap_s))
            )
        if args.out:
            args.out.write_text(json.dumps({"command": " ".join(sys.argv), "rows": rows}, indent=1))
        return
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
