"""A multi-turn kernel-optimization environment: reset to a task, step with a candidate's
source, get feedback an agent can act on and a reward.

    env = KernelEnv("elementwise/rope", device="cpu", max_turns=4)
    obs = env.reset(seed=0)
    obs, reward, done, info = env.step(source)            # a turn: visible workloads only
    obs, reward, done, info = env.step(None, final=True)  # end now: the best candidate, hidden workloads too

Each turn evaluates the candidate on the visible workloads only (hidden workloads are left out
of the job itself, so nothing about them can reach the policy) and rewards it with the
environment's reward function (core/rl/rewards.py). The episode ends at `max_turns` or when the
policy says `final`; then the best candidate so far (the highest turn reward, the earliest on
a tie) is evaluated once on every workload, hidden ones included, and that evaluation's reward
is the last step's reward. The final observation says only whether the hidden workloads passed
and how many there were, never which.

An infrastructure fault (reward None) uses no turn: submit the same source again (for the final
evaluation: `step(None, final=True)` again). The synchronous methods run on a private event
loop kept for the environment's life, so the harness stays warm between steps; from async code
use `areset`/`astep`/`aclose` (an environment given a shared `Arena` must use those).
"""

from __future__ import annotations

import asyncio
import random
import secrets
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from core.evaluation.job import Timing
from core.evaluation.profiles import parse_profile
from core.model.task import Task
from core.rl.arena import Arena, ExecutorFactory, RewardedResult, check_source
from core.rl.feedback import (
    extract_code,
    final_summary,
    is_cpu_device,
    signature,
    task_prompt,
    turn_feedback,
    visible_workloads,
)
from core.rl.rewards import RewardFn, get_reward, reward_name


class EpisodeError(ValueError):
    """A step that cannot be taken now (no episode, the episode is over, nothing to finish)."""


@dataclass(frozen=True)
class Observation:
    """What the policy sees. `last` is the latest turn's structured feedback, `feedback` the
    same as text; `final` is set once the episode is over."""

    task_id: str
    prompt: str
    starter: str
    signature: str
    visible_workloads: list[dict[str, Any]]
    device: str
    turn: int
    max_turns: int
    feedback: str = ""
    last: dict[str, Any] | None = None
    best_turn: int | None = None
    best_reward: float | None = None
    done: bool = False
    final: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def text(self) -> str:
        """One string for text-only policies: the prompt and starter at reset, the feedback
        after."""
        if self.turn == 0 and not self.feedback:
            return f"{self.prompt}\n\nStarter:\n```python\n{self.starter}```\n"
        return self.feedback


# --- the task as a policy sees it ---------------------------------------------------------------


@dataclass
class _Turn:
    source: str
    rewarded: RewardedResult


@dataclass
class _Episode:
    task: Task
    seed: int
    rng: random.Random
    turns: list[_Turn] = field(default_factory=list)
    best: int | None = None  # index into turns
    done: bool = False
    final: RewardedResult | None = None


class KernelEnv:
    """One episode at a time on one task (or any task, chosen at reset)."""

    def __init__(
        self,
        task_id: str | None = None,
        device: str = "cpu",
        max_turns: int = 4,
        reward: str | RewardFn | None = None,
        tasks_dir: Path | str | None = None,
        arena: Arena | None = None,
        executor_factory: ExecutorFactory | None = None,
        timing: Timing | None = None,
        profile: str = "train",
    ):
        if not isinstance(max_turns, int) or isinstance(max_turns, bool) or max_turns < 1:
            raise ValueError(f"max_turns: give a positive integer, got {max_turns!r}")
        if arena is not None and device not in arena.devices:
            raise ValueError(
                f"device `{device}` is not one of the arena's devices ({', '.join(arena.devices)})"
            )
        self.task_id, self.device, self.max_turns = task_id, device, max_turns
        self.reward_spec = reward
        self.profile = parse_profile(profile).value  # `train` by default: a trainer's episodes
        self.reward_fn, self.reward_label = get_reward(reward), reward_name(reward)
        self.tasks_dir, self.executor_factory, self.timing = tasks_dir, executor_factory, timing
        self.arena, self._own_arena = arena, arena is None
        self.episode: _Episode | None = None
        self._runner: asyncio.Runner | None = None

    # --- synchronous surface ---

    def reset(self, task_id: str | None = None, seed: int | None = None) -> Observation:
        return self._sync(self.areset(task_id, seed))

    def step(
        self, source: str | None, final: bool = False
    ) -> tuple[Observation, float | None, bool, dict[str, Any]]:
        return self._sync(self.astep(source, final))

    def close(self) -> None:
        if self._runner is not None:
            self._runner.run(self.aclose())
            self._runner.close()
            self._runner = None

    def __enter__(self) -> KernelEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _sync(self, coro: Any) -> Any:
        if self.arena is not None and not self._own_arena:
            coro.close()
            raise RuntimeError(
                "this environment shares an Arena: call areset/astep from the arena's event loop"
            )
        if self._runner is None:
            self._runner = asyncio.Runner()
        return self._runner.run(coro)

    # --- async surface ---

    async def aclose(self) -> None:
        if self._own_arena and self.arena is not None:
            await self.arena.aclose()
            self.arena = None

    def _arena(self) -> Arena:
        if self.arena is None:
            self.arena = Arena(
                [self.device],
                self.reward_spec,
                self.tasks_dir,
                self.executor_factory,
                timing=self.timing,
            )
        return self.arena

    async def areset(self, task_id: str | None = None, seed: int | None = None) -> Observation:
        """Start an episode. `seed` makes its evaluations reproducible (hidden draws included);
        leave it None in training."""
        task_id = task_id or self.task_id
        if not task_id:
            raise EpisodeError(
                "task_id: name a task at reset or in KernelEnv(task_id=...), e.g. elementwise/rope"
            )
        if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool) or seed < 0):
            raise ValueError(f"seed: give a non-negative integer or None, got {seed!r}")
        task = self._arena().task(task_id)
        seed = seed if seed is not None else secrets.randbits(63)
        self.episode = _Episode(task, seed, random.Random(seed))
        return self.observation()

    async def astep(
        self, source: str | None, final: bool = False
    ) -> tuple[Observation, float | None, bool, dict[str, Any]]:
        """A turn (when `source` is given), then the end of the episode if `final` or the turn
        limit says so. Returns (observation, reward, done, info); reward is the turn's, or on
        the last step the final evaluation's."""
        ep = self.episode
        if ep is None:
            raise EpisodeError("no episode: call reset() first")
        if ep.done:
            raise EpisodeError("the episode is over: call reset() to start another")
        if source is None and not final:
            raise EpisodeError(
                "action: give the candidate's source (code), or final=True to end the episode"
            )
        if source is None and ep.best is None:
            raise EpisodeError(
                "final: no candidate has been scored yet: submit one before ending the episode"
            )
        info: dict[str, Any] = {"turn_reward": None, "final_reward": None, "retry": False}
        reward: float | None = None
        if source is not None:
            if len(ep.turns) >= self.max_turns:
                raise EpisodeError(
                    f"all {self.max_turns} turns are used: call step(None, final=True) to finish the episode"
                )
            check_source(source)
            rr = await self._arena().aevaluate(
                ep.task.id,
                source,
                seed=ep.rng.getrandbits(62),
                device=self.device,
                visible_only=True,
                reward=self.reward_spec,
                profile=self.profile,
            )
            if rr.reward is None:
                info.update(
                    retry=True, last=turn_feedback(rr, len(ep.turns) + 1, self.max_turns)[0]
                )
                return self.observation(rr, len(ep.turns) + 1), None, False, self._info(info)
            ep.turns.append(_Turn(source, rr))
            if ep.best is None or rr.reward > ep.turns[ep.best].rewarded.reward:  # type: ignore[operator]
                ep.best = len(ep.turns) - 1
            reward = info["turn_reward"] = rr.reward
        if final or len(ep.turns) >= self.max_turns:
            done_reward = await self._finish(ep)
            if done_reward is None:  # the final evaluation hit an infrastructure fault
                info.update(retry=True)
                return self.observation(), None, False, self._info(info)
            reward = info["final_reward"] = done_reward
        return self.observation(), reward, ep.done, self._info(info)

    async def _finish(self, ep: _Episode) -> float | None:
        """Score the best candidate on every workload; a candidate that already failed the
        visible ones would fail there too, so its turn result stands without another run."""
        assert ep.best is not None
        best = ep.turns[ep.best]
        if best.rewarded.outcome == "correct":
            rr = await self._arena().aevaluate(
                ep.task.id,
                best.source,
                seed=ep.rng.getrandbits(62),
                device=self.device,
                reward=self.reward_spec,
                profile=self.profile,
            )
            if rr.reward is None:
                return None
        else:
            rr = best.rewarded
        ep.final, ep.done = rr, True
        return rr.reward

    # --- views ---

    def observation(
        self, pending: RewardedResult | None = None, pending_turn: int | None = None
    ) -> Observation:
        ep = self.episode
        if ep is None:
            raise EpisodeError("no episode: call reset() first")
        last, text = None, ""
        if pending is not None:
            last, text = turn_feedback(pending, pending_turn or 0, self.max_turns)
        elif ep.turns:
            last, text = turn_feedback(ep.turns[-1].rewarded, len(ep.turns), self.max_turns)
        best_turn = ep.best + 1 if ep.best is not None else None
        best_reward = ep.turns[ep.best].rewarded.reward if ep.best is not None else None
        final = None
        if best_turn is not None:
            text += f"\nBest so far: turn {best_turn} (reward {best_reward:.4f})."
        if ep.done and ep.final is not None and best_turn is not None:
            final = final_summary(ep.final, best_turn)
            hidden = final["hidden"]
            text += (
                f"\nEpisode over. The best candidate (turn {best_turn}) on every workload: {final['outcome'].replace('_', ' ')}, "
                f"reward {final['reward']:.4f}; hidden workloads {hidden['status']} ({hidden['passed']} of {hidden['total']} passed)."
            )
        elif len(ep.turns) >= self.max_turns and not ep.done:
            text += "\nThe final evaluation did not complete (infrastructure fault): call step(None, final=True) to retry it."
        return Observation(
            task_id=ep.task.id,
            prompt=task_prompt(ep.task, self.device, self.max_turns),
            starter=ep.task.file("starter.py").read_text(),
            signature=signature(ep.task),
            visible_workloads=visible_workloads(ep.task, self.device),
            device=self.device,
            turn=len(ep.turns),
            max_turns=self.max_turns,
            feedback=text.strip(),
            last=last,
            best_turn=best_turn,
            best_reward=best_reward,
            done=ep.done,
            final=final,
        )

    def _info(self, extra: dict[str, Any]) -> dict[str, Any]:
        ep = self.episode
        assert ep is not None
        return {
            "task_id": ep.task.id,
            "turn": len(ep.turns),
            "max_turns": self.max_turns,
            "reward_name": self.reward_label,
            "profile": self.profile,
            "turn_rewards": [t.rewarded.reward for t in ep.turns],
            "best_turn": ep.best + 1 if ep.best is not None else None,
            **extra,
            **(
                {"final": final_summary(ep.final, ep.best + 1)}
                if ep.done and ep.final is not None and ep.best is not None
                else {}
            ),
        }

    @property
    def final_result(self) -> RewardedResult | None:
        """The final evaluation, hidden workloads and all: for the trainer, not the policy."""
        return self.episode.final if self.episode else None

    def state(self) -> dict[str, Any]:
        """The episode's bookkeeping (OpenEnv's `state`): no hidden workload in it."""
        ep = self.episode
        if ep is None:
            return {
                "task_id": self.task_id,
                "step_count": 0,
                "done": False,
                "max_turns": self.max_turns,
            }
        return {
            "task_id": ep.task.id,
            "step_count": len(ep.turns),
            "max_turns": self.max_turns,
            "done": ep.done,
            "turn_rewards": [t.rewarded.reward for t in ep.turns],
            "best_turn": ep.best + 1 if ep.best is not None else None,
            "final_reward": ep.final.reward if ep.final else None,
            "device": self.device,
            "reward_name": self.reward_label,
            "profile": self.profile,
        }


__all__ = [
    "EpisodeError",
    "KernelEnv",
    "Observation",
    "extract_code",
    "final_summary",
    "is_cpu_device",
    "signature",
    "task_prompt",
    "turn_feedback",
    "visible_workloads",
]
