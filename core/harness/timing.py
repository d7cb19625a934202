"""Timing one side (candidate or baseline) of a workload, inside its own worker process.

GPU: fresh inputs for every call, refilled in place before the timer (stream-ordered); the L2
flushed before each call; device events around the call; a device-wide synchronize after each
round of calls. The calls of a round are queued back to back, as triton.testing.do_bench
queues its repetitions: a host wait after every call lets the device idle between calls, and
that measured 0.90-1.19x of do_bench where queuing measured 0.90-1.04x (docs/fidelity.md).
The flush is queued before the start event, so the call's launch is already waiting when the
timer starts. Decode-sized workloads are timed as CUDA graph replays, one host wait per call.
CPU: wall clock around each call, a small budget per workload.

The clocks are bound here, at import, before any candidate code runs, so that a candidate
that patches `time` or `torch.cuda.Event` afterwards does not reach the timer.
"""

from __future__ import annotations

import statistics
import time
from typing import Any, Callable

import torch

_perf_counter = time.perf_counter
# Plain attribute lookups: asking whether a GPU exists (torch.cuda.is_available) would
# initialise the driver in the warm parent, and a forked worker could then never use the GPU.
_synchronize: dict[str, Callable[[], None]] = {"cuda": torch.cuda.synchronize}
_event_class: dict[str, type] = {"cuda": torch.cuda.Event}
if hasattr(torch, "xpu"):
    _synchronize["xpu"] = torch.xpu.synchronize
    _event_class["xpu"] = getattr(torch.xpu, "Event", None)  # type: ignore[assignment]

FLUSH_BYTES = 256 * 1024 * 1024


def flush_buffer(device: torch.device) -> torch.Tensor:
    """A buffer larger than the last-level cache; zeroing it evicts what the last call left.

    MI300-class parts have a 256 MB Infinity Cache behind the L2, so AMD gets twice as much."""
    nbytes = FLUSH_BYTES
    if device.type == "cuda":
        l2 = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0)
        nbytes = max(nbytes, 4 * l2)
        if getattr(torch.version, "hip", None):
            nbytes = max(nbytes, 2 * FLUSH_BYTES)
    return torch.empty(nbytes // 4, dtype=torch.int32, device=device)


def summarize(times_us: list[float]) -> dict[str, Any]:
    if not times_us:
        return {"n": 0}
    ordered = sorted(times_us)
    q = statistics.quantiles(ordered, n=4, method="inclusive") if len(ordered) > 1 else [ordered[0]] * 3
    median = statistics.median(ordered)
    return {
        "n": len(ordered),
        "median_us": median,
        "q1_us": q[0],
        "q3_us": q[2],
        "iqr_us": q[2] - q[0],
        "spread": (q[2] - q[0]) / median if median > 0 else 0.0,
        "min_us": ordered[0],
        "mean_us": statistics.fmean(ordered),
    }


def time_calls(
    fn: Callable[..., Any],
    fresh: Callable[[int], list[Any]],  # inputs for the i-th call, refilled in place
    device: torch.device,
    budget_ms: float,
    min_calls: int,
    max_calls: int,
    first_index: int,
    graph: bool,
    sync_each_call: bool = False,
) -> dict[str, Any]:
    """Per-call times in microseconds for about `budget_ms` of calls; `first_index` keeps inputs
    fresh across alternation rounds. Returns {"times_us": [...], "mode": "graph"|"events"|"wall"}."""
    if device.type == "cpu":
        return {"times_us": _time_cpu(fn, fresh, budget_ms, min_calls, max_calls, first_index), "mode": "wall"}
    if graph and device.type == "cuda":
        try:
            return {"times_us": _time_graph(fn, fresh, device, budget_ms, min_calls, max_calls, first_index), "mode": "graph"}
        except Exception as exc:  # noqa: BLE001 - a kernel that cannot be captured is timed eagerly
            _synchronize["cuda"]()
            return {"times_us": _time_events(fn, fresh, device, budget_ms, min_calls, max_calls, first_index, True), "mode": "events", "graph_error": str(exc)[:500]}
    times = _time_events(fn, fresh, device, budget_ms, min_calls, max_calls, first_index, sync_each_call)
    return {"times_us": times, "mode": "events" if sync_each_call else "queued"}


def _calls_for(budget_ms: float, estimate_ms: float, min_calls: int, max_calls: int) -> int:
    return max(min_calls, min(max_calls, int(budget_ms / max(estimate_ms, 1e-4))))


def _time_cpu(fn, fresh, budget_ms, min_calls, max_calls, first) -> list[float]:
    times: list[float] = []
    deadline = _perf_counter() + budget_ms / 1000
    i = first
    while len(times) < max_calls and (len(times) < min_calls or _perf_counter() < deadline):
        args = fresh(i)
        t0 = _perf_counter()
        fn(*args)
        times.append((_perf_counter() - t0) * 1e6)
        i += 1
    return times


def _time_events(fn, fresh, device, budget_ms, min_calls, max_calls, first, sync_each_call) -> list[float]:
    sync = _synchronize[device.type]
    Event = _event_class[device.type]
    flush = flush_buffer(device)
    args = fresh(first)
    fn(*args)  # warm-up: lazy initialisation and compilation stay out of the numbers
    sync()
    t0 = _perf_counter()
    fn(*args)
    sync()
    calls = _calls_for(budget_ms, (_perf_counter() - t0) * 1e3, min_calls, max_calls)
    starts = [Event(enable_timing=True) for _ in range(calls)]
    ends = [Event(enable_timing=True) for _ in range(calls)]
    for k in range(calls):
        # Refilling the inputs is stream-ordered before the flush and the start event, so it
        # stays outside the timer whether or not the host waits for it.
        args = fresh(first + 1 + k)
        if sync_each_call:
            sync()
        flush.zero_()
        starts[k].record()
        fn(*args)
        ends[k].record()
        if sync_each_call:
            sync()
    sync()
    return [s.elapsed_time(e) * 1e3 for s, e in zip(starts, ends)]


def _time_graph(fn, fresh, device, budget_ms, min_calls, max_calls, first) -> list[float]:
    sync = _synchronize["cuda"]
    static = fresh(first)
    side = torch.cuda.Stream(device)
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):
        for _ in range(2):  # warm-up off the capture, as torch.cuda.graphs recommends
            fn(*static)
    torch.cuda.current_stream(device).wait_stream(side)
    sync()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn(*static)
    sync()
    flush = flush_buffer(device)
    t0 = _perf_counter()
    graph.replay()
    sync()
    calls = _calls_for(budget_ms, (_perf_counter() - t0) * 1e3, min_calls, max_calls)
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(calls)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(calls)]
    times = []
    for k in range(calls):
        fresh(first + 1 + k)  # refills the graph's input buffers in place
        sync()
        flush.zero_()
        starts[k].record()
        graph.replay()
        ends[k].record()
        sync()
        times.append(starts[k].elapsed_time(ends[k]) * 1e3)
    return times
