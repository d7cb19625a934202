"""verl adapter: the arena as verl's custom reward function, in verl 0.9's reward loop.

    python3 -m verl.trainer.main_ppo ... \
      reward.custom_reward_function.path=pkg://core.rl.adapters.verl \
      reward.custom_reward_function.name=compute_score

verl 0.9 scores through its reward loop (verl/experimental/reward_loop): `reward.num_workers`
worker processes (8 by default), each with a reward manager (`naive` by default; `dapo` and
`limited` call the same way) that calls the function once per sample, with keywords
(`data_source, solution_str, ground_truth, extra_info`), as soon as the sample is generated.
`compute_score` is a coroutine, which those managers await in their worker's event loop.

**One arena per GPU host, a GRPO group one batch.** Several workers must never each start an
arena on the same GPUs (their timings would disturb each other). So:

- ARENA_SERVER=http://host:8765 (with ARENA_SERVE_TOKEN where the server needs one): every
  worker sends its samples to that `arena serve`, one per GPU host, which owns the GPUs.
  With ARENA_GROUP_SIZE=n (set it to `actor_rollout_ref.rollout.n`) each sample names its
  group (the task and the dataset row's `extra_info.index`) and the server holds the group's
  members, from whichever workers they come, until all n arrived (or ARENA_GROUP_WAIT_S after
  the first; 60 by default), then evaluates them as one batch (core/rl/groups.py).
- Without ARENA_SERVER the worker process evaluates in an arena of its own on ARENA_DEVICES
  (default `cpu`), gathering groups the same way among its own samples. A GPU device of that
  arena is locked for the process (a file lock per device): a second worker process reaching
  for it gets an error that says to run `arena serve` or set `reward.num_workers=1`.

Each score is a dict `{"score", "outcome", "reason", "speedup", "gap_closed", "profile",
"retry"}`: verl logs every key beside the reward. verl's reward tensor has no "no reward", so a
persistent infrastructure fault scores 0.0 with `retry: True`. Profile: ARENA_PROFILE (`train`
by default); reward function: ARENA_REWARD (`default`); tasks: ARENA_TASKS (a tasks folder).

PrimeRewardManager (verl's older `verl/workers/reward_manager/prime.py`; not in 0.9's reward
loop, where verl itself answers `Unknown reward manager: prime`) runs the function in a pool of
64 processes, each of which would start its own arena on the same GPUs: its positional call is
refused with an error that says so. Nothing of verl is imported here.
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
import os
import tempfile
import threading
from pathlib import Path
from typing import Any

from core.rl.adapters.completions import (
    NO_BLOCK,
    NO_CODE,
    BatchScorer,
    extract_candidate,
    score_of,
)
from core.rl.adapters.serve_client import ArenaClient, EvaluateResult
from core.rl.groups import GroupGather
from core.rl.requests import EvalRequest, RewardedResult

log = logging.getLogger(__name__)
DEFAULT_GROUP_WAIT_S = 60.0
PRIME_REFUSED = (
    "core.rl.adapters.verl.compute_score was called positionally, as verl's PrimeRewardManager "
    "does: it runs the reward function in a pool of 64 processes, each of which would start its "
    "own arena timing the same GPUs. Use verl's reward loop with the naive manager (the default: "
    "reward.reward_manager.name=naive) and reward.custom_reward_function.* (docs/rl-verl.md)"
)

_lock = threading.Lock()
_local: _LocalArena | None = None
_client: ArenaClient | None = None


def _env_float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    try:
        return float(raw) if raw else default
    except ValueError:
        raise ValueError(f"{name}={raw!r}: give a number of seconds") from None


def group_size() -> int | None:
    """ARENA_GROUP_SIZE: the GRPO group's size (actor_rollout_ref.rollout.n); None: no groups."""
    raw = os.environ.get("ARENA_GROUP_SIZE")
    if not raw:
        return None
    try:
        size = int(raw)
    except ValueError:
        raise ValueError(
            f"ARENA_GROUP_SIZE={raw!r}: give actor_rollout_ref.rollout.n, e.g. 8"
        ) from None
    if size < 1:
        raise ValueError(f"ARENA_GROUP_SIZE={raw!r}: give actor_rollout_ref.rollout.n, e.g. 8")
    return size


class DeviceBusy(RuntimeError):
    """Another process already evaluates on a GPU this process's arena would time."""


class _LocalArena:
    """The process's own arena (a BatchScorer's, in its event loop thread) with a GroupGather
    in that loop and a file lock per GPU device it times."""

    def __init__(self, devices: list[str], reward: str | None, tasks: str | None, profile: str):
        self.locks = [_lock_device(d) for d in devices if _is_gpu(d)]
        self.scorer = BatchScorer(devices, reward, tasks, profile=profile)
        self.profile = self.scorer.profile
        self.gather: GroupGather | None = None

    async def submit(
        self, group: str | None, size: int | None, request: EvalRequest
    ) -> RewardedResult:
        async def inside() -> RewardedResult:
            if self.gather is None:
                self.gather = GroupGather(
                    self._evaluate_many, _env_float("ARENA_GROUP_WAIT_S", DEFAULT_GROUP_WAIT_S)
                )
            return await self.gather.submit(group, size, request)

        return await asyncio.wrap_future(self.scorer.submit(inside()))

    async def _evaluate_many(self, requests: Any) -> list[RewardedResult]:
        return await self.scorer._arena_call(list(requests))

    def close(self) -> None:
        self.scorer.close()
        for f in self.locks:
            f.close()


def _is_gpu(device: str) -> bool:
    kind = device.rsplit("/", 1)[-1]
    return "/" not in device and kind.split(":")[0] in ("cuda", "xpu")


def _lock_device(device: str) -> Any:
    """An exclusive lock on this host's `device` for the life of the process, or DeviceBusy."""
    folder = Path(os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir())
    path = folder / f"kernel-arena-{device.replace(':', '')}.lock"
    f = path.open("a")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        f.close()
        raise DeviceBusy(
            f"another process already evaluates on {device} ({path}): verl starts reward.num_workers "
            "reward processes, and each would time the same GPU. Run one `arena serve --device ...` per "
            "GPU host and set ARENA_SERVER=http://host:8765, or set reward.num_workers=1 (docs/rl-verl.md)"
        ) from None
    return f


def local_arena() -> _LocalArena:
    """The process's arena, made on first use from ARENA_DEVICES / ARENA_REWARD / ARENA_TASKS /
    ARENA_PROFILE."""
    global _local
    with _lock:
        if _local is None:
            devices = [
                d.strip() for d in os.environ.get("ARENA_DEVICES", "cpu").split(",") if d.strip()
            ]
            _local = _LocalArena(
                devices,
                os.environ.get("ARENA_REWARD") or None,
                os.environ.get("ARENA_TASKS") or None,
                os.environ.get("ARENA_PROFILE") or "train",
            )
        return _local


def server() -> ArenaClient | None:
    """The shared `arena serve` of ARENA_SERVER, or None."""
    global _client
    url = os.environ.get("ARENA_SERVER")
    if not url:
        return None
    with _lock:
        if _client is None or _client.url != url.rstrip("/"):
            _client = ArenaClient(
                url,
                token=os.environ.get("ARENA_SERVE_TOKEN") or None,
                timeout_s=_env_float("ARENA_SERVER_TIMEOUT_S", 1800.0),
                profile=os.environ.get("ARENA_PROFILE") or "train",
            )
        return _client


def reset() -> None:
    """Forget the process's arena and client (tests; a trainer that changes ARENA_* between runs)."""
    global _local, _client
    with _lock:
        if _local is not None:
            _local.close()
        _local, _client = None, None


async def compute_score(
    *positional: Any,
    data_source: Any = None,
    solution_str: str | None = None,
    ground_truth: Any = None,
    extra_info: dict[str, Any] | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """One sample's score dict, as verl's reward-loop managers await it."""
    if positional:
        raise TypeError(PRIME_REFUSED)
    extra = dict(extra_info or {})
    task_id = extra.get("task_id") or ground_truth
    if not task_id:
        raise ValueError(
            "the sample names no task: export the dataset with `arena dataset export --format verl` "
            "(reward_model.ground_truth holds the task id)"
        )
    code = extract_candidate(solution_str or "")
    seed = extra.get("seed")
    size = group_size()
    index = extra.get("index")
    group = f"{task_id}#{index}" if size and size > 1 and index is not None else None
    client = server()
    if client is not None:
        answer = await asyncio.to_thread(
            client.evaluate,
            str(task_id),
            code or "",
            seed=None if seed is None else int(seed),
            group=group,
            group_size=size if group else None,
        )
        return _from_answer(answer, code is None)
    arena = local_arena()
    request = EvalRequest(
        str(task_id), code or "", seed=None if seed is None else int(seed), profile=arena.profile
    )
    return _from_rewarded(await arena.submit(group, size if group else None, request), code is None)


def _from_rewarded(rr: RewardedResult, no_block: bool) -> dict[str, Any]:
    score = score_of(rr)  # the same reason and speedup TRL logs
    reason = NO_BLOCK if no_block and rr.outcome == NO_CODE else score.reason
    return _score(rr.reward, rr.outcome, reason, score.speedup, rr.gap_closed, rr.profile)


def _from_answer(answer: EvaluateResult, no_block: bool) -> dict[str, Any]:
    result = answer.result
    failed = result.get("failed_stage")
    reason = ""
    if result.get("integrity_flags"):
        reason = "integrity: " + ", ".join(result["integrity_flags"])
    elif failed:
        stage: dict[str, Any] = next(
            (s for s in result.get("stages", []) if s.get("name") == failed), {}
        )
        reason = f"{failed}: {stage.get('message') or stage.get('status')}"
    return _score(
        answer.reward,
        answer.outcome,
        NO_BLOCK if no_block and answer.outcome == NO_CODE else reason,
        result.get("speedup") if answer.outcome == "correct" else None,
        answer.gap_closed,
        answer.profile,
    )


def _score(
    reward: float | None,
    outcome: str,
    reason: str,
    speedup: float | None,
    gap: float | None,
    profile: str | None,
) -> dict[str, Any]:
    retry = reward is None
    return {
        "score": 0.0 if retry else float(reward),  # type: ignore[arg-type]
        "outcome": outcome,
        "reason": reason,
        "speedup": speedup if speedup is not None else 0.0,
        "gap_closed": gap,
        "profile": profile,
        "retry": retry,
    }
