"""verl adapter: the arena as verl's custom reward function (`custom_reward_function.path`).

verl's reward managers call the function in one of two shapes, and `compute_score` answers both:

- per sample (`NaiveRewardManager`, `DAPORewardManager`):
  `compute_score(data_source=..., solution_str=..., ground_truth=..., extra_info=...)`
- per batch (`BatchRewardManager`, `reward_model.reward_manager=batch`, which we recommend: one
  arena call for the whole batch): `compute_score(data_sources=[...], solution_strs=[...],
  ground_truths=[...], extra_infos=[...])`

The dataset (`arena dataset export --format verl`) puts the task id in `reward_model.ground_truth`
(and in `extra_info.task_id`). Each score is a dict `{"score": reward, "outcome", "reason",
"speedup", "retry"}`: verl logs every key beside the reward. verl's reward tensor has no "no
reward" value, so a persistent infrastructure fault scores 0.0 with `retry: True`; filter on it
where your recipe allows.

Point verl at it with
`custom_reward_function.path=$(python -c 'import core.rl.adapters.verl as m; print(m.__file__)') custom_reward_function.name=compute_score`,
and configure the devices through the environment: ARENA_DEVICES (comma-separated, default
`cpu`), ARENA_REWARD (default `default`), ARENA_TASKS (a tasks folder). Nothing of verl is imported here.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from typing import Any

from core.rl.adapters.completions import BatchScorer, Item, Score

_scorer: BatchScorer | None = None
_lock = threading.Lock()


def scorer() -> BatchScorer:
    """The process's scorer, made on first use from ARENA_DEVICES / ARENA_REWARD / ARENA_TASKS."""
    global _scorer
    with _lock:
        if _scorer is None:
            devices = [
                d.strip() for d in os.environ.get("ARENA_DEVICES", "cpu").split(",") if d.strip()
            ]
            _scorer = BatchScorer(
                devices,
                os.environ.get("ARENA_REWARD") or None,
                os.environ.get("ARENA_TASKS") or None,
            )
        return _scorer


def use_scorer(s: BatchScorer | None) -> None:
    """Replace the process's scorer (tests, or a caller that builds its own)."""
    global _scorer
    with _lock:
        _scorer = s


def compute_score(
    data_source: Any = None,
    solution_str: str | None = None,
    ground_truth: Any = None,
    extra_info: dict[str, Any] | None = None,
    *,
    data_sources: Sequence[Any] | None = None,
    solution_strs: Sequence[str] | None = None,
    ground_truths: Sequence[Any] | None = None,
    extra_infos: Sequence[dict[str, Any] | None] | None = None,
    **kwargs: Any,
) -> dict[str, Any] | list[dict[str, Any]]:
    """One score dict per sample (a list for the batched call), in verl's order."""
    if solution_strs is not None:
        n = len(solution_strs)
        infos = list(extra_infos) if extra_infos is not None else [None] * n
        truths = list(ground_truths) if ground_truths is not None else [None] * n
        items = [_item(s, g, e) for s, g, e in zip(solution_strs, truths, infos)]
        return [_as_dict(s) for s in scorer().score(items)]
    return _as_dict(scorer().score([_item(solution_str or "", ground_truth, extra_info)])[0])


def _item(solution: str, ground_truth: Any, extra: dict[str, Any] | None) -> Item:
    extra = extra or {}
    task_id = extra.get("task_id") or ground_truth
    if not task_id:
        raise ValueError(
            "the sample names no task: export the dataset with `arena dataset export --format verl` (reward_model.ground_truth)"
        )
    seed = extra.get("seed")
    return Item(
        str(task_id), solution, None if seed is None else int(seed), extra.get("episode_id")
    )


def _as_dict(s: Score) -> dict[str, Any]:
    retry = s.reward is None
    return {
        "score": 0.0 if retry else float(s.reward),
        "outcome": s.outcome,
        "reason": s.reason,
        "speedup": s.speedup if s.speedup is not None else 0.0,
        "retry": retry,
    }
