"""Rewards: a Result turned into one number for a trainer.

A reward function is any callable `(Result) -> float | None`. Built-ins are registered by
name (`get_reward("default")`, `get_reward("gap_closed")`, `get_reward("fast_1.5")`);
`register_reward` adds more.

**The ladder.** Every built-in orders the outcomes (`outcome(result)`) the same way:
integrity violation < no code < compile failure < incorrect < correct, and among correct
candidates slower < faster. The default's values:

| outcome               | reward                                                          |
| --------------------- | --------------------------------------------------------------- |
| integrity_violation   | -1.0 (a proven cheat: the lowest of all, whatever else it did)  |
| no_code               | -0.75 (no candidate at all: no ```python block, an empty source) |
| compile_failed        | -0.5                                                            |
| incorrect             | -0.25 (visible or hidden workloads wrong, a crash, a timeout)   |
| infrastructure_error  | None: not the candidate's fault; the trainer should retry it    |
| correct               | 0.05 + 0.95 × (clip(log2 speedup, -3, 3) + 3) / 6, in (0, 1]    |

Why no code is the lowest honest outcome: early in GRPO most completions fail, and a policy
learns whatever failure pays best. If writing nothing paid more than writing wrong code
(as 0.0 against -0.25 did), abstaining would be learned before kernels are; every published
kernel-RL recipe puts format failures lowest for that reason. Each rung up is a step a policy
can take towards a kernel: write code, make it compile, make it right, make it fast.

A correct candidate at the baseline's speed gets 0.525, 8× faster or more gets 1.0 (the cap:
beyond it a gain is more likely a measurement or a cheat than a kernel), and 8× slower or
worse gets 0.05, still above every failure. The lower end is -3, not -1, so that a slow but
improving kernel (the usual start, and every Triton kernel on the CPU interpreter) still moves
its reward.

**The speedup a reward reads** is `reward_speedup(result)`, one function every built-in that
looks at speed goes through: a difference from the baseline inside the result's own interval
(`speedup_interval`, docs/fidelity.md) is a tie, read as 1.0. A batch (a GRPO group) also
settles ties among its members first (`group_rewards`): correct results whose intervals
overlap are rewarded at their cluster's geometric mean, so the same source submitted twice
earns the same reward.

Every built-in gives an integrity violation its lowest value, and none reads `review_notes`:
heuristic hits change no score (docs/architecture.md). On the `cpu` timing kind the
speed terms read CPU times, which the arena shows but never ranks: fine for plumbing and
tests, not for training.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Callable
from dataclasses import replace

from core.evaluation.scoring import Interval, gap_closed, group_ties, noise_interval, tied_speedup
from core.harness.pysource import parse_module
from core.model.result import Result

RewardFn = Callable[[Result], "float | None"]

INTEGRITY_VIOLATION = -1.0
NO_CODE = -0.75
COMPILE_FAILED = -0.5
INCORRECT = -0.25
CORRECT_FLOOR = 0.05  # the least a correct candidate gets: above every failure
LOG2_SPEEDUP_RANGE = (-3.0, 3.0)  # 1/8× .. 8×
GAP_RANGE = (
    -1.0,
    1.0,
)  # gap_closed's span: as far below the baseline as the baseline is from the limit .. the limit

# The ladder, lowest first (infrastructure_error is no rung: it has no reward).
OUTCOMES = (
    "integrity_violation",
    "no_code",
    "compile_failed",
    "incorrect",
    "correct",
    "infrastructure_error",
)
NO_CODE_NOTE = "no code"  # the compile stage's note on a Result for a reply that held no candidate


class UnknownReward(LookupError):
    """A reward name that is not registered."""


def has_code(source: str) -> bool:
    """Whether a source holds any code: not empty, not only comments or a docstring. A source
    that does not parse counts as code (it is a compile failure, not an abstention)."""
    if not source.strip():
        return False
    try:
        body = parse_module(source).body
    except (SyntaxError, ValueError):
        return True
    return any(
        not (
            isinstance(s, ast.Expr)
            and isinstance(s.value, ast.Constant)
            and isinstance(s.value.value, str)
        )
        for s in body
    )


def outcome(result: Result) -> str:
    """What happened to the candidate, in the order that decides its reward: a proven
    violation beats everything (even an infrastructure fault after it), then faults that are
    not the candidate's, then the first gate it failed (no code at all being below compile)."""
    if result.integrity_flags:
        return "integrity_violation"
    if result.status == "infrastructure_error":
        return "infrastructure_error"
    if result.status == "passed":
        return "correct"
    compile_stage = next((s for s in result.stages if s.name == "compile"), None)
    if compile_stage is not None and compile_stage.note == NO_CODE_NOTE:
        return "no_code"
    if compile_stage is None or compile_stage.status != "passed":
        return "compile_failed"
    return "incorrect"


LADDER: dict[str, float | None] = {
    "integrity_violation": INTEGRITY_VIOLATION,
    "no_code": NO_CODE,
    "compile_failed": COMPILE_FAILED,
    "incorrect": INCORRECT,
    "infrastructure_error": None,
}


def reward_speedup(result: Result) -> float:
    """The speedup every built-in reward reads: 1.0 where the result's own interval holds 1.0
    (its difference from the baseline is inside the timer's noise), else its speedup
    (scoring.tied_speedup). A batch's rewards first settle ties inside the group
    (`group_rewards`). A prediction (`sim:`) has no noise, so its speedup is read as it is."""
    return tied_speedup(result.speedup, _noise(result))


def _noise(result: Result) -> Interval | list[float] | None:
    return noise_interval(result.timing_kind, result.speedup_interval)


def group_rewards(fn: RewardFn, results: list[Result]) -> list[float | None]:
    """`fn` over one group's results (a GRPO group, evaluated as one batch), with the
    differences inside their noise settled first: correct results whose intervals overlap
    are scored at their cluster's geometric mean speedup (scoring.group_ties), so a trainer's
    advantage estimate is not fed timer noise. Each Result itself keeps its measured speedup."""
    correct = [i for i, r in enumerate(results) if r.passed and r.speedup > 0]
    settled = group_ties([(results[i].speedup, _noise(results[i])) for i in correct])
    scored = list(results)
    for i, speed in zip(correct, settled):
        if speed != results[i].speedup:
            scored[i] = replace(results[i], speedup=speed)
    return [fn(r) for r in scored]


def _scaled(fraction: float) -> float:
    """A correct candidate's share in [0, 1] mapped into [CORRECT_FLOOR, 1]."""
    return CORRECT_FLOOR + (1.0 - CORRECT_FLOOR) * min(1.0, max(0.0, fraction))


def _ladder(correct: Callable[[Result], float]) -> RewardFn:
    """A reward with the ladder's failure values and `correct(result)` for a correct candidate."""

    def reward(result: Result) -> float | None:
        kind = outcome(result)
        return correct(result) if kind == "correct" else LADDER[kind]

    reward.__doc__ = correct.__doc__
    return reward


def _log_speedup_value(result: Result) -> float:
    """A correct candidate's default reward: clip(log2 speedup, -3, 3) scaled into [0.05, 1]."""
    speed = reward_speedup(result)
    if speed <= 0:  # correct but untimed (performance skipped): the floor
        return CORRECT_FLOOR
    low, high = LOG2_SPEEDUP_RANGE
    return _scaled((min(high, max(low, math.log2(speed))) - low) / (high - low))


def _sol_value(result: Result) -> float:
    """A correct candidate's fraction of the device's speed of light scaled into [0.05, 1]; the
    floor where there is none (the CPU device, a GPU missing from the peaks table)."""
    return _scaled(result.sol_fraction) if result.sol_fraction is not None else CORRECT_FLOOR


def _gap_value(result: Result) -> float:
    """A correct candidate's share of the baseline-to-speed-of-light gap closed
    (core/evaluation/scoring.py, `gap_closed`), clip(gap, -1, 1) scaled into [0.05, 1]: the
    baseline's speed gives 0.525 as in the default, the speed of light 1.0. Where the gap is
    undefined (no speed of light, a baseline already at it) the default's value."""
    gap = gap_closed(reward_speedup(result), result.sol_fraction)
    if gap is None:
        return _log_speedup_value(result)
    low, high = GAP_RANGE
    return _scaled((min(high, max(low, gap)) - low) / (high - low))


def _named(fn: RewardFn, name: str) -> RewardFn:
    fn.__name__ = fn.__qualname__ = name  # reward_name() and logs show it
    return fn


log_speedup = _named(_ladder(_log_speedup_value), "log_speedup")
speed_of_light = _named(_ladder(_sol_value), "speed_of_light")
gap_reward = _named(_ladder(_gap_value), "gap_closed")


def fast_p(p: float) -> RewardFn:
    """1.0 when correct and faster than p × the baseline, else 0.0 (every failure, so the ladder
    holds, flat below the top); -1.0 for an integrity violation; None for an infrastructure
    fault (the KernelBench fast_p as a reward)."""
    if not p >= 0:
        raise ValueError(f"fast_p: p is {p}: give a speedup threshold of 0 or more, e.g. 1.0")

    def reward(result: Result) -> float | None:
        kind = outcome(result)
        if kind == "integrity_violation":
            return INTEGRITY_VIOLATION
        if kind == "infrastructure_error":
            return None
        return 1.0 if kind == "correct" and reward_speedup(result) > p else 0.0

    reward.__name__ = f"fast_{p:g}"
    return reward


_REGISTRY: dict[str, RewardFn] = {
    "default": log_speedup,
    "log_speedup": log_speedup,
    "sol": speed_of_light,
    "gap_closed": gap_reward,
    "fast_p": fast_p(1.0),
}
_FAST = re.compile(r"^fast_(\d+(?:\.\d+)?)$")


def register_reward(name: str, fn: RewardFn) -> None:
    """Make `fn` available by name (to `KernelEnv(reward=...)`, `arena serve --reward`)."""
    if not callable(fn):
        raise TypeError(
            f"register_reward({name!r}): give a callable (Result) -> float | None, got {type(fn).__name__}"
        )
    if not name or not re.fullmatch(r"[A-Za-z0-9_.:-]+", name):
        raise ValueError(f"register_reward: name {name!r} must be letters, digits and _.:- only")
    _REGISTRY[name] = fn


def reward_names() -> list[str]:
    return sorted(_REGISTRY) + ["fast_<p> (e.g. fast_1.5)"]


def get_reward(spec: str | RewardFn | None = None) -> RewardFn:
    """A reward function from a registered name, `fast_<p>`, a callable (returned as is), or
    None (the default)."""
    if spec is None:
        return log_speedup
    if callable(spec):
        return spec
    if not isinstance(spec, str):
        raise TypeError(
            f"reward: give a name or a callable (Result) -> float | None, got {type(spec).__name__}"
        )
    if spec in _REGISTRY:
        return _REGISTRY[spec]
    match = _FAST.match(spec)
    if match:
        return fast_p(float(match.group(1)))
    raise UnknownReward(
        f"unknown reward `{spec}`: use one of {', '.join(reward_names())}, or pass a callable"
    )


def reward_name(spec: str | RewardFn | None) -> str:
    if spec is None:
        return "default"
    return spec if isinstance(spec, str) else getattr(spec, "__name__", type(spec).__name__)
