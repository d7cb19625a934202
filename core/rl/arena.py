"""The reward API for trainers: a candidate's source text in, a scored Result and a reward out.

    from core.rl import evaluate, evaluate_many, EvalRequest     # core.rl: the import that stays put
    r = evaluate("elementwise/rope", source, device="cpu", profile="train")   # one, on a fresh harness
    rs = evaluate_many([EvalRequest(t, s) for t, s in batch], devices=["cuda:0", "cuda:1"])

For many calls keep an `Arena` open: one scheduler (core/orchestration/scheduler.py) over every device it is
given, one warm evaluator per slot, so concurrency is bounded by the devices' slots and an
infrastructure fault is retried on another slot. `<host>/<device>` ids run through the
executor factory the caller passes (core never imports remotes/; the composition root of
the command line makes local, remote and Ray executors: docs/rl.md shows it).

The source is written to a private temporary folder (mode 700) for the evaluation and removed
after it. A source that cannot be a candidate (no `run`, NUL bytes) is the policy's mistake and
is scored as a compile failure, not raised.

`RewardedResult.result` is the full Result, hidden workloads included: it is for the trainer.
What may reach a policy (the HTTP server, the environment's observations) goes through
`public_result`, which names no hidden workload.

The one-call helpers are here; `Arena` lives in core.rl.session, the requests and results in
core.rl.requests, `public_result` in core.rl.public; `core.rl` re-exports them all (the public
surface, pinned by tests/test_rl_public.py).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from core.evaluation.job import Timing
from core.orchestration.pool import ExecutorFactory
from core.rl.public import public_result
from core.rl.requests import EvalRequest, RewardedResult, check_source
from core.rl.rewards import RewardFn
from core.rl.session import Arena

P = ParamSpec("P")
R = TypeVar("R")


def synchronous(afn: Callable[P, Awaitable[R]], name: str) -> Callable[P, R]:
    """`afn` for synchronous callers, as `name`: one event loop per call (so not from inside a
    running one); the same parameters, hence the same signature in help() and to type checkers."""

    @functools.wraps(afn)
    def call(*args: P.args, **kwargs: P.kwargs) -> R:
        return asyncio.run(afn(*args, **kwargs))  # type: ignore[arg-type]

    call.__name__ = call.__qualname__ = name
    call.__doc__ = (
        f"`{afn.__name__}` for synchronous callers (not from inside a running event loop)."
    )
    return call


async def aevaluate(
    task_id: str,
    source: str,
    device: str = "cpu",
    seed: int | None = None,
    reward: str | RewardFn | None = None,
    visible_only: bool = False,
    performance: bool = True,
    tasks_dir: Path | str | None = None,
    executor_factory: ExecutorFactory | None = None,
    timing: Timing | None = None,
    profile: str = "full",
) -> RewardedResult:
    """Evaluate one candidate's source on one device (a fresh harness: for many, use Arena)."""
    async with Arena([device], reward, tasks_dir, executor_factory, timing=timing) as arena:
        return await arena.aevaluate(
            task_id,
            source,
            seed=seed,
            visible_only=visible_only,
            performance=performance,
            profile=profile,
        )


evaluate = synchronous(aevaluate, "evaluate")


async def aevaluate_many(
    requests: Iterable[EvalRequest | Mapping[str, Any] | Sequence[Any]],
    devices: Sequence[str] = ("cpu",),
    reward: str | RewardFn | None = None,
    tasks_dir: Path | str | None = None,
    executor_factory: ExecutorFactory | None = None,
    cpu_slots: int | None = None,
    timing: Timing | None = None,
    ray: str | None = None,
) -> list[RewardedResult]:
    """A batch spread over every slot of `devices`; results in the requests' order. `ray`: a
    Ray cluster's address, whose GPUs (else CPUs) the default devices become (docs/ray.md)."""
    batch = [EvalRequest.coerce(r) for r in requests]
    async with Arena(
        devices, reward, tasks_dir, executor_factory, cpu_slots=cpu_slots, timing=timing, ray=ray
    ) as arena:
        return await arena.aevaluate_many(batch)


evaluate_many = synchronous(aevaluate_many, "evaluate_many")


__all__ = [
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
]
