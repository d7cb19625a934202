"""Scoring a trainer's batch of completions: the shared core of the TRL and verl reward functions.

A completion is a model's reply (a string, or a list of chat messages whose last assistant
message is the reply). Its candidate is the last fenced Python block; a reply without one is
the outcome `no_code`, the lowest honest rung of the reward ladder (core/rl/rewards.py), never
an exception. The batch goes to the arena in one call (`Arena.aevaluate_many`, whose batches
keep a GRPO group together), on the devices the scorer was given, in the scorer's profile
(`train` by default: docs/evaluation.md, "Profiles"), and the rewards come back in the batch's
order.

Failures are rewards: a compile error, a wrong answer or a cheat gets the reward function's
value for it. An infrastructure fault is retried by the arena's scheduler on another slot; one
that persists gets `None` (TRL turns it into NaN, which its group statistics skip) and the
outcome `infrastructure_error`, so a trainer can tell it from the policy's mistakes.

Completions that belong to an episode (a row with an `episode_id`, multi-turn training) are
steps of that episode on an `arena serve` server, through `core.rl.adapters.serve_client`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.evaluation.profiles import parse_profile
from core.rl.arena import Arena, EvalRequest, ExecutorFactory
from core.rl.rewards import LADDER, RewardFn

FENCE = re.compile(r"```[ \t]*(?:python|py)[ \t]*\n(.*?)```", re.DOTALL)
NO_CODE = "no_code"  # core.rl.rewards' outcome for a reply without a candidate
NO_BLOCK = "the completion has no ```python block holding the candidate module"


def completion_text(completion: Any) -> str:
    """The reply's text: a string as it is; chat messages (TRL's conversational format) the
    content of the last assistant message."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, dict):
        content = completion.get("content") or ""
        return (
            content
            if isinstance(content, str)
            else " ".join(p.get("text", "") for p in content if isinstance(p, dict))
        )
    if isinstance(completion, (list, tuple)):
        replies = [
            m
            for m in completion
            if isinstance(m, dict) and m.get("role", "assistant") == "assistant"
        ]
        return completion_text(replies[-1]) if replies else ""
    return ""


def extract_candidate(completion: Any) -> str | None:
    """The last fenced ```python block of the reply, or None when it has none."""
    blocks = FENCE.findall(completion_text(completion))
    return blocks[-1] if blocks and blocks[-1].strip() else None


@dataclass(frozen=True)
class Item:
    """One completion to score: which task (and episode) it answers, and the reply."""

    task_id: str
    completion: Any
    seed: int | None = None
    episode_id: str | None = None


@dataclass
class Score:
    """One completion's reward and what a trainer logs beside it."""

    reward: float | None
    outcome: str  # NO_CODE, or core.rl.rewards' outcomes: correct, incorrect, compile_failed, ...
    reason: str = ""
    speedup: float | None = None
    info: dict[str, Any] = field(default_factory=dict)


class BatchScorer:
    """A long-lived scorer: one Arena (warm harnesses) kept across a trainer's steps, in an
    event loop of its own on a daemon thread, so synchronous reward functions can call it from
    anywhere (TRL and verl call them from plain functions)."""

    def __init__(
        self,
        devices: Sequence[str] = ("cpu",),
        reward: str | RewardFn | None = None,
        tasks_dir: Path | str | None = None,
        executor_factory: ExecutorFactory | None = None,
        visible_only: bool = False,
        server: Any = None,
        arena_factory: Callable[[], Arena] | None = None,
        profile: str = "train",
    ):
        self.visible_only = visible_only
        self.profile = parse_profile(profile).value
        self.server = server  # a serve_client.ArenaClient for episode steps
        self._make_arena = arena_factory or (
            lambda: Arena(list(devices), reward, tasks_dir, executor_factory)
        )
        self._arena: Arena | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def score(self, items: Sequence[Item]) -> list[Score]:
        """Every item's Score, in order; one arena call for the batch's single completions."""
        scores: list[Score | None] = [None] * len(items)
        batch: list[tuple[int, EvalRequest]] = []
        for i, item in enumerate(items):
            code = extract_candidate(item.completion)
            if item.episode_id is not None:  # a step of its episode; no code is a turn's no_code
                scores[i] = self._step(item.episode_id, code or "")
                continue
            try:
                request = EvalRequest(
                    item.task_id,
                    "" if code is None else code,  # no code: the arena's `no_code`, never a harness
                    seed=item.seed,
                    visible_only=self.visible_only,
                    profile=self.profile,
                )
            except (
                TypeError,
                ValueError,
            ) as exc:  # over the size limit: the policy's compile failure
                scores[i] = Score(LADDER["compile_failed"], "compile_failed", str(exc))
                continue
            batch.append((i, request))
        if batch:
            for (i, _), rr in zip(batch, self._run(self._arena_call([r for _, r in batch]))):
                score = scores[i] = score_of(rr)
                if rr.outcome == NO_CODE and extract_candidate(items[i].completion) is None:
                    score.reason = NO_BLOCK
        return [s for s in scores if s is not None]

    def close(self) -> None:
        with self._lock:
            if self._loop is None:
                return
            if self._arena is not None:
                asyncio.run_coroutine_threadsafe(self._arena.aclose(), self._loop).result()
            self._loop.call_soon_threadsafe(self._loop.stop)
            if self._thread is not None:
                self._thread.join(timeout=30)
            self._loop, self._thread, self._arena = None, None, None

    def __enter__(self) -> BatchScorer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- internals -------------------------------------------------------------------------

    async def _arena_call(self, requests: list[EvalRequest]) -> list[Any]:
        if self._arena is None:
            self._arena = self._make_arena()
        return await self._arena.aevaluate_many(requests)

    def submit(self, coro: Any) -> concurrent.futures.Future[Any]:
        """Run `coro` in the scorer's event loop (where its arena lives), from any thread."""
        self._run(asyncio.sleep(0))  # the loop, started
        assert self._loop is not None
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    def _run(self, coro: Any) -> Any:
        with self._lock:
            if self._loop is None:
                self._loop = asyncio.new_event_loop()
                self._thread = threading.Thread(
                    target=self._loop.run_forever, name="arena-scorer", daemon=True
                )
                self._thread.start()
            loop = self._loop
        return asyncio.run_coroutine_threadsafe(coro, loop).result()

    def _step(self, episode_id: str, code: str) -> Score:
        if self.server is None:
            return Score(
                None,
                "infrastructure_error",
                f"episode {episode_id}: multi-turn rows need a server (BatchScorer(server=ArenaClient(url)))",
            )
        try:
            step = self.server.step(episode_id, code)
        except Exception as exc:  # noqa: BLE001 - a server fault is infrastructure, never a crash of the training step
            return Score(None, "infrastructure_error", f"episode {episode_id}: {exc}")
        info = dict(step.info)
        return Score(
            step.reward,
            str(info.get("outcome", "step")),
            str(info.get("reason", "")),
            info.get("speedup"),
            {"done": step.done, **info},
        )


def score_of(rr: Any) -> Score:
    """A RewardedResult as a trainer logs it: reward, outcome, the failing stage's message."""
    result = rr.result
    failed = result.failed_stage
    reason = ""
    if rr.integrity_flags:
        reason = "integrity: " + ", ".join(rr.integrity_flags)
    elif failed:
        stage = result.stage(failed)
        reason = f"{failed}: {stage.message or stage.status}"
    return Score(
        rr.reward,
        rr.outcome,
        reason,
        rr.speedup if rr.outcome == "correct" else None,
        {
            "stages": rr.stages,
            "sol_fraction": rr.sol_fraction,
            "gap_closed": rr.gap_closed,
            "profile": result.profile,
            "review_notes": rr.review_notes,
            "retry": rr.retry,
        },
    )
