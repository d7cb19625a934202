"""TRL adapter: the arena as a reward function for `GRPOTrainer(reward_funcs=...)`.

    from core.rl.adapters.trl import kernel_reward
    reward = kernel_reward(devices=["cuda:0", "cuda:1"])
    trainer = GRPOTrainer(model=..., reward_funcs=[reward], train_dataset=load_dataset("json", data_files="trl.jsonl")["train"])

TRL calls a reward function once per batch as
`reward(prompts=..., completions=..., completion_ids=..., **columns, trainer_state=..., log_extra=..., log_metric=...)`
where `columns` are the dataset's other columns, one list entry per completion. The dataset
(`arena dataset export --format trl`) has a `task_id` column (and may have `seed` and
`episode_id`); the whole batch is scored in one arena call (core/rl/adapters/completions.py), and
one float per completion comes back in TRL's order: `None` for a persistent infrastructure fault,
which TRL turns into NaN and leaves out of the group's statistics. Each completion's outcome and
reason go to TRL's completions table through `log_extra` (where the TRL version offers it), and
the batch's share of correct candidates to `log_metric`.

Nothing of TRL is imported here: the function only has to match TRL's call.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from core.rl.adapters.completions import BatchScorer, Item
from core.rl.arena import ExecutorFactory
from core.rl.rewards import RewardFn


class KernelReward:
    """A callable TRL reward function over one long-lived BatchScorer. `task_column` names the
    dataset column holding the task id."""

    __name__ = "kernel_arena"  # TRL names the reward's log columns after it

    def __init__(self, scorer: BatchScorer, task_column: str = "task_id"):
        self.scorer, self.task_column = scorer, task_column

    def __call__(
        self, prompts: Sequence[Any] | None = None, completions: Sequence[Any] = (), **kwargs: Any
    ) -> list[float | None]:
        n = len(completions)
        tasks = kwargs.get(self.task_column)
        if tasks is None or len(tasks) != n:
            raise ValueError(
                f"the dataset has no `{self.task_column}` column with one entry per completion: export it with "
                "`arena dataset export --format trl` or name the column with kernel_reward(task_column=...)"
            )
        seeds = kwargs.get("seed") or [None] * n
        episodes = kwargs.get("episode_id") or [None] * n
        items = [
            Item(str(t), c, _int_or_none(s), e)
            for t, c, s, e in zip(tasks, completions, seeds, episodes)
        ]
        scores = self.scorer.score(items)
        log_extra, log_metric = kwargs.get("log_extra"), kwargs.get("log_metric")
        if callable(log_extra):
            log_extra("arena_outcome", [s.outcome for s in scores])
            log_extra("arena_reason", [s.reason for s in scores])
        if callable(log_metric) and scores:
            log_metric("arena/correct", sum(s.outcome == "correct" for s in scores) / len(scores))
            log_metric(
                "arena/infrastructure_errors",
                float(sum(s.outcome == "infrastructure_error" for s in scores)),
            )
        return [s.reward for s in scores]

    def close(self) -> None:
        self.scorer.close()


def kernel_reward(
    devices: Sequence[str] = ("cpu",),
    reward: str | RewardFn | None = None,
    tasks_dir: Path | str | None = None,
    executor_factory: ExecutorFactory | None = None,
    task_column: str = "task_id",
    visible_only: bool = False,
    server: Any = None,
    profile: str = "train",
) -> KernelReward:
    """A TRL reward function scoring completions on `devices` with the named reward
    (core/rl/rewards.py) in `profile` (`train`, the cheap one, by default; `full` times every
    workload: docs/evaluation.md, "Profiles")."""
    return KernelReward(
        BatchScorer(
            devices, reward, tasks_dir, executor_factory, visible_only, server, profile=profile
        ),
        task_column,
    )


def _int_or_none(value: Any) -> int | None:
    return None if value is None else int(value)
