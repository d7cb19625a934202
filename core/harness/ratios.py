"""Paired ratios (each alternation's baseline median over its candidate median): their
Hodges-Lehmann estimate and that estimate's interval. The harness stops timing on them
(timing.settled) and the engine scores with them (core/evaluation/scoring.py), so both read
the same figures. Pure Python: the engine's scoring imports it without torch.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence


def _walsh_logs(ratios: Sequence[float]) -> list[float]:
    """The Walsh averages of the ratios' logarithms (each pair's mean, each with itself
    included), sorted."""
    logs = [math.log(r) for r in ratios]
    return sorted((logs[i] + logs[j]) / 2 for i in range(len(logs)) for j in range(i, len(logs)))


def _middle(means: list[float]) -> float:
    n = len(means)
    return means[n // 2] if n % 2 else (means[n // 2 - 1] + means[n // 2]) / 2


def hodges_lehmann(ratios: Sequence[float]) -> float:
    """The Hodges-Lehmann estimate of positive ratios: the median of the Walsh averages of
    their logarithms, exponentiated. As robust as a median to one alternation caught in a slow
    mode, and nearly as efficient as a mean otherwise."""
    return math.exp(_middle(_walsh_logs(ratios)))


@functools.cache
def _signed_rank_depth(n: int, alpha: float) -> int:
    """How many Walsh averages to cut from each end for the Hodges-Lehmann estimate's
    two-sided (1 - alpha) interval over n ratios: the largest k with P(T+ < k) <= alpha/2,
    T+ being Wilcoxon's signed-rank statistic under a symmetric spread about the true ratio
    (its exact distribution: the subsets of {1..n} by their sum). At least 1 (the range),
    which is all that five ratios or fewer allow."""
    counts = [1] + [0] * (n * (n + 1) // 2)
    for rank in range(1, n + 1):
        for total in range(len(counts) - 1, rank - 1, -1):
            counts[total] += counts[total - rank]
    below, k = 0, 0
    while below + counts[k] <= alpha / 2 * 2**n:
        below += counts[k]
        k += 1
    return max(1, k)


def ratio_interval(ratios: Sequence[float], confidence: float = 0.95) -> tuple[float, float]:
    """The interval of the Hodges-Lehmann estimate over paired ratios: the Walsh averages k
    from either end, k from the signed-rank distribution (distribution-free, as the median's
    interval is). Up to six ratios it is their range; past that it narrows as the estimate's
    own noise does, about as 1/sqrt(n), where the range only widens."""
    means = _walsh_logs(ratios)
    if not means:
        return (0.0, 0.0)
    k = _signed_rank_depth(len(ratios), 1 - confidence)
    return math.exp(means[k - 1]), math.exp(means[-k])


def interval_width(ratios: Sequence[float]) -> float:
    """The width of ratio_interval over the estimate (0.0 for no ratios)."""
    means = _walsh_logs(ratios)
    if not means:
        return 0.0
    k = _signed_rank_depth(len(ratios), 0.05)
    return (math.exp(means[-k]) - math.exp(means[k - 1])) / math.exp(_middle(means))


# Student's t, two-sided 95%, by degrees of freedom (published tables); past 30, z's expansion.
_T95 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip


def _t95(df: int) -> float:
    if df <= len(_T95):
        return _T95[df - 1]
    z = 1.959964
    return z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)


def spread_bound(ratios: Sequence[float]) -> float:
    """How wide (over the estimate) the ratio's 95% interval may be, judged so that a few
    alternations cannot understate it: the wider of ratio_interval and Student's t interval of
    the ratios' mean logarithm. Four ratios of a call whose alternations scatter by 6% fall
    within 6% of each other one time in ten or so, and their range then says the ratio is
    known to ±3% when it is known to ±6%; the t interval widens by their standard deviation and
    the few there are (3.18 of them at four). Timing goes on while this is wide (timing.wide)."""
    n = len(ratios)
    if n < 2:
        return math.inf
    logs = [math.log(r) for r in ratios]
    mean = sum(logs) / n
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / (n - 1))
    half = _t95(n - 1) * sd / math.sqrt(n)
    return max(interval_width(ratios), math.exp(half) - math.exp(-half))
