"""The arena's timer against `triton.testing.do_bench`, with the controls that explain a gap.

Issue 35's third deliverable: per workload, the arena's baseline median against `do_bench` (and
`do_bench_cudagraph` where the arena graphs) on the same inputs, within 3% or the difference
explained by a measurement. The two timers differ on purpose in a few named ways; each control
below changes exactly one of them, so that where a control agrees with the arena the gap is that
way and nothing else:

- `do_bench_led`: do_bench's own method (the same inputs every call, its 256 MB cache cleared
  before each call, events around each call, calls queued without host waits) with the arena's
  lead flushes queued ahead of each call. do_bench has one clear ahead of a call; a wrapper whose
  Python launch outlasts it (several small kernels) leaves the GPU idle inside the events, so
  do_bench times the host's launch. The arena covers the launch (timing.lead_flushes).
- `queued_fixed`: the arena's timer on one set of inputs for every call instead of fresh ones:
  what the fresh inputs (data-dependent work, their writes) change.
- `graph_warm`: the arena's per-call graph replay without the L2 flush, on one set of inputs,
  a spin kernel ahead to cover the launch. `do_bench_cudagraph` replays calls on the same
  inputs with nothing between them, so their data stays in L2; the arena flushes L2 and draws
  fresh inputs before each call. `graph_floor`: what one replay costs beyond the kernels in it
  (a graph of one empty kernel replayed alone, less the same kernel's time among many in one
  graph), which `do_bench_cudagraph` pays once for a whole graph of calls.
- `clock_mhz`: the SM clock (NVML) right after each condition's calls: a large GEMM that
  reads slower under do_bench's 100 ms of back-to-back calls than in the arena's shorter round
  does so at a lower clock.

`bench/fidelity.py conditions` runs these; `timer_table` writes the table of docs/fidelity.md.
"""

from __future__ import annotations

import ctypes
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

BOUND = 0.03  # within 3%, or explained by a control within 3% of the arena
SPIN_CYCLES = 100_000  # about 50-70 µs of the SM clock: longer than a replay's host launch
MAX_CALLS = 200  # a control's calls: enough for a median, and a tiny kernel with 12 lead
# flushes each stays under 0.2 s


def median_us(starts: list[Any], ends: list[Any]) -> float:
    return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends)) * 1e3


def do_bench_led(fn: Callable[[], Any], rep_ms: float = 100.0) -> float:
    """do_bench's loop (its cache, cleared before each call; the same inputs; no host waits)
    with the arena's lead flushes ahead of each call: the median, in µs."""
    import torch
    from triton import runtime

    from core.harness import timing

    cache = runtime.driver.active.get_empty_cache_for_benchmark()
    fn()
    torch.cuda.synchronize()
    # one call's launch on the host and its device time, and one clear's device time
    cleared, begun, done = (torch.cuda.Event(enable_timing=True) for _ in range(3))
    cleared.record()
    runtime.driver.active.clear_cache(cache)
    begun.record()
    t0 = time.perf_counter()
    fn()
    host_us = (time.perf_counter() - t0) * 1e6
    done.record()
    torch.cuda.synchronize()
    flush_us, call_ms = cleared.elapsed_time(begun) * 1e3, begun.elapsed_time(done)
    lead = timing.lead_flushes(host_us, flush_us)
    calls = max(10, min(MAX_CALLS, int(rep_ms / max(call_ms, 1e-3))))
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(calls)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(calls)]
    for k in range(calls):
        for _ in range(lead):
            runtime.driver.active.clear_cache(cache)
        runtime.driver.active.clear_cache(cache)
        starts[k].record()
        fn()
        ends[k].record()
    torch.cuda.synchronize()
    return median_us(starts, ends)


def captured(
    fn: Callable[[], Any], times: int = 1, pool: Any = None, inside: Sequence[Any] = ()
) -> tuple[Any, Any]:
    """A CUDA graph of `times` calls of `fn`, in a private pool of its own (or in `pool`, one
    another graph was captured into: its freed blocks are handed out again), and the last
    call's outputs (the graph's own buffers, alive as long as the caller keeps them).
    `inside`: two external timing events, recorded as the graph's first and last nodes."""
    import torch

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):  # warm-up off the capture, as torch.cuda.graphs recommends
            fn()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    out = None
    with torch.cuda.graph(graph, pool=pool):
        if inside:
            inside[0].record()
        for _ in range(times):
            out = fn()
        if inside:
            inside[1].record()
    torch.cuda.synchronize()
    return graph, out


def _replays_us(graph: Any, calls: int) -> float:
    """The median of `calls` replays, each timed alone with a spin kernel ahead (no memory
    traffic, so L2 keeps what the last replay left in it)."""
    import torch

    starts = [torch.cuda.Event(enable_timing=True) for _ in range(calls)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(calls)]
    for k in range(calls):
        torch.cuda._sleep(SPIN_CYCLES)
        starts[k].record()
        graph.replay()
        ends[k].record()
    torch.cuda.synchronize()
    return median_us(starts, ends)


def graph_warm(fn: Callable[[], Any], calls: int = MAX_CALLS) -> float:
    """The arena's per-call replay, L2 kept warm and the inputs fixed: the median, in µs."""
    return _replays_us(captured(fn)[0], calls)


def graph_floor(calls: int = MAX_CALLS, unrolled: int = 100) -> float:
    """What a replay costs beyond its kernels, in µs: one empty kernel replayed alone, less
    that kernel's share of a graph of `unrolled` of them."""
    import torch

    def empty() -> None:
        torch.cuda._sleep(0)

    alone = _replays_us(captured(empty)[0], calls)
    many = _replays_us(captured(empty, unrolled)[0], 20) / unrolled
    return alone - many


class SmClock:
    """The GPU's current SM clock through NVML (libnvidia-ml, which the driver installs); None
    where it cannot be read."""

    NVML_CLOCK_SM = 1

    def __init__(self, index: int):
        self.handle: ctypes.c_void_p | None = None
        try:
            self.lib = ctypes.CDLL("libnvidia-ml.so.1")
            handle = ctypes.c_void_p()
            if self.lib.nvmlInit_v2() == 0 and (
                self.lib.nvmlDeviceGetHandleByIndex_v2(index, ctypes.byref(handle)) == 0
            ):
                self.handle = handle
        except OSError:
            pass

    def mhz(self) -> int | None:
        if self.handle is None:
            return None
        got = ctypes.c_uint()
        status = self.lib.nvmlDeviceGetClockInfo(self.handle, self.NVML_CLOCK_SM, ctypes.byref(got))
        return got.value if status == 0 else None


# --- the table ---------------------------------------------------------------------------------

# (control, the gap's cause where it agrees, what it is compared with): do_bench with the
# arena's one difference put in agrees with the arena; the arena with its one difference taken
# out agrees with do_bench; or both at once.
EAGER_CAUSES = (
    ("do_bench_led", "queued", "do_bench times the host's launch"),
    ("queued_fixed", "do_bench", "the arena's fresh inputs"),
    ("queued_fixed", "do_bench_led", "the arena's fresh inputs and do_bench's launch together"),
)
# A difference of two medians of CUDA events, each good to about 0.5 µs (the CUDA runtime's
# documented resolution of cudaEventElapsedTime): the graph control subtracts the replay's own
# cost measured apart, so it is compared within this many µs where 3% is finer than that.
EVENT_RESOLUTION_US = 0.5
VERDICTS = ("agrees", "explained", "inconclusive", "unexplained")


def _close(a: float, b: float, slack_us: float = 0.0) -> bool:
    return abs(a / b - 1) <= BOUND or abs(a - b) <= slack_us


def explain(med: dict[str, float], spread: dict[str, float] | None = None) -> tuple[str, str, str]:
    """(arena / reference as text, verdict, why) for one workload's medians (`spread`: each
    condition's round-to-round spread, max/min - 1). The verdict is one of VERDICTS: within 3%;
    a control that changes one named thing closes the gap; the reference's or the arena's own
    rounds differ by more than the gap, so that no 3% comparison can be made; or none of those."""
    spread = spread or {}
    graphed = "graph" in med and "do_bench_cudagraph" in med
    arena_key, ref_key = ("graph", "do_bench_cudagraph") if graphed else ("queued", "do_bench")
    arena, ref = med[arena_key], med[ref_key]
    ratio = f"{arena / ref:.3f}"
    if _close(arena, ref):
        return ratio, "agrees", ""
    if graphed and "graph_warm" in med:
        # the arena's replay without the flush, on fixed inputs, less what a replay costs
        # beyond its kernels (do_bench_cudagraph shares that across a graph of calls)
        floor = max(0.0, med.get("graph_floor", 0.0))
        warm = med["graph_warm"] - floor
        if _close(warm, ref, 2 * EVENT_RESOLUTION_US):
            return (
                ratio,
                "explained",
                (
                    f"cold L2 and fresh inputs, and a replay's own {floor:.1f} µs "
                    f"(graphed, warm L2, less that: {warm:.1f} µs)"
                ),
            )
    if not graphed:
        for control, other, cause in EAGER_CAUSES[:2]:  # one change each
            if control in med and other in med and _close(med[control], med[other]):
                return (
                    ratio,
                    "explained",
                    f"{cause} ({control} / {other} {med[control] / med[other]:.3f})",
                )
    clock_a, clock_r = med.get(f"clock_{arena_key}"), med.get(f"clock_{ref_key}")
    if clock_a and clock_r and abs(clock_a / clock_r - 1) > BOUND:
        # the side with the lower clock is the slower one, by no more than the clocks differ
        # (a kernel's time scales at most inversely with its clock)
        slower_at_lower = (arena > ref) == (clock_a < clock_r)
        if slower_at_lower and abs(arena / ref - 1) <= abs(clock_r / clock_a - 1) + BOUND:
            return ratio, "explained", f"the SM clock: {clock_a:.0f} against {clock_r:.0f} MHz"
    if not graphed:  # both changes at once: weaker evidence, so asked last
        control, other, cause = EAGER_CAUSES[2]
        if control in med and other in med and _close(med[control], med[other]):
            return (
                ratio,
                "explained",
                f"{cause} ({control} / {other} {med[control] / med[other]:.3f})",
            )
    noisy = max(spread.get(arena_key, 0.0), spread.get(ref_key, 0.0))
    if noisy >= abs(arena / ref - 1):
        side = arena_key if spread.get(arena_key, 0.0) >= spread.get(ref_key, 0.0) else ref_key
        return ratio, "inconclusive", f"{side}'s own two rounds differ by {noisy:.0%}"
    return ratio, "unexplained", ""


COLUMNS = (
    "queued",
    "do_bench",
    "do_bench_led",
    "queued_fixed",
    "graph",
    "do_bench_cudagraph",
    "graph_warm",
    "graph_floor",
)


def medians(entry: dict[str, Any]) -> dict[str, float] | None:
    """One conditions entry's medians per condition (and its clocks, as `clock_<condition>`);
    None where it was not measured."""
    got = entry.get("rounds_us") or {}
    if "error" in entry or not got.get("queued") or not got.get("do_bench"):
        return None
    med = {k: statistics.median(v) for k, v in got.items() if v}
    for cond, mhz in (entry.get("clock_mhz") or {}).items():
        if mhz and all(mhz):
            med[f"clock_{cond}"] = statistics.median(mhz)
    return med


def verdict_of(entry: dict[str, Any], med: dict[str, float]) -> tuple[str, str, str]:
    """`explain` for one measured conditions entry, its `medians` given."""
    spread = {
        k: max(v) / min(v) - 1 for k, v in entry["rounds_us"].items() if len(v) > 1 and min(v) > 0
    }
    return explain(med, spread)


def per_task(entries: list[dict[str, Any]]) -> dict[str, str]:
    """Each task's workloads by verdict, for the identity table's column: `3 within 3%, 7
    explained` (the inconclusive and unexplained named where there are any)."""
    counts: dict[str, dict[str, int]] = {}
    for e in entries:
        med = medians(e)
        if med is not None:
            mine = counts.setdefault(e["task"], dict.fromkeys(VERDICTS, 0))
            mine[verdict_of(e, med)[1]] += 1
    words = {"agrees": "within 3%"}
    return {
        task: ", ".join(f"{n} {words.get(v, v)}" for v, n in got.items() if n)
        for task, got in counts.items()
    }


def timer_table(entries: list[dict[str, Any]]) -> tuple[list[str], dict[str, int]]:
    """Rows per (task, workload): the arena's median (graphed where the arena graphs) against
    do_bench's (do_bench_cudagraph's), the controls, and the verdict; and how many workloads
    got each verdict."""
    lines = [
        "| task | workload | arena (µs) | do_bench (µs) | do_bench, lead flushes | arena, fixed inputs | graphed (µs) | do_bench_cudagraph | graphed, warm L2 | replay's own | arena / reference | verdict |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    counts = dict.fromkeys(VERDICTS, 0)
    for e in entries:
        med = medians(e)
        if med is None:
            lines.append(
                f"| {e['task']} | {e['label']} | {e.get('error', 'not measured')} |||||||||||"
            )
            continue
        ratio, verdict, why = verdict_of(e, med)
        counts[verdict] += 1
        shown = {"agrees": "within 3%", "unexplained": "**unexplained**"}.get(verdict, verdict)
        cells = " | ".join(f"{med[key]:.1f}" if key in med else "–" for key in COLUMNS)
        lines.append(
            f"| {e['task']} | {e['label']} | {cells} | {ratio} | {shown}{': ' + why if why else ''} |"
        )
    return lines, counts
