"""Does where a graph's own buffers lie move a tiny kernel's time? A diagnostic for the one
identity group outside its bound (docs/fidelity.md: norm/add_rmsnorm in `train`, whose 6.4 µs
graphed workload read 0.92-0.99 through all of one evaluation and 1.02-1.05 through another).

The two sides of an evaluation read their inputs from one region; what differs between their
processes is the memory each allocates itself, in a graph replay the outputs and temporaries in
the captured graph's private pool. Here one process captures the baseline's call `--graphs`
times, each capture's private pool on memory of its own, and times them round-robin with the
arena's graphed method (the inputs refilled before each call, L2 flushed, events around each
replay) on the same inputs, `--rounds` rounds each. If the graphs' medians differ by more than
each graph's own rounds do, placement alone moves the time, and the identity's offset is that.
Every graph's outputs' addresses (and their offset in a 2 MiB page) are kept beside its times.

Two options take one thing at a time out of what differs between the graphs: `--same-outputs`
captures every graph into one shared pool with the last graph's outputs dropped, so all of them
write the same addresses and only the graph itself (the driver's executable) differs;
`--reload-code` also clears Triton's in-memory kernels before each graph's warm-up, so each
graph launches kernels of a module loaded afresh (the same binary at another address), as the
two sides of an evaluation, each process loading its own, do.

    PYTHONPATH=. python3 bench/placement.py --device cuda:0 --out DIR \\
        [--task norm/add_rmsnorm] [--workload T=128,H=7168] [--graphs 6] [--rounds 8] [--flushes 3] [--inputs 1]
        [--same-outputs] [--reload-code] [--inner-events]

`--inner-events` also times each graph by a pair of events recorded as its first and last
nodes, beside the pair around its replay: what its launch costs, apart from its kernels' run.

Ran on the H200 without the options (2026-12-05, `sh bench/h200_wave.sh $OUT 53`; raw:
bench/results/issue35_h200_2026-12-05/placement/), and on an H100 with `--inner-events`, with
and without `--same-outputs` (2026-12-06, step 60; raw: bench/results/issue35_2026-12-06/
placement/): the captures differ in their kernels' run, not their launch, and agree within
0.7% where they all write the same addresses (docs/fidelity.md); and with `--reload-code` as
well (2026-12-06, step 61, on an H100; raw: bench/results/issue35_2026-12-06b/placement/): as
without it, within 0.5-0.7%.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import fidelity  # bench/, beside this script
import timer_check

PAGE = 2 * 1024 * 1024


def tensors_of(value: Any) -> list[Any]:
    """Every tensor in a call's result (a tensor, or lists and tuples of them)."""
    import torch

    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in tensors_of(v)]
    return []


def workload_of(task: Any, label: str, device: str) -> Any:
    """Task `task`'s workload `label` among those of `device`'s size class (visible and fixed
    hidden); a clear error naming the ones there are."""
    spec = task.cpu if device == "cpu" else task.gpu
    workloads = [*spec.visible, *spec.hidden.fixed]
    found = next((w for w in workloads if w.label == label), None)
    if found is None:
        raise SystemExit(
            f"{task.id} has no {device} workload {label!r}: {[w.label for w in workloads]}"
        )
    return found


def spread(values: list[float]) -> float:
    """How far apart the largest and the smallest of `values` are (0 for none)."""
    return max(values) / min(values) - 1 if values and min(values) > 0 else 0.0


def _round(
    graph: Any, fresh: Any, first: int, calls: int, flush: Any, inside: Any = ()
) -> tuple[float, float | None]:
    """The median of `calls` replays timed as core/harness/timing.py's _time_graph times them:
    by events around each replay and, where the graph holds a pair (`inside`), by those."""
    import torch

    times, inner = [], []
    for k in range(calls):
        fresh(first + k)
        torch.cuda.synchronize()
        flush.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1e3)
        if inside:
            inner.append(inside[0].elapsed_time(inside[1]) * 1e3)
    return statistics.median(times), statistics.median(inner) if inner else None


def measure(
    task_id: str,
    label: str,
    device: str,
    graphs: int,
    rounds: int,
    calls: int,
    flushes: int,
    input_sets: int,
    same_outputs: bool = False,
    reload_code: bool = False,
    inner_events: bool = False,
) -> dict:
    """Every (graph, flush buffer) pair timed `rounds` times round-robin; graph g reads input set
    g % `input_sets` (each set its own allocation, as each worker's refill target would be).
    `same_outputs`: one pool for every capture, each graph's outputs dropped once captured, so
    every graph writes the same addresses; `reload_code`: each graph's Triton kernels loaded
    afresh before its warm-up; `inner_events`: each graph also holds a pair of timing events
    as its first and last nodes, read beside the events around its replay."""
    import torch

    from core.harness import timing

    task = fidelity._tasks([task_id])[0]
    w = workload_of(task, label, device)
    sets = [fidelity.baseline_and_inputs(task, w, device) for _ in range(input_sets)]
    statics = [fresh(0) for _, fresh in sets]
    buffers = [timing.flush_buffer(torch.device(device)) for _ in range(flushes)]
    for b in buffers:
        b.zero_()
    captured: list[tuple[Any, Any, list[int], list[Any]]] = []
    reloaded = []
    for g in range(graphs):
        fn, _ = sets[g % input_sets]
        static = statics[g % input_sets]
        if reload_code:
            reloaded.append(timing.reload_triton_code())
        call = lambda fn=fn, static=static: fn(*static)
        pool = captured[0][0].pool() if same_outputs and captured else None
        inside = (
            [torch.cuda.Event(enable_timing=True, external=True) for _ in range(2)]
            if inner_events
            else []
        )
        graph, out = timer_check.captured(call, pool=pool, inside=inside)
        addresses = [t.data_ptr() for t in tensors_of(out)]
        if same_outputs:
            out = None  # freed: the next capture reuses these addresses
        captured.append((graph, out, addresses, inside))
    cells = [(g, f) for g in range(graphs) for f in range(flushes)]
    medians: dict[tuple[int, int], list[float]] = {c: [] for c in cells}
    inner: dict[tuple[int, int], list[float]] = {c: [] for c in cells}
    for r in range(rounds):
        order = cells if r % 2 == 0 else list(reversed(cells))  # no cell always first
        for i, (g, f) in enumerate(order):
            first = (r * len(cells) + i + 1) * 10_000
            fresh = sets[g % input_sets][1]
            graph, _, _, inside = captured[g]
            outer_us, inner_us = _round(graph, fresh, first, calls, buffers[f], inside)
            medians[(g, f)].append(outer_us)
            if inner_us is not None:
                inner[(g, f)].append(inner_us)
    per_cell = {c: statistics.median(m) for c, m in medians.items()}
    inner_by_graph = (
        [
            statistics.median([statistics.median(inner[(g, f)]) for f in range(flushes)])
            for g in range(graphs)
        ]
        if inner_events
        else []
    )

    by_graph = [
        statistics.median([per_cell[(g, f)] for f in range(flushes)]) for g in range(graphs)
    ]
    by_flush = [
        statistics.median([per_cell[(g, f)] for g in range(graphs)]) for f in range(flushes)
    ]
    return {
        "task": task_id,
        "workload": label,
        "input_sets": input_sets,
        "same_outputs": same_outputs,
        "reload_code": reload_code,
        "inner_events": inner_events,
        "triton_functions_reloaded": reloaded,
        "inputs": [[t.data_ptr() for t in tensors_of(list(s))] for s in statics],
        "flushes": [b.data_ptr() for b in buffers],
        "graphs": [
            {
                "median_us": by_graph[g],
                "inner_median_us": inner_by_graph[g] if inner_events else None,
                "outputs": [{"ptr": p, "page_offset": p % PAGE} for p in captured[g][2]],
            }
            for g in range(graphs)
        ],
        "cells": [
            {
                "graph": g,
                "flush": f,
                "medians_us": medians[(g, f)],
                "inner_medians_us": inner[(g, f)],
                "median_us": per_cell[(g, f)],
                "round_spread": spread(medians[(g, f)]),
            }
            for g, f in cells
        ],
        "between_graphs": spread(by_graph),
        "between_graphs_inner": spread(inner_by_graph),
        "between_flushes": spread(by_flush),
        "between_cells": spread(list(per_cell.values())),
        "within_cell_widest": max(spread(m) for m in medians.values()),
        "within_cell_median": statistics.median(spread(m) for m in medians.values()),
    }


def diagnostic_parser(doc: str) -> argparse.ArgumentParser:
    """The options this script and bench/process_offset.py share: where, what, and the
    workload they diagnose (add_rmsnorm's graphed one by default)."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--task", default="norm/add_rmsnorm")
    parser.add_argument("--workload", default="T=128,H=7168")
    return parser


def main() -> int:
    parser = diagnostic_parser(__doc__)
    parser.add_argument("--graphs", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--calls", type=int, default=64)
    parser.add_argument(
        "--flushes", type=int, default=3, help="flush buffers, each its own allocation"
    )
    parser.add_argument(
        "--inputs", type=int, default=1, help="input sets, graph g reads set g %% N"
    )
    parser.add_argument(
        "--same-outputs", action="store_true", help="every graph writes the same addresses"
    )
    parser.add_argument(
        "--reload-code", action="store_true", help="each graph's Triton kernels loaded afresh"
    )
    parser.add_argument(
        "--inner-events",
        action="store_true",
        help="also time each graph by events recorded as its first and last nodes",
    )
    parser.add_argument("--name", default="placement", help="the output file's stem")
    args = parser.parse_args()
    if not args.device.startswith("cuda"):
        raise SystemExit("bench/placement.py times CUDA graph replays: give --device cuda:N")
    t0 = time.monotonic()
    got = measure(
        args.task,
        args.workload,
        args.device,
        args.graphs,
        args.rounds,
        args.calls,
        args.flushes,
        args.inputs,
        args.same_outputs,
        args.reload_code,
        args.inner_events,
    )
    got["device"] = fidelity._device_record(args.device)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{args.name}.json").write_text(json.dumps(got, indent=1))
    for i, g in enumerate(got["graphs"]):
        offsets = ", ".join(f"{o['page_offset'] / 1024:.0f} KiB" for o in g["outputs"])
        row = " ".join(f"{c['median_us']:.2f}" for c in got["cells"] if c["graph"] == i)
        inner = f" (inside: {g['inner_median_us']:.2f})" if args.inner_events else ""
        print(
            f"graph {i}: {row} µs by flush buffer{inner}; outputs at {offsets} in their 2 MiB page"
        )
    print(
        f"between graphs {got['between_graphs']:.1%} (inside: {got['between_graphs_inner']:.1%}), between flush buffers {got['between_flushes']:.1%}, "
        f"between cells {got['between_cells']:.1%}; one cell's rounds: median {got['within_cell_median']:.1%}, "
        f"widest {got['within_cell_widest']:.1%} ({time.monotonic() - t0:.0f} s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
