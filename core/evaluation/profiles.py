"""Evaluation profiles: how much work one reward costs, named and recorded in every Result.

- `full` (leaderboards, `arena eval`'s default): every visible and hidden-fixed workload timed,
  up to 5 alternating rounds of the device's budget (on a GPU each at most 80 ms of the
  host's clock, every call's refill and flushes counted), stopping early once both medians are
  known to ±1% (at least 2 rounds), and up to 5 more on a GPU while the rounds' paired ratios
  lie over 6% apart; compile limit at most 180 s.
- `train` (what a trainer asks for): one timed workload per regime the task's workloads
  declare (decode and prefill, from their notes, else from their size), up to 4 rounds of at
  most 32 calls (at least 2 rounds; up to 4 more on a GPU while their paired ratios lie over
  6% apart), compile limit at most 60 s, an `@triton.autotune` kernel tries its first 4
  configurations per new key, each measured for 4 ms and at most 50 calls instead of Triton's
  100 ms (core/harness/autotune.py). It never skips
  hidden correctness (unless the request itself is visible-only, an episode's turn) nor the
  sampled checks of timed outputs.

Both profiles cap each timed round of the candidate at K× the baseline's round (plus a floor)
and each correctness run at the profile's per-call limit (docs/evaluation.md, "Limits").
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from core.model.workload import Workload


class Profile(str, enum.Enum):
    FULL = "full"
    TRAIN = "train"


PROFILES = tuple(p.value for p in Profile)


class ProfileError(ValueError):
    """A profile name that is not one of PROFILES (exit code 2)."""


def parse_profile(name: str | Profile | None) -> Profile:
    if name is None:
        return Profile.FULL
    try:
        return Profile(name)
    except ValueError:
        raise ProfileError(
            f"profile `{name}` is unknown: use one of {', '.join(PROFILES)}"
        ) from None


@dataclass(frozen=True)
class ProfileSpec:
    compile_cap_s: float  # the stage's limit: the task's, at most this
    call_s: float  # one correctness run (a new shape may JIT-compile) or the first timed round
    round_factor: float  # a candidate's timed round: at most this × the baseline's round ...
    round_floor_s: float  # ... plus this (graph capture, warm-up)
    per_regime: bool  # time one workload per regime instead of every one
    # An @triton.autotune kernel tries at most this many configurations per new key, the first
    # ones it lists (core/harness/autotune.py); None: every one, as Triton does.
    autotune_configs: int | None = None
    autotune_rep_ms: float | None = None  # each trial's benchmark (None: Triton's 100 ms)


SPECS = {
    Profile.FULL: ProfileSpec(
        compile_cap_s=180.0, call_s=120.0, round_factor=10.0, round_floor_s=5.0, per_regime=False
    ),
    Profile.TRAIN: ProfileSpec(
        compile_cap_s=60.0,
        call_s=60.0,
        round_factor=10.0,
        round_floor_s=5.0,
        per_regime=True,
        autotune_configs=4,
        autotune_rep_ms=4.0,
    ),
}
CI_TARGET = 0.01  # the median's 95% interval within ±1% on both sides: timing stops


def regime_of(w: Workload, small: Callable[[Workload], bool | None]) -> str:
    """A workload's regime: `decode` or `prefill` where its note says so (`prompt` counts as
    prefill), else from its size (`small(w)`: decode-sized, launch-bound; None: unknown, one
    regime for all)."""
    note = (w.note or "").lower()
    if "decode" in note:
        return "decode"
    if "prefill" in note or "prompt" in note:
        return "prefill"
    is_small = small(w)
    return "all" if is_small is None else ("decode" if is_small else "prefill")


def per_regime(
    timed: Sequence[Workload], visible: Sequence[Workload], small: Callable[[Workload], bool | None]
) -> list[Workload]:
    """One workload per regime, in the timed list's order: a visible one where the regime has
    one, the middle one of the regime's visible (else timed) workloads in declared order."""
    regimes: dict[str, list[Workload]] = {}
    for w in timed:
        regimes.setdefault(regime_of(w, small), []).append(w)
    chosen = []
    for members in regimes.values():
        pool = [w for w in members if w in visible] or members
        chosen.append(pool[len(pool) // 2])
    return [w for w in timed if w in chosen]
