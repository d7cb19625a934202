"""Issue 35's two host-bound baselines, timed outside the arena with the arena's own timer, to
tell the platform's noise from the arena's (docs/fidelity.md, "What is still open").

mla_prefill and fp8_blockscale_grouped_gemm read their sequence bounds or block layout to the
host in every call, so a call's event time holds the host's Python between that sync and its
last launch; their identity ratio read 0.86-1.12 on the H200 where every other task holds ±3%.
Here one baseline.py is timed against itself by `core.harness.timing.time_round` (the flush,
the lead flushes, the events, as an evaluation times it) in alternating rounds, under
conditions an evaluation differs by:

- `inproc`: both sides in one process (no second CUDA context, no process switch);
- `two`: a process per side, both pinned to one CPU, as an evaluation's two workers are;
- `two_spin`, `two_yield`, `two_block`: the same with the CUDA context's host wait set to spin,
  yield or block (cuDevicePrimaryCtxSetFlags before torch makes the context);
- `two_nogc`: the same with Python's garbage collector frozen and off in both workers;
- `two_unpinned`: two processes, no pinning;
- `inproc_ctx`: as `inproc`, with a second process holding an idle CUDA context on the GPU
  meanwhile (an evaluation always has two): whether another context alone makes the rounds
  bimodal;
- `numa_local`, `numa_remote`: two pinned processes, each started (its imports, its heap) on
  the CPUs of one NUMA node and only then pinned to the timing CPU: side B on the timing CPU's
  node in the first, on another node in the second (skipped on a one-node machine). A worker's
  memory lies where it first ran, so a gap between the two says that where a worker was born
  is part of what its host-bound calls cost.

    PYTHONPATH=. python3 bench/host_bound.py --out bench/results/host_bound.json [--rounds 16]
    sh bench/h200_wave.sh $OUT 12                      # the same on the H200, in one device call

Per condition and workload: each side's round medians, the paired ratios (side A's round over
side B's round after it), their spread (max/min) and the two sides' own round-to-round spread.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import importlib.util
import json
import multiprocessing
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

WORKLOADS = [
    ("attention/mla_prefill", {"B": 5, "L": 777, "K": 1, "H": 40, "DQK": 96, "DV": 64}),
    ("attention/mla_prefill", {"B": 8, "L": 512, "K": 4, "H": 16, "DQK": 192, "DV": 128}),
    ("gemm/fp8_blockscale_grouped_gemm", {"B": 32, "E": 32, "N": 4096, "K": 7168, "S": 1}),
]
# inproc and inproc_ctx last: they make a CUDA context in this process, which the others must
# not have beside them
CONDITIONS = [
    "two",
    "numa_local",
    "numa_remote",
    "two_spin",
    "two_yield",
    "two_block",
    "two_nogc",
    "two_unpinned",
    "inproc",
    "inproc_ctx",
]
SCHED = {"spin": 1, "yield": 2, "block": 4}  # CU_CTX_SCHED_*
INPUT_SETS = 24  # distinct drawn inputs, cycled (both sides see the same index per call)
BUDGET_MS = 30.0


def _module(path: Path, name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def numa_nodes() -> list[set[int]]:
    """Each NUMA node's CPUs (those this process may use), from sysfs; one set where unknown."""
    allowed = os.sched_getaffinity(0)
    nodes = []
    for path in sorted(Path("/sys/devices/system/node").glob("node[0-9]*/cpulist")):
        cpus: set[int] = set()
        for part in path.read_text().strip().split(","):
            if part:
                lo, _, hi = part.partition("-")
                cpus.update(range(int(lo), int(hi or lo) + 1))
        if cpus & allowed:
            nodes.append(cpus & allowed)
    return nodes or [allowed]


def _set_sched(mode: str | None) -> None:
    """The primary context's host-wait flag, set before torch creates the context."""
    if not mode:
        return
    cuda = ctypes.CDLL("libcuda.so.1")
    dev = ctypes.c_int()
    assert cuda.cuInit(0) == 0 and cuda.cuDeviceGet(ctypes.byref(dev), 0) == 0
    rc = cuda.cuDevicePrimaryCtxSetFlags(dev, SCHED[mode])
    assert rc == 0, f"cuDevicePrimaryCtxSetFlags -> {rc}"


class Side:
    """One side's baseline and inputs for every workload, timed round by round."""

    def __init__(self, cpu: int | None, sched: str | None, nogc: bool, late: bool = False):
        """`late`: pinned to `cpu` only once everything is loaded and drawn (as an arena
        worker is, for its rounds), so that its memory lies where it was started."""
        _set_sched(sched)
        import torch

        from core.harness import timing

        self.torch, self.timing = torch, timing
        if cpu is not None and not late:
            os.sched_setaffinity(0, {cpu})
        if nogc:
            gc.collect()
            gc.freeze()
            gc.disable()
        self.device = torch.device("cuda:0")
        self.runs, self.inputs = [], []
        for i, (task, axes) in enumerate(WORKLOADS):
            folder = ROOT / "tasks" / task
            make = _module(folder / "inputs.py", f"inputs_{i}").make_inputs
            self.runs.append(_module(folder / "baseline.py", f"baseline_{i}").run)
            sets = []
            for seed in range(INPUT_SETS):
                gen = torch.Generator(self.device).manual_seed(1000 + seed)
                sets.append(make(dict(axes), gen))
            self.inputs.append(sets)
        torch.cuda.synchronize()
        if cpu is not None and late:
            os.sched_setaffinity(0, {cpu})

    def round(self, w: int, first: int) -> float:
        sets = self.inputs[w]
        rnd = self.timing.Round(BUDGET_MS, 3, 400, first, False)
        got = self.timing.time_round(self.runs[w], lambda k: sets[k % len(sets)], self.device, rnd)
        return statistics.median(got["times_us"])


def _serve(conn: Any, cpu: int | None, sched: str | None, nogc: bool, late: bool) -> None:
    side = Side(cpu, sched, nogc, late)
    conn.send("ready")
    while (msg := conn.recv()) is not None:
        conn.send(side.round(*msg))


def _idle_context(conn: Any) -> None:
    """A process that makes a CUDA context, then does nothing on the GPU until told to end."""
    import torch

    torch.zeros(1, device="cuda:0")
    torch.cuda.synchronize()
    conn.send("ready")
    conn.recv()


_INPROC: list[Side] = []  # the in-process side, made once (its context stays for the process)


def _spread(xs: list[float]) -> float:
    return max(xs) / min(xs) if xs and min(xs) > 0 else float("nan")


def _start_on(proc: Any, cpus: set[int] | None) -> None:
    """Start `proc` with `cpus` as its first affinity (a spawned child inherits the parent's)."""
    saved = os.sched_getaffinity(0)
    if cpus:
        os.sched_setaffinity(0, cpus)
    try:
        proc.start()
    finally:
        os.sched_setaffinity(0, saved)


def measure(condition: str, rounds: int, cpu: int) -> list[dict[str, Any]]:
    pinned = None if condition == "two_unpinned" else cpu
    nodes = numa_nodes()
    home = next(n for n in nodes if cpu in n)
    away = next((n for n in nodes if cpu not in n), None)
    if condition == "numa_remote" and away is None:
        print(f"{condition}: one NUMA node ({sorted(home)}): nothing to compare", flush=True)
        return []
    births = {"numa_local": [home, home], "numa_remote": [home, away]}.get(condition, [None, None])
    if condition in ("inproc", "inproc_ctx"):
        if not _INPROC:
            _INPROC.append(Side(pinned, None, False))
        a = b = _INPROC[0].round
        close = lambda: None
        if condition == "inproc_ctx":
            parent, child = multiprocessing.get_context("spawn").Pipe()
            idle = multiprocessing.get_context("spawn").Process(target=_idle_context, args=(child,))
            idle.start()
            assert parent.recv() == "ready"

            def close() -> None:
                parent.send(None)
                idle.join(10)

    else:
        sched = (
            condition.split("_", 1)[1]
            if condition in ("two_spin", "two_yield", "two_block")
            else None
        )
        ctx = multiprocessing.get_context("spawn")
        pipes, procs = [], []
        for birth in births:
            parent, child = ctx.Pipe()
            proc = ctx.Process(
                target=_serve,
                args=(child, pinned, sched, condition == "two_nogc", birth is not None),
            )
            _start_on(proc, birth)
            pipes.append(parent)
            procs.append(proc)
        for p in pipes:
            assert p.recv() == "ready"

        def over(p: Any) -> Any:
            def call(w: int, first: int) -> float:
                p.send((w, first))
                return float(p.recv())

            return call

        a, b = over(pipes[0]), over(pipes[1])

        def close() -> None:
            for p in pipes:
                p.send(None)
            for proc in procs:
                proc.join(10)

    rows = []
    for w, (task, axes) in enumerate(WORKLOADS):
        sa, sb = [], []
        for r in range(rounds):
            first = r * 1000
            sa.append(a(w, first))  # the "baseline" round first, as an evaluation orders them
            sb.append(b(w, first))
        ratios = [x / y for x, y in zip(sa, sb)]
        rows.append(
            {
                "condition": condition,
                "task": task,
                "axes": axes,
                "a_us": sa,
                "b_us": sb,
                "ratios": ratios,
                "ratio_median": statistics.median(ratios),
                "ratio_spread": _spread(ratios),
                "a_spread": _spread(sa),
                "b_spread": _spread(sb),
            }
        )
        print(
            f"{condition:13s} {task.split('/')[1]:28s} {json.dumps(axes)[:40]:40s} "
            f"ratio median {rows[-1]['ratio_median']:.3f} spread {rows[-1]['ratio_spread']:.2f} "
            f"sides {rows[-1]['a_spread']:.2f}/{rows[-1]['b_spread']:.2f} "
            f"a {min(sa):.0f}-{max(sa):.0f} us",
            flush=True,
        )
    close()
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--rounds", type=int, default=16)
    ap.add_argument("--conditions", default=",".join(CONDITIONS))
    ap.add_argument("--budget-s", type=float, default=400)
    args = ap.parse_args()
    cpu = max(os.sched_getaffinity(0))
    print(
        f"timing CPU {cpu}; NUMA nodes {[f'{min(n)}-{max(n)}' for n in numa_nodes()]}", flush=True
    )
    started, rows = time.time(), []
    for condition in args.conditions.split(","):
        if time.time() - started > args.budget_s:
            print(f"budget spent: {condition} and after not run", flush=True)
            break
        rows += measure(condition, args.rounds, cpu)
        args.out.write_text(json.dumps({"cpu": cpu, "rows": rows}, indent=1))
    print(f"wrote {args.out} in {time.time() - started:.0f} s")


if __name__ == "__main__":
    main()
