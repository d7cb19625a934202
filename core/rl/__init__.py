"""RL: the arena as an environment for trainers. `rewards` turns a Result into one number;
`arena` is the reward API (a candidate's source in, a scored Result and a reward out, batches
across devices); `env` is the multi-turn environment; `groups` gathers a trainer's single calls
into GRPO groups; `adapters/` are thin adapters to trainers' interfaces (Gymnasium, TRL, verl,
verifiers) and the client of `arena serve`. The top layer: nothing in `core` imports it.

This package is the public API a trainer imports from, and it stays put when modules move:

    from core.rl import evaluate, evaluate_many, EvalRequest, Arena, KernelEnv, get_reward

Its names (`__all__`, pinned by tests/test_rl_public.py) are loaded on first use, so importing
one submodule (core.rl.rewards) does not import the arena."""

from __future__ import annotations

import importlib
from typing import Any

_HOMES = {
    "core.rl.arena": (
        "Arena",
        "EvalRequest",
        "ExecutorFactory",
        "RewardedResult",
        "aevaluate",
        "aevaluate_many",
        "check_source",
        "evaluate",
        "evaluate_many",
        "public_result",
    ),
    "core.rl.env": ("EpisodeError", "KernelEnv", "Observation"),
    "core.rl.rewards": (
        "LADDER",
        "OUTCOMES",
        "RewardFn",
        "UnknownReward",
        "get_reward",
        "outcome",
        "register_reward",
        "reward_names",
    ),
    "core.rl.groups": ("GroupGather",),
}
_HOME_OF = {name: module for module, names in _HOMES.items() for name in names}

__all__ = [
    "LADDER",
    "OUTCOMES",
    "Arena",
    "EpisodeError",
    "EvalRequest",
    "ExecutorFactory",
    "GroupGather",
    "KernelEnv",
    "Observation",
    "RewardFn",
    "RewardedResult",
    "UnknownReward",
    "aevaluate",
    "aevaluate_many",
    "check_source",
    "evaluate",
    "evaluate_many",
    "get_reward",
    "outcome",
    "public_result",
    "register_reward",
    "reward_names",
]


def __getattr__(name: str) -> Any:
    module = _HOME_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'core.rl' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
