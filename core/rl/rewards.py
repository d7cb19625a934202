"""Rewards: a Result turned into one number for a trainer.

A reward function is any callable `(Result) -> float | None`. Built-ins are registered by
name (`get_reward("default")`, `get_reward("fast_1.5")`); `register_reward` adds more.

The default (`default`, alias `log_speedup`), by outcome (`outcome(result)`):

| outcome               | reward                                                          |
| --------------------- | --------------------------------------------------------------- |
| integrity_violation   | -1.0 (a proven cheat: the lowest of all, whatever else it did)  |
| compile_failed        | -0.5                                                            |
| incorrect             | -0.25 (visible or hidden workloads wrong, a crash, a timeout)   |
| infrastructure_error  | None: not the candidate's fault; the trainer should retry it    |
| correct               | 0.05 + 0.95 × (clip(log2 speedup, -3, 3) + 3) / 6, in (0, 1]    |

So a correct candidate at the baseline's speed gets 0.525, 8× faster or more gets 1.0 (the
cap: beyond it a gain is more likely a measurement or a cheat than a kernel), and 8× slower or
worse gets 0.05, still above every failure. The lower end is -3, not -1, so that a slow but
improving kernel (the usual start, and every Triton kernel on the CPU interpreter) still moves
its reward.

Every built-in gives an integrity violation its lowest value, and none reads `review_notes`:
heuristic hits change no score (docs/architecture.md). On the `cpu` timing kind the
speed terms read CPU times, which the arena shows but never ranks: fine for plumbing and
tests, not for training.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable

from core.model.result import Result

RewardFn = Callable[[Result], "float | None"]

INTEGRITY_VIOLATION = -1.0
COMPILE_FAILED = -0.5
INCORRECT = -0.25
CORRECT_FLOOR = 0.05  # the least a correct candidate gets: above every failure
LOG2_SPEEDUP_RANGE = (-3.0, 3.0)  # 1/8× .. 8×

OUTCOMES = ("integrity_violation", "infrastructure_error", "compile_failed", "incorrect", "correct")


class UnknownReward(LookupError):
    """A reward name that is not registered."""


def outcome(result: Result) -> str:
    """What happened to the candidate, in the order that decides its reward: a proven
    violation beats everything (even an infrastructure fault after it), then faults that are
    not the candidate's, then the first gate it failed."""
    if result.integrity_flags:
        return "integrity_violation"
    if result.status == "infrastructure_error":
        return "infrastructure_error"
    if result.status == "passed":
        return "correct"
    compile_stage = next((s for s in result.stages if s.name == "compile"), None)
    if compile_stage is None or compile_stage.status != "passed":
        return "compile_failed"
    return "incorrect"


def _failure(result: Result) -> float | str | None:
    """The default's value for every outcome but `correct` (which returns the string)."""
    kind = outcome(result)
    return {
        "integrity_violation": INTEGRITY_VIOLATION,
        "infrastructure_error": None,
        "compile_failed": COMPILE_FAILED,
        "incorrect": INCORRECT,
        "correct": "correct",
    }[kind]


def _scaled(fraction: float) -> float:
    """A correct candidate's share in [0, 1] mapped into [CORRECT_FLOOR, 1]."""
    return CORRECT_FLOOR + (1.0 - CORRECT_FLOOR) * min(1.0, max(0.0, fraction))


def log_speedup(result: Result) -> float | None:
    """The default (see the module docstring)."""
    value = _failure(result)
    if value != "correct":
        return value  # type: ignore[return-value]
    low, high = LOG2_SPEEDUP_RANGE
    if result.speedup <= 0:  # correct but untimed (performance skipped): the floor
        return CORRECT_FLOOR
    return _scaled((min(high, max(low, math.log2(result.speedup))) - low) / (high - low))


def fast_p(p: float) -> RewardFn:
    """1.0 when correct and faster than p × the baseline, else 0.0; -1.0 for an integrity
    violation; None for an infrastructure fault (the KernelBench fast_p as a reward)."""
    if not p >= 0:
        raise ValueError(f"fast_p: p is {p}: give a speedup threshold of 0 or more, e.g. 1.0")

    def reward(result: Result) -> float | None:
        kind = outcome(result)
        if kind == "integrity_violation":
            return INTEGRITY_VIOLATION
        if kind == "infrastructure_error":
            return None
        return 1.0 if kind == "correct" and result.speedup > p else 0.0

    reward.__name__ = f"fast_{p:g}"
    return reward


def speed_of_light(result: Result) -> float | None:
    """Like the default for failures; a correct candidate gets its fraction of the device's
    speed of light scaled into [0.05, 1]. Where there is no fraction (the CPU device, a GPU
    missing from the peaks table) a correct candidate gets the floor: use the default there."""
    value = _failure(result)
    if value != "correct":
        return value  # type: ignore[return-value]
    return _scaled(result.sol_fraction) if result.sol_fraction is not None else CORRECT_FLOOR


_REGISTRY: dict[str, RewardFn] = {
    "default": log_speedup,
    "log_speedup": log_speedup,
    "sol": speed_of_light,
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
