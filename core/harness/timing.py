"""Timing one side (candidate or baseline) of a workload, inside its own worker process.

GPU: fresh inputs for every call, refilled in place before the timer (stream-ordered); the L2
flushed before each call; device events around the call; a device-wide synchronize after each
round of calls. The calls of a round are queued back to back, as triton.testing.do_bench
queues its repetitions: a host wait after every call lets the device idle between calls, and
that measured 0.90-1.19x of do_bench where queuing measured 0.90-1.04x (docs/fidelity.md).
The flush is queued before the start event, so the call's launch is already waiting when the
timer starts. Decode-sized workloads are timed as CUDA graph replays, one host wait per call.
CPU: wall clock around each call, a small budget per workload.

Sampled calls: the parent names a few calls of each round (as fractions of the round, drawn
with its own RNG); right after each of those calls returns, outside the timed region, its
outputs are checked for type and copied (stream-ordered on GPUs: a copy on the timed stream
sees only work that stream waited for). The trusted worker later regenerates that call's
inputs and checks the copy against the reference (docs/integrity.md). Unsampled calls run
exactly as before: no copy, no host wait. That is the old path; where the device can share
memory the candidate's rounds go through shared_io.py instead: `fresh` waits on the trusted
worker for each call's inputs (a host wait between calls), `picker` names every call and
`keep` copies every call's outputs back, so nothing here knows the seed or the sampled calls.

The clocks are bound here, at import, before any candidate code runs, so that a candidate
that patches `time`, `torch.cuda.synchronize` or the Event class (its methods included)
afterwards does not reach the timer: events are created, recorded and read through the C
base class's own functions, called as plain functions.
"""

from __future__ import annotations

import gc
import math
import random
import statistics
import time
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, replace
from typing import Any

import torch

from core.harness.ratios import interval_width, spread_bound

_perf_counter = time.perf_counter
_zero = torch._C.TensorBase.zero_
_empty = torch.empty
_device_properties = torch.cuda.get_device_properties
# Plain attribute lookups: asking whether a GPU exists (torch.cuda.is_available) would
# initialise the driver in the warm parent, and a forked worker could then never use the GPU.
_cuda_sync_c = getattr(torch._C, "_cuda_synchronize", None)
_cuda_sync_py = torch.cuda.synchronize
_EventBase = getattr(torch._C, "_CudaEventBase", None)
_CudaEvent = torch.cuda.Event
_event_new = getattr(_EventBase, "__new__", None)
_event_record = getattr(_EventBase, "record", None)
_event_elapsed = getattr(_EventBase, "elapsed_time", None)
_current_stream = torch.cuda.current_stream
_Stream, _stream_ctx, _CUDAGraph, _graph_ctx = (
    torch.cuda.Stream,
    torch.cuda.stream,
    torch.cuda.CUDAGraph,
    torch.cuda.graph,
)
_cuda_empty_cache = getattr(torch._C, "_cuda_emptyCache", None) or torch.cuda.empty_cache
_xpu = getattr(torch, "xpu", None)
_xpu_empty_cache = getattr(torch._C, "_xpu_emptyCache", None) or getattr(_xpu, "empty_cache", None)
_xpu_sync = getattr(_xpu, "synchronize", None)
_XpuEvent = getattr(_xpu, "Event", None)
_xpu_record = getattr(_XpuEvent, "record", None)
_xpu_elapsed = getattr(_XpuEvent, "elapsed_time", None)

FLUSH_BYTES = 256 * 1024 * 1024
# Where a round's graph lies (Round.placement_per_round): a pad of 0 to 30 MiB, in the caching
# allocator's 2 MiB segments, allocated before the capture moves the graph's memory elsewhere.
PLACEMENT_STEP_BYTES = 2 * 1024 * 1024
PLACEMENT_STEPS = 16

Keep = Callable[[int, Any], None]  # (call index, what the call returned)


def _sync(device_type: str) -> None:
    if device_type == "cuda":
        if _cuda_sync_c is not None:
            _cuda_sync_c()  # the worker made its device current at start
        else:
            _cuda_sync_py()
    elif device_type == "xpu" and _xpu_sync is not None:
        _xpu_sync()


class _Events:
    """Timing events of one device type, through functions bound at import."""

    def __init__(self, device_type: str):
        self.cuda = device_type == "cuda"
        self.stream = _current_stream() if self.cuda else None

    def new(self) -> Any:
        if self.cuda:
            return _event_new(_CudaEvent, enable_timing=True)  # type: ignore[misc]
        return _XpuEvent(enable_timing=True)  # type: ignore[misc]

    def record(self, event: Any) -> None:
        if self.cuda:
            _event_record(event, self.stream)  # type: ignore[misc]
        else:
            _xpu_record(event)  # type: ignore[misc]

    def elapsed_ms(self, start: Any, end: Any) -> float:
        return float((_event_elapsed if self.cuda else _xpu_elapsed)(start, end))  # type: ignore[misc]


def flush_buffer(device: torch.device) -> torch.Tensor:
    """A buffer larger than the last-level cache; zeroing it evicts what the last call left.

    MI300-class parts have a 256 MB Infinity Cache behind the L2, so AMD gets twice as much."""
    nbytes = FLUSH_BYTES
    if device.type == "cuda":
        l2 = getattr(_device_properties(device), "L2_cache_size", 0)
        nbytes = max(nbytes, 4 * l2)
        if getattr(torch.version, "hip", None):
            nbytes = max(nbytes, 2 * FLUSH_BYTES)
    return _empty(nbytes // 4, dtype=torch.int32, device=device)


CI_Z = 1.96  # a 95% interval


def median_ci(ordered: Sequence[float], z: float = CI_Z) -> tuple[float, float]:
    """A distribution-free interval for the median of sorted samples: the order statistics
    whose ranks the binomial(n, 1/2) count puts z standard deviations either side of n/2
    (no assumption about the shape of the timing distribution)."""
    n = len(ordered)
    if n == 0:
        return (0.0, 0.0)
    half = z * math.sqrt(n) / 2
    low = max(0, int(math.floor(n / 2 - half)) - 1)
    high = min(n - 1, int(math.ceil(n / 2 + half)))
    return float(ordered[low]), float(ordered[high])


def ci_rel(ordered: Sequence[float]) -> float:
    """The median interval's larger half-width as a fraction of the median (inf: no samples)."""
    if not ordered:
        return math.inf
    median = statistics.median(ordered)
    low, high = median_ci(ordered)
    return max(median - low, high - median) / median if median > 0 else 0.0


def round_ratios(walls: dict[str, list[dict[str, Any]]]) -> list[float]:
    """Each alternation's baseline median over its candidate median (the paired rounds of one
    workload, in order; `walls` as the performance stage keeps them)."""
    return [
        float(b["median_us"]) / float(c["median_us"])
        for b, c in zip(walls["baseline"], walls["candidate"])
        if b.get("median_us") and c.get("median_us")
    ]


def settled(
    walls: dict[str, list[dict[str, Any]]], sides: dict[str, list[float]], target: float
) -> bool:
    """Whether timing may stop: both medians known to ±`target` (their 95% intervals), each
    side's rounds agreeing with each other within 2·`target` (the host held steady over
    them), and the alternations agreeing on the ratio: its interval
    (ratios.ratio_interval) within ±`target`. A round's calls agree with each other even where the rounds do not (on the H200
    a memory-bound kernel's round read 93, 107 or 146 µs as its buffers lay), so tight medians
    alone stopped inside one mode; the paired ratio is what the speedup is made of, and it is
    what must have settled. Two or three ratios that agree say little by themselves: a
    host-bound call whose alternations scatter by 6% has two within 2% one time in five. Its
    rounds, though, read far apart on each side, and that holds it (tests/test_ratios.py). A
    workload whose drawn inputs change its cost from round to round (routing, lengths) then
    times its planned rounds, and extra ones only if its ratios scatter."""
    if not all(ci_rel(sorted(sides[k])) <= target for k in sides):
        return False
    for rounds in walls.values():
        medians = [float(r["median_us"]) for r in rounds if r.get("median_us")]
        if medians and (max(medians) - min(medians)) > 2 * target * statistics.median(medians):
            return False
    ratios = [r for r in round_ratios(walls) if r > 0]
    return len(ratios) < 2 or interval_width(ratios) <= 2 * target


WIDE_SPREAD = 0.06  # a ratio interval wider than this (over the estimate) gets extra rounds


def wide(walls: dict[str, list[dict[str, Any]]]) -> bool:
    """Whether the paired ratios' interval (judged by ratios.spread_bound, which a few lucky
    alternations cannot narrow) is more than WIDE_SPREAD wide: then the estimate
    can be off by more than `train`'s ±3% bound, and more rounds are worth their time; each
    narrows the interval, about as 1/sqrt(rounds), until it is within the bound. A small
    kernel's ratios a few percent apart already give its estimate within the bound (the
    identity held on them before extra rounds existed); timing them on cost 0.9 s a candidate
    on the H200 (silu_mul, 2026-12-02). A host-bound call whose rounds read 10-15% apart as
    the host's CPU changes speed (docs/fidelity.md) times on until its interval is narrow."""
    ratios = [r for r in round_ratios(walls) if r > 0]
    return len(ratios) >= 2 and spread_bound(ratios) > WIDE_SPREAD


def more_rounds(
    done: int,
    plan: tuple[int, int, int, float],
    settled_now: Callable[[], bool],
    room: Callable[[], bool],
) -> bool:
    """Whether a workload's timing takes another alternation after `done` of them. `plan` is
    (rounds, min_rounds, extra, target): at least `min_rounds`; then it stops once both medians
    and the paired ratio have settled (`settled_now`, within ±`target`; 0: never early); past
    `rounds` only while they have not, up to `extra` more, and only while another is worth its
    time (`room`: the ratios still far apart, and one more round fits the stage's limit)."""
    rounds, min_rounds, extra, target = plan
    if done >= rounds + extra:
        return False
    if target > 0 and done >= min_rounds and settled_now():
        return False  # both medians and the paired ratio known: more rounds would not move it
    return done < rounds or (target > 0 and room())


def summarize(times_us: list[float]) -> dict[str, Any]:
    if not times_us:
        return {"n": 0}
    ordered = sorted(times_us)
    ci_low, ci_high = median_ci(ordered)
    q = (
        statistics.quantiles(ordered, n=4, method="inclusive")
        if len(ordered) > 1
        else [ordered[0]] * 3
    )
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
        # The median's 95% interval (order statistics): timing stops once it is within the
        # profile's target (±1%) on both sides of a workload (runner.py, docs/evaluation.md).
        "ci_low_us": ci_low,
        "ci_high_us": ci_high,
        "ci_rel": max(median - ci_low, ci_high - median) / median if median > 0 else 0.0,
    }


def picks(sample: Sequence[float], calls: int) -> set[int]:
    """The calls of a round (0-based) that the parent's fractions name."""
    return {min(calls - 1, max(0, int(u * calls))) for u in sample} if calls > 0 else set()


MATCH_SLACK = 4.0  # the candidate matches the baseline's count unless that takes over 4 budgets


@dataclass(frozen=True)
class Round:
    """One timed round's parameters: about `budget_ms` of calls, between `min_calls` and
    `max_calls`; the warm-up call gets inputs `first_index`, timed call k `first_index + 1 + k`
    (so inputs stay fresh across alternation rounds); `graph`: CUDA graph replays;
    `sync_each_call`: a host wait after every call instead of queuing them; `match_calls`: the
    number of calls the baseline's round of this alternation timed (0: none), which the
    candidate's round times too, on the same inputs (`calls_for`)."""

    budget_ms: float
    min_calls: int
    max_calls: int
    first_index: int
    graph: bool
    sync_each_call: bool = False
    match_calls: int = 0
    # The round's wall clock, each call's refill and flushes included (None: no cap). The
    # budget counts the device's time only; a 10 µs kernel whose refill and flushes cost the
    # host 0.5 ms would otherwise fill a 20 ms budget with 1,000 calls and half a second.
    wall_ms: float | None = None
    # A workload's first round: the caching allocator's free blocks go back to the device
    # first (release_cached), on both sides
    release_cache: bool = False
    # Whether the round asks if its calls wait on the host (waits_on_host: one more warm-up
    # call); the performance stage asks in a workload's first round only
    probe_host: bool = False
    # A workload's first round on the CPU: one untimed call first, on both sides (_time_cpu);
    # the GPU's timers warm up in every round
    warm_up: bool = False
    # A graph round's capture moved elsewhere in memory each round (placement_pad_bytes). On
    # the H200 one process's captures of one call differ by up to 3% as their memory lies, and
    # round after round a process captures at the same place, so each side keeps its own
    # offset for a whole evaluation (docs/fidelity.md, "Where the offset comes from"). Moving
    # the outputs each round did not shrink that offset on an H100, so it is off unless the
    # engine asks (ARENA_TIMING_PLACEMENT): a setting for measuring it on other GPUs.
    placement_per_round: bool = False
    # A graph round timed by events recorded inside its graph (first node to last) rather than
    # around its replay: what the graph's launch adds left out (ARENA_TIMING_EVENTS=inside)
    events_inside: bool = False
    # A graph round captured, replayed and timed on a stream of its own, the next of torch's
    # pool (which cycles over the device's hardware queues), rather than the worker's current
    # stream (ARENA_TIMING_PLACEMENT=new_stream): a setting for measuring whether the offset
    # between an evaluation's two processes is the queue each process's stream maps to
    stream_per_round: bool = False
    # A graph round whose Triton kernels are loaded afresh before its warm-up, so its graph
    # runs code at another address each round (ARENA_TIMING_PLACEMENT=new_code): a setting for
    # measuring whether the offset is where each process loaded its kernels' code
    code_per_round: bool = False

    @classmethod
    def from_request(cls, msg: dict[str, Any]) -> Round:
        """The round a `time` request asks for (its values as sent)."""
        return cls(
            msg["budget_ms"],
            msg["min_calls"],
            msg["max_calls"],
            msg["first_index"],
            msg["graph"],
            msg.get("sync_each_call", False),
            int(msg.get("match_calls") or 0),
            float(msg["round_wall_ms"]) if msg.get("round_wall_ms") else None,
            bool(msg.get("release_cache")),
            bool(msg.get("probe_host")),
            bool(msg.get("warm_up")),
            bool(msg.get("placement_per_round")),
            bool(msg.get("events_inside")),
            bool(msg.get("stream_per_round")),
            bool(msg.get("code_per_round")),
        )

    def calls_for(self, estimate_ms: float, call_wall_ms: float = 0.0) -> int:
        """How many calls fill the budget, given one call's estimated milliseconds on the device
        and, where the round has a `wall_ms` cap, one call's whole cost to the host
        (`call_wall_ms`: its refill, flushes, launch and wait); with `match_calls`, that many
        (the baseline's round's, so both sides' medians are over the same inputs) unless at
        this speed they would take more than MATCH_SLACK budgets.

        Each side counted its own calls before: where a workload's work depends on its drawn
        inputs (lengths, routing, group sizes), a median of 4 calls against one of 5 compared
        different inputs, and the identity read 0.67-1.21 from round to round on the H200
        (fp8_blockscale_grouped_gemm, mla_prefill; docs/fidelity.md)."""
        most = self.max_calls
        if self.wall_ms and call_wall_ms > 0:
            most = min(most, int(self.wall_ms / call_wall_ms))
        own = max(self.min_calls, min(most, int(self.budget_ms / max(estimate_ms, 1e-4))))
        if 0 < self.match_calls <= self.max_calls and estimate_ms * self.match_calls <= (
            MATCH_SLACK * self.budget_ms
        ):
            return self.match_calls
        return own


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
    sample: Sequence[float] = (),
    keep: Keep | None = None,
    picker: Callable[[int], set[int]] | None = None,
) -> dict[str, Any]:
    """`time_round` with the round's parameters one by one."""
    rnd = Round(budget_ms, min_calls, max_calls, first_index, graph, sync_each_call)
    return time_round(fn, fresh, device, rnd, sample, keep, picker)


def time_round(
    fn: Callable[..., Any],
    fresh: Callable[[int], list[Any]],  # inputs for the i-th call, refilled in place
    device: torch.device,
    rnd: Round,
    sample: Sequence[float] = (),
    keep: Keep | None = None,
    picker: Callable[[int], set[int]] | None = None,
) -> dict[str, Any]:
    """Per-call times in microseconds for one round (`Round`). `keep(index, result)` is called
    right after each sampled call; `picker(calls)`, where given, names the round's sampled
    calls instead of `sample` (the shared-memory path keeps every call: shared_io.py).
    Returns {"times_us": [...], "mode": "graph"|"events"|"queued"|"wall"}."""
    graph = rnd.graph and device.type == "cuda"
    # A moved graph round (Round.placement_per_round) starts from an empty cache as a
    # workload's first round does: the last round's graph went back to the allocator, and
    # returned to the device it leaves the pad (_time_graph) to take its place.
    if rnd.release_cache or (graph and rnd.placement_per_round):
        release_cached(device.type)
    if device.type == "cpu":
        return {"times_us": _time_cpu(fn, fresh, rnd, sample, keep, picker), "mode": "wall"}
    if graph:
        try:
            own = _stream_ctx(_Stream(device)) if rnd.stream_per_round else nullcontext()
            with own:
                times = _time_graph(fn, fresh, device, rnd, sample, keep, picker)
            return {"times_us": times, "mode": "graph"}
        except Exception as exc:  # noqa: BLE001 - a kernel that cannot be captured is timed eagerly
            _sync("cuda")
            eager = replace(rnd, sync_each_call=True)
            times, host_bound = _time_events(fn, fresh, device, eager, sample, keep, picker)
            return {
                "times_us": times,
                "mode": "events",
                "graph_error": str(exc)[:500],
                "host_bound": host_bound,
            }
    times, host_bound = _time_events(fn, fresh, device, rnd, sample, keep, picker)
    return {
        "times_us": times,
        "mode": "events" if rnd.sync_each_call else "queued",
        "host_bound": host_bound,
    }


def release_cached(device_type: str) -> None:
    """Give the caching allocator's free blocks back to the device, as a fresh worker has none.

    A batch's baseline worker times every candidate of the batch; a workload whose calls
    allocate blocks of sizes its drawn inputs decide (a grouped GEMM's groups) found them
    cached in the baseline's worker, warm from the batch's earlier candidates, and had the
    candidate's fresh worker pay the device's allocations: its first rounds read 0.72-0.89 of
    the baseline on identical code (docs/fidelity.md). Both sides release theirs before a
    workload's first round, so both start from the same state and, fed the same draws, make
    the same allocations. Bound at import: a candidate that replaces torch.cuda.empty_cache
    does not keep its own blocks."""
    if device_type == "cuda":
        _sync("cuda")
        _cuda_empty_cache()
    elif device_type == "xpu" and _xpu_empty_cache is not None:
        _sync("xpu")
        _xpu_empty_cache()


def _time_cpu(fn, fresh, rnd: Round, sample, keep, picker=None) -> list[float]:
    """A warm-up call in a workload's first round only (`Round.warm_up`): the candidate's
    worker ran the candidate in its correctness stages, the baseline's worker has not run the
    baseline before, and its first call pays what a process pays once (its threads made, its
    memory first touched). Later rounds find both warm; a call interpreted on the CPU can take
    a second, so not every round pays one. The first timed call's time fixes the round's
    number of calls."""
    first = rnd.first_index
    times: list[float] = []
    calls = chosen = None
    k = 0
    if rnd.warm_up:
        fn(*fresh(first))
    while calls is None or k < calls:
        args = fresh(first + 1 + k)
        t0 = _perf_counter()
        result = fn(*args)
        t1 = _perf_counter()
        times.append((t1 - t0) * 1e6)
        if calls is None:
            calls = rnd.calls_for((t1 - t0) * 1e3)
            chosen = picker(calls) if picker is not None else picks(sample, calls)
        if k in chosen and keep is not None:
            keep(first + 1 + k, result)
        result = None
        k += 1
    return times


MAX_LEAD_FLUSHES = 12  # at most this many extra flushes before a call (about 1 ms on an H200)


def lead_flushes(host_us: float, flush_us: float) -> int:
    """Extra flushes to queue before a call's start event so that the GPU is still busy when
    the host has finished launching the call (`host_us`, measured on the warm-up call): then
    the call's event time is the device's, not the host's launch latency.

    Each timed call follows a host wait (the shared-memory path's refill, or a graph-less
    fallback), so the device is idle when the host starts it. With only the flush ahead of the
    start event (about 70 µs on an H200), a call whose Python wrapper takes longer to launch
    (Liger's RoPE: index_select, two copies and a Triton launch) was timed partly as the
    host's launch time: 93 µs when hidden, 107-211 µs when not, varying with the host's speed
    from round to round (docs/fidelity.md). The extra flushes cover it, and bring the clocks
    up after the idle gap. A call that waits on the device itself (a host sync inside it) pays
    its own wait whatever is queued: that is its cost."""
    if flush_us <= 0:
        return 0
    return max(0, min(MAX_LEAD_FLUSHES, math.ceil(1.5 * host_us / flush_us) - 1))


PROBE_FLUSHES = 128  # at most this many flushes queued ahead of the host-bound probe's call


def waits_on_host(
    fn: Callable[..., Any],
    args: list[Any],
    flush: torch.Tensor,
    host_us: float,
    flush_us: float,
    kind: str,
) -> bool:
    """Whether a call's device time depends on the host's speed: it waits on the device inside
    (a `.tolist()` of group sizes, an `.item()` of lengths), after which the device idles while
    the host launches the rest; or it takes longer to launch than the lead flushes can cover.

    The H200 host's vCPUs run in fast and slow modes (up to 3x, each CPU its own, lasting tens
    of milliseconds: docs/fidelity.md); such a call's time moves with them, so the parent times
    its workload call by call, alternating the two sides (interleaved.py), and both meet the
    same mode. The probe: one more warm-up call with about 8x its launch time of flushes queued
    ahead; a call that returns only after half of them ran waited on the device."""
    if kind != "cuda" or flush_us <= 0:
        return False
    if 1.5 * host_us > (MAX_LEAD_FLUSHES + 1) * flush_us:
        return True
    ahead = min(PROBE_FLUSHES, math.ceil(8 * host_us / flush_us) + 2)
    for _ in range(ahead):
        _zero(flush)
    t0 = _perf_counter()
    fn(*args)
    returned_us = (_perf_counter() - t0) * 1e6
    _sync(kind)
    return returned_us >= 0.5 * ahead * flush_us


def _time_events(
    fn, fresh, device, rnd: Round, sample, keep, picker=None
) -> tuple[list[float], bool]:
    first, sync_each_call = rnd.first_index, rnd.sync_each_call
    kind = device.type
    events = _Events(kind)
    flush = flush_buffer(device)
    # Touched once before it is timed: a workload's first round gets it freshly allocated
    # (release_cached), and a first touch's cost would inflate the flush time measured below.
    _zero(flush)
    t0 = _perf_counter()
    args = fresh(first)
    _sync(kind)
    refill_ms = (_perf_counter() - t0) * 1e3  # what each call's refill costs the host
    fn(*args)  # warm-up: lazy initialisation and compilation stay out of the numbers
    _sync(kind)
    # The second warm-up call: its device time sizes the round, its host time (launch only,
    # measured before the wait) how much work must be queued ahead of each call.
    flushed, begun, done = events.new(), events.new(), events.new()
    events.record(flushed)
    _zero(flush)
    events.record(begun)
    t0 = _perf_counter()
    fn(*args)
    host_us = (_perf_counter() - t0) * 1e6
    events.record(done)
    _sync(kind)
    device_ms, flush_ms = events.elapsed_ms(begun, done), events.elapsed_ms(flushed, begun)
    lead = lead_flushes(host_us, flush_ms * 1e3)
    host_bound = rnd.probe_host and waits_on_host(fn, args, flush, host_us, flush_ms * 1e3, kind)
    # One timed call's cost to the round's wall clock: the refill, then the flushes and the
    # call queued while the host launches it, then the wait before the next refill.
    call_wall_ms = refill_ms + max(host_us / 1e3, (lead + 1) * flush_ms + device_ms)
    calls = rnd.calls_for(device_ms, call_wall_ms)
    chosen = picker(calls) if picker is not None else picks(sample, calls)
    starts = [events.new() for _ in range(calls)]
    ends = [events.new() for _ in range(calls)]
    for k in range(calls):
        # Refilling the inputs is stream-ordered before the flush and the start event, so it
        # stays outside the timer whether or not the host waits for it.
        args = fresh(first + 1 + k)
        if sync_each_call:
            _sync(kind)
        for _ in range(lead):
            _zero(flush)
        _zero(flush)
        events.record(starts[k])
        result = fn(*args)
        events.record(ends[k])
        if k in chosen and keep is not None:
            keep(first + 1 + k, result)  # a copy queued after the end event
        result = None
        if sync_each_call:
            _sync(kind)
    _sync(kind)
    return [events.elapsed_ms(s, e) * 1e3 for s, e in zip(starts, ends)], host_bound


def placement_pad_bytes(first_index: int) -> int:
    """The pad a round with `placement_per_round` allocates before its capture: drawn from the
    round's first input index, so a run is reproducible and its rounds lie apart."""
    return PLACEMENT_STEP_BYTES * random.Random(first_index).randrange(PLACEMENT_STEPS)


def reload_triton_code() -> int:
    """Forget every Triton kernel this process has loaded, so that the next call of each loads
    its module again (from Triton's disk cache: the same binary, placed anew). How many JIT
    functions were cleared (0 without Triton)."""
    try:
        from triton.runtime.jit import JITFunction
    except Exception:  # noqa: BLE001 - no Triton here, or one that cannot load
        return 0
    # type(), not isinstance: an object's own __class__ (a candidate's) is never asked
    found = [obj for obj in gc.get_objects() if issubclass(type(obj), JITFunction)]
    for fn in found:
        loaded = getattr(fn, "device_caches", None)  # a dict of each device's, in Triton 3.x
        if loaded is not None:
            loaded.clear()
    return len(found)


def _time_graph(fn, fresh, device, rnd: Round, sample, keep, picker=None) -> list[float]:
    first = rnd.first_index
    pad = None
    if rnd.placement_per_round:  # on an empty cache (time_round): the capture's pool lies after it
        pad = _empty(placement_pad_bytes(first), dtype=torch.uint8, device=device)
    t_refill = _perf_counter()
    static = fresh(first)
    _sync("cuda")
    refill_ms = (_perf_counter() - t_refill) * 1e3
    if rnd.code_per_round:
        reload_triton_code()
    side = _Stream(device)
    side.wait_stream(_current_stream(device))
    with _stream_ctx(side):
        for _ in range(2):  # warm-up off the capture, as torch.cuda.graphs recommends
            fn(*static)
    _current_stream(device).wait_stream(side)
    _sync("cuda")
    graph = _CUDAGraph()
    inside = []
    if rnd.events_inside:  # external: record nodes in the graph, not a cross-stream dependency
        inside = [_event_new(_CudaEvent, enable_timing=True, external=True) for _ in range(2)]  # type: ignore[misc]
    with _graph_ctx(graph):
        if inside:  # recorded as the graph's first node, on the capture's own stream
            _event_record(inside[0], _current_stream(device))  # type: ignore[misc]
        outputs = fn(*static)
        if inside:
            _event_record(inside[1], _current_stream(device))  # type: ignore[misc]
    _sync("cuda")
    del pad  # the capture's pool is placed; the pad's memory may serve the flush buffer
    events = _Events("cuda")
    flush = flush_buffer(device)
    t0 = _perf_counter()
    _zero(flush)
    _sync("cuda")
    t1 = _perf_counter()
    graph.replay()
    _sync("cuda")
    replay_ms, flush_ms = (_perf_counter() - t1) * 1e3, (t1 - t0) * 1e3
    calls = rnd.calls_for(replay_ms, refill_ms + flush_ms + replay_ms)
    chosen = picker(calls) if picker is not None else picks(sample, calls)
    starts = [events.new() for _ in range(calls)]
    ends = [events.new() for _ in range(calls)]
    times = []
    for k in range(calls):
        fresh(first + 1 + k)  # refills the graph's input buffers in place
        _sync("cuda")
        _zero(flush)
        events.record(starts[k])
        graph.replay()
        events.record(ends[k])
        _sync("cuda")
        timed = inside or (starts[k], ends[k])
        times.append(events.elapsed_ms(timed[0], timed[1]) * 1e3)
        if k in chosen and keep is not None:
            keep(first + 1 + k, outputs)  # the graph's own output buffers, just replayed
    return times
