"""Turning stage results into numbers.

- speedup of a workload: measured over two alternations or more, the Hodges-Lehmann estimate
  of its alternations' paired ratios (each alternation's baseline median over its candidate
  median: the median of the pairwise means of their logarithms); else, and on predicted or
  CPU times, baseline median / candidate median. Of a task: the geometric mean over its timed
  workloads. Each alternation times both sides within milliseconds of each other, so what
  drifts on the host between alternations (a host-bound call read 300 µs in some rounds and
  800 µs in others on the H200, both sides alike) cancels in its ratio and not in the pooled
  medians: re-scored, the stored identity results held ±3% in 25 of 33 groups this way
  against 20 of 33 from the medians (docs/fidelity.md);
- fraction of speed of light = speed of light / candidate time, where the speed of light is
  the larger of the roofline time (the task's FLOP and byte formulas against the device's
  peaks, measured where recorded, else spec) and the device's launch floor (the time of the
  smallest kernel, timed as the workload is: graph-replayed or eager). A decode-sized
  workload's roofline is a fraction of a microsecond that no kernel launch reaches; its
  launch floor is what the fastest possible kernel takes. Results keep both: `roofline_us`
  and `roofline_fraction` without the floor, `sol_us` and `sol_fraction` with it;
- the interval of a speedup (`speedup_interval`): what the timer's noise leaves possible. A
  measured workload's is the ratio of its two medians' 95% intervals, widened to the 95%
  interval of the Hodges-Lehmann estimate over its alternations' paired ratios (each
  alternation times both sides on the same memory, so a round-to-round mode shows there; up
  to six alternations that interval is their range, past that it narrows as the estimate's
  noise does: core/harness/ratios.py), and by the device's timer offset where one was measured
  (`timer_offset_us`, the peaks table: how far two processes read apart on the same kernel, an
  additive offset that lasts a whole evaluation, so its alternations cannot see it; on the
  H200 the identity's intervals held 1.0 in 89% of its results without it and 97% with it,
  docs/fidelity.md); a task's is the geometric mean of its workloads' ends.
  A difference inside it is a tie (`tied_speedup`: rewards, docs/rl.md; ranks,
  docs/leaderboard.md). A predicted result has none: a prediction has no noise to speak of
  (the same source is predicted the same, on any machine: docs/simulation.md, "The sample's
  clock"), and its workloads' ± band (`band_interval`) is the
  model's error against the GPU, shared by similar kernels, not a spread that could reorder
  two of them: tying inside it would flatten every reward of a family whose band is wide,
  as GEMM's is (docs/rl.md, "A prediction is no tie");
- fast_p over a task set = the share of tasks that are correct with speedup > p;
- the classic points, for comparison with AgentKernelArena: 20 for compiling, 100 for being
  correct, 100 × speedup.
A failed or missing result counts as zero points and is never correct or fast; it is never
dropped. In an aggregate speedup over results (leaderboard, compare) it counts 1.0, the user
keeping the baseline (`effective_speedup`: the failure rule, docs/leaderboard.md).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from core.devices.device import Peaks
from core.harness.ratios import hodges_lehmann, ratio_interval

IMPOSSIBILITY_MARGIN = 0.9  # a time below 90% of the spec roofline cannot be real
FAILED_SPEEDUP = (
    1.0  # what a failed result counts in an aggregate speedup over results (effective_speedup)
)


def paired_ratios(candidate: dict, baseline: dict) -> list[float]:
    """Each alternation's baseline median over its candidate median (the sides' `rounds`, in
    order; alternations where either side has no median are left out)."""
    pairs = zip(baseline.get("rounds") or [], candidate.get("rounds") or [])
    return [
        float(b["median_us"]) / float(c["median_us"])
        for b, c in pairs
        if b.get("median_us") and c.get("median_us")
    ]


def workload_speedup(timing_kind: str, candidate: dict, baseline: dict) -> float:
    """A workload's speedup (the module's docstring): from the paired alternations where a
    measured workload has two or more, else from the two medians."""
    if timing_kind == "measured":
        ratios = [r for r in paired_ratios(candidate, baseline) if r > 0]
        if len(ratios) >= 2:
            return hodges_lehmann(ratios)
    return speedup(
        float(baseline.get("median_us") or 0.0), float(candidate.get("median_us") or 0.0)
    )


def speedup(baseline_us: float, candidate_us: float) -> float:
    if candidate_us <= 0 or baseline_us <= 0:
        return 0.0
    return baseline_us / candidate_us


def geomean(values: Iterable[float]) -> float:
    """Geometric mean; any zero (a failure) makes it zero; an empty list is zero."""
    vals = list(values)
    if not vals or any(v <= 0 for v in vals):
        return 0.0
    return math.exp(sum(math.log(v) for v in vals) / len(vals))


def roofline_us(flops: float, nbytes: float, peaks: Peaks, compute: str) -> float | None:
    """max(FLOPs / compute peak, bytes / memory bandwidth), in microseconds."""
    tflops = peaks.compute_tflops(compute)
    terms = []
    if tflops:
        terms.append(flops / (tflops * 1e12) * 1e6)
    if peaks.hbm_tbps:
        terms.append(nbytes / (peaks.hbm_tbps * 1e12) * 1e6)
    return max(terms) if terms else None


def launch_floor_us(peaks: Peaks | None, graph: bool) -> float | None:
    """The device's launch floor for a workload timed as CUDA graph replays (`graph`) or
    eagerly: the measured figure of that kind, else the peaks table's `launch_overhead_us`."""
    if peaks is None:
        return None
    measured = peaks.launch_graph_us if graph else peaks.launch_eager_us
    return measured if measured is not None else peaks.launch_overhead_us


def reachable_us(roofline: float | None, floor: float | None) -> float | None:
    """The speed of light a kernel can reach: the roofline, but never below the launch floor."""
    if roofline is None:
        return None
    return max(roofline, floor) if floor is not None else roofline


def bus_bandwidth_gbps(
    size_bytes: float, bus_factor: float, time_us: float
) -> tuple[float, float] | None:
    """(algbw, busbw) in GB/s as nccl-tests defines them: algbw = S / t, busbw = algbw × factor."""
    if time_us <= 0:
        return None
    algbw = size_bytes / (time_us * 1e-6) / 1e9
    return algbw, algbw * bus_factor


def link_roofline_us(size_bytes: float, bus_factor: float, peaks: Peaks) -> float | None:
    """The time a collective takes at the scale-up link's full speed: S × factor bytes cross
    each rank's link in each direction (the peaks table gives the bidirectional figure)."""
    if not peaks.link_gbps or bus_factor <= 0:
        return None
    return size_bytes * bus_factor / (peaks.link_gbps / 2 * 1e9) * 1e6


def sol_fraction(roofline: float | None, candidate_us: float) -> float | None:
    if roofline is None or candidate_us <= 0:
        return None
    return roofline / candidate_us


def impossibility_floor_us(
    flops: float, nbytes: float, spec: Peaks | None, compute: str
) -> float | None:
    if spec is None:
        return None
    roof = roofline_us(flops, nbytes, spec, compute)
    return None if roof is None else IMPOSSIBILITY_MARGIN * roof


Interval = tuple[float, float]


def workload_interval(
    candidate: dict, baseline: dict, timer_offset_us: float = 0.0
) -> Interval | None:
    """A measured workload's speedup interval (see the module's docstring), widened by the
    device's `timer_offset_us`; None where a side has no median interval (results from before
    intervals were kept)."""
    try:
        c_lo, c_hi = float(candidate["ci_low_us"]), float(candidate["ci_high_us"])
        b_lo, b_hi = float(baseline["ci_low_us"]), float(baseline["ci_high_us"])
    except (KeyError, TypeError, ValueError):
        return None
    if min(c_lo, c_hi, b_lo, b_hi) <= 0:
        return None
    low, high = b_lo / c_hi, b_hi / c_lo
    ratios = [r for r in paired_ratios(candidate, baseline) if r > 0]
    if ratios:
        r_low, r_high = ratio_interval(ratios)
        low, high = min(low, r_low), max(high, r_high)
    return offset_widened((low, high), float(candidate.get("median_us") or 0.0), timer_offset_us)


def offset_widened(interval: Interval, candidate_us: float, offset_us: float) -> Interval:
    """`interval` with the candidate's time anywhere within ± `offset_us` of its median: the
    additive offset two processes can carry for a whole evaluation (the device's timer offset,
    measured by the identity sweeps). It weighs on a 4 µs kernel, not on a 400 µs one."""
    if offset_us <= 0 or candidate_us <= 0:
        return interval
    low, high = interval
    return (
        low * candidate_us / (candidate_us + offset_us),
        high * candidate_us / max(candidate_us - offset_us, candidate_us / 2),
    )


def band_interval(speedup_: float, band: float | None) -> Interval | None:
    """A predicted workload's speedup within its ± band: ÷ and × (1 + band), as the
    prediction's own low and high times are (a band over 100% still leaves a positive low)."""
    if band is None or speedup_ <= 0:
        return None
    return speedup_ / (1 + band), speedup_ * (1 + band)


def task_interval(intervals: list[Interval | None]) -> Interval | None:
    """A task's speedup interval: the geometric means of its workloads' ends (None unless
    every timed workload has one)."""
    if not intervals or any(i is None for i in intervals):
        return None
    return (
        geomean(i[0] for i in intervals),  # type: ignore[index]
        geomean(i[1] for i in intervals),  # type: ignore[index]
    )


def noise_interval(
    timing_kind: str, interval: Interval | list[float] | None
) -> Interval | list[float] | None:
    """The interval a tie may read: a measured result's, never a prediction's (one stored
    before predictions stopped carrying one included: module docstring, "the interval")."""
    return interval if timing_kind == "measured" else None


def tied_speedup(speedup_: float, interval: Interval | list[float] | None) -> float:
    """The speedup a reward or a rank should use: 1.0 where the interval holds 1.0 (the
    difference from the baseline is inside the timer's noise), else the speedup. The same
    source submitted twice then earns the same reward, and a trainer's advantage is not fed
    noise (docs/rl.md)."""
    if interval is not None and interval[0] <= 1.0 <= interval[1]:
        return 1.0
    return speedup_


def group_ties(members: list[tuple[float, Interval | list[float] | None]]) -> list[float]:
    """The speedups of a group of results (a GRPO group: one task, one batch) with the
    differences inside their noise removed: sorted by speedup, each joins the cluster of the
    fastest member whose interval overlaps its own, and every member of a cluster gets the
    cluster's geometric mean. The same source submitted twice then earns the same figure."""
    order = sorted(range(len(members)), key=lambda i: -members[i][0])
    out = [m[0] for m in members]
    clusters: list[list[int]] = []
    for i in order:
        speed, interval = members[i]
        head = clusters[-1][0] if clusters else None
        if head is not None and interval and members[head][1]:
            h_low, h_high = members[head][1]  # type: ignore[misc]
            if speed > 0 and interval[0] <= h_high and h_low <= interval[1]:
                clusters[-1].append(i)
                continue
        clusters.append([i])
    for cluster in clusters:
        if len(cluster) > 1:
            mean = geomean(members[i][0] for i in cluster)
            for i in cluster:
                out[i] = mean
    return out


def effective_speedup(correct: bool, speedup: float) -> float:
    """The failure rule (docs/leaderboard.md), written once: in every aggregate a result counts
    its speedup where it is correct, else 1.0 — the user keeps the baseline. A failure is not
    infinitely slow (0 would zero a geometric mean), and it never counts as correct or fast."""
    return speedup if correct and speedup > 0 else FAILED_SPEEDUP


def points(compiled: bool, correct: bool, task_speedup: float) -> float:
    return 20.0 * compiled + (100.0 + 100.0 * task_speedup if correct else 0.0)


def fast_p(results: Iterable[tuple[bool, float]], p: float) -> float:
    """Share of (correct, speedup) pairs that are correct and faster than p × baseline."""
    pairs = list(results)
    if not pairs:
        return 0.0
    return sum(1 for correct, s in pairs if correct and s > p) / len(pairs)


def gap_closed(speedup: float, sol_fraction: float | None) -> float | None:
    """The share of the gap between the baseline's time and the speed of light that the
    candidate closed, (T_baseline − T_candidate) / (T_baseline − T_sol), as SOL-ExecBench scores:
    0 at the baseline's speed, 1 at the speed of light, negative when slower than the baseline.
    Unlike the speedup it cannot grow past 1 against a weak baseline. From the figures a Result
    has (speedup = T_b / T_c, sol_fraction = T_sol / T_c) it is (speedup − 1) / (speedup − fraction).
    None where there is no speed of light, no time, or the baseline is already at or past it."""
    if sol_fraction is None or speedup <= 0 or sol_fraction <= 0:
        return None
    gap = speedup - sol_fraction  # (T_b − T_sol) / T_c
    if gap <= 1e-12 * speedup:
        return None
    return (speedup - 1.0) / gap
