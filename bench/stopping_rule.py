"""How often a workload's speedup lands outside `train`'s ±3% for the same code on both sides,
under the stopping rule as it stands (core/harness/timing.py) and as it was before 2026-12-03's
fourth session (the range of the paired ratios, at most 8 rounds), by how much the rounds of
one workload scatter. Each side's round runs in a mode of the host (a factor scattered by
noise/sqrt(2)), its calls 0.5% apart; both sides' true time is the same.

    PYTHONPATH=. python3 bench/stopping_rule.py [--trials 400]
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
from collections.abc import Callable

from core.evaluation.job import Timing
from core.harness import timing
from core.harness.ratios import hodges_lehmann

NOISES = (0.01, 0.02, 0.04, 0.06, 0.09, 0.12)
CALLS = 16


def _range_spread(walls: dict) -> float | None:
    ratios = timing.round_ratios(walls)
    if len(ratios) < 2:
        return None
    return (max(ratios) - min(ratios)) / statistics.median(ratios)


def before_settled(walls: dict, sides: dict, target: float) -> bool:
    """The rule before: both medians within ±target, the ratios' range within 2·target."""
    if not all(timing.ci_rel(sorted(sides[k])) <= target for k in sides):
        return False
    spread = _range_spread(walls)
    return spread is None or spread <= 2 * target


def before_wide(walls: dict) -> bool:
    spread = _range_spread(walls)
    return spread is not None and spread > 0.06


Rule = tuple[Callable[[dict, dict, float], bool], Callable[[dict], bool], int]
RULES: dict[str, Rule] = {
    "as it stands": (timing.settled, timing.wide, Timing.for_device("cuda", "train").extra_rounds),
    "before (range, 8 rounds)": (before_settled, before_wide, 4),
}


def one(noise: float, seed: int, rule: Rule) -> tuple[int, float]:
    settled, wide, extra = rule
    train = Timing.for_device("cuda", "train")
    rng = random.Random(seed)
    walls: dict = {"candidate": [], "baseline": []}
    sides: dict = {"candidate": [], "baseline": []}
    plan = (train.alternations, train.min_rounds or 1, extra, train.ci_target)
    while True:
        for side in ("baseline", "candidate"):
            mode = 100.0 * math.exp(rng.gauss(0.0, noise / math.sqrt(2)))
            times = [mode * (1 + rng.gauss(0.0, 0.005)) for _ in range(CALLS)]
            sides[side] += times
            walls[side].append({"median_us": sorted(times)[CALLS // 2]})
        done = len(walls["candidate"])
        if not timing.more_rounds(
            done, plan, lambda: settled(walls, sides, train.ci_target), lambda: wide(walls)
        ):
            return done, hodges_lehmann(timing.round_ratios(walls))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trials", type=int, default=400)
    args = p.parse_args()
    print("| rounds' scatter | rule | outside ±3% | rounds (median) | rounds (mean) |")
    print("| ---: | --- | ---: | ---: | ---: |")
    for noise in NOISES:
        for name, rule in RULES.items():
            runs = [one(noise, seed, rule) for seed in range(args.trials)]
            outside = sum(abs(math.log(s)) > math.log(1.03) for _, s in runs) / len(runs)
            rounds = [n for n, _ in runs]
            print(
                f"| {noise:.0%} | {name} | {outside:.1%} | {statistics.median(rounds):g} | "
                f"{statistics.fmean(rounds):.1f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
