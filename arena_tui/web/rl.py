"""The RL environment's endpoints: /reset, /step, /evaluate, /state, /close, /tasks, /schema,
/health (docs/rl.md), shaped like OpenEnv's HTTP environments.

Episodes are independent KernelEnv instances sharing one Arena, so every evaluation goes
through one scheduler and concurrency is bounded by the devices' slots; evaluations waiting
or running are bounded too (`max_queue`: 429 beyond). Nothing a response carries names a
hidden workload (core/rl/arena.py, `public_result`). Every evaluation is a task the service tracks,
so that a shutdown can let it finish or cancel it (`drain`) and the recorder keeps either."""

from __future__ import annotations

import asyncio
import itertools
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request
from starlette.routing import Route

from arena_tui.web.catalog import TaskCatalog, find
from arena_tui.web.errors import (
    HttpError,
    endpoint,
    json_body,
    no_unknown,
    seed_field,
    take,
)
from arena_tui.web.inflight import InflightEvaluations
from arena_tui.web.recorder import Recorder
from arena_tui.web.rl_fields import group_fields, profile_field
from arena_tui.web.schema import SCHEMA
from core import __version__
from core.rl.groups import GroupGather


@dataclass
class _Episode:
    env: Any  # core.rl.env.KernelEnv
    agent: str | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    last_used: float = field(default_factory=time.monotonic)


class RLService(InflightEvaluations):
    """The endpoints over one Arena (which the caller owns and closes)."""

    def __init__(
        self,
        arena: Any,
        *,
        max_turns: int = 4,
        max_episodes: int = 256,
        reward: str = "default",
        recorder: Recorder | None = None,
        max_queue: int = 256,
        group_wait_s: float = 60.0,
    ):
        if max_episodes < 1 or max_turns < 1 or max_queue < 1:
            raise ValueError("--max-episodes, --max-turns and --max-queue must be at least 1")
        self.arena, self.max_turns, self.max_episodes, self.reward = (
            arena,
            max_turns,
            max_episodes,
            reward,
        )
        self.recorder, self.max_queue = recorder, max_queue
        self.episodes: dict[str, _Episode] = {}
        self.draining = False
        self.started = time.time()
        self._device_cycle = itertools.cycle(arena.devices)
        # Single /evaluate calls that name a GRPO group wait for its other members (verl's
        # reward workers send one sample each) and are evaluated as one batch.
        self._gather = GroupGather(
            lambda requests: arena.aevaluate_many(list(requests)), group_wait_s
        )
        self._inflight: dict[asyncio.Task[Any], int] = {}  # evaluation task -> evaluations it holds
        self.catalog = TaskCatalog(arena.tasks_dir)

    def routes(self) -> list[Route]:
        r = [
            ("/health", "GET", self.health),
            ("/tasks", "GET", self.tasks),
            ("/schema", "GET", self.schema),
            ("/reset", "POST", self.reset),
            ("/step", "POST", self.step),
            ("/evaluate", "POST", self.evaluate),
            ("/state", ("GET", "POST"), self.state),
            ("/close", "POST", self.close),
        ]
        return [
            Route(path, endpoint(fn), methods=[m] if isinstance(m, str) else list(m))
            for path, m, fn in r
        ]

    # --- evaluations: tracked, bounded, drained at shutdown ---

    # --- endpoints ---

    async def health(self, request: Request) -> dict[str, Any]:
        return {
            "status": "draining" if self.draining else "healthy",
            "version": __version__,
            "devices": self.arena.devices,
            "slots": len(self.arena.slots),
            "episodes": len(self.episodes),
            "evaluations": self.queued,
            "uptime_s": round(time.time() - self.started, 1),
        }

    async def tasks(self, request: Request) -> dict[str, Any]:
        return await self.catalog.tasks()  # built off the loop, kept until the tasks change

    async def schema(self, request: Request) -> dict[str, Any]:
        return SCHEMA

    def _episode(self, body: dict[str, Any]) -> tuple[str, _Episode]:
        episode_id = take(
            body, "episode_id", str, "the episode_id that /reset returned", required=True
        )
        episode = self.episodes.get(episode_id)
        if episode is None:
            raise HttpError(
                404,
                f"no episode `{episode_id}`: it was closed, evicted or never existed; start one with POST /reset",
                "episode_id",
            )
        episode.last_used = time.monotonic()
        return episode_id, episode

    def _make_room(self) -> None:
        """Drop the least recently used finished episodes when full; refuse when every one is live."""
        if len(self.episodes) < self.max_episodes:
            return
        finished = sorted(
            (e.last_used, eid)
            for eid, e in self.episodes.items()
            if e.env.episode is None or e.env.episode.done
        )
        if not finished:
            raise HttpError(
                429,
                f"{len(self.episodes)} episodes are open, the most allowed (--max-episodes): finish or POST /close some",
            )
        del self.episodes[finished[0][1]]

    def _device(self, body: dict[str, Any], where: str = "") -> str | None:
        device = take(body, "device", str, f"one of {', '.join(self.arena.devices)}", where=where)
        if device is not None and device not in self.arena.devices:
            raise HttpError(
                400,
                f"`{where}device` {device} is not served here: use one of {', '.join(self.arena.devices)}, or leave it out",
                f"{where}device",
            )
        return device

    async def reset(self, request: Request) -> dict[str, Any]:
        from core.rl.env import EpisodeError, KernelEnv
        from core.tasks.fields import UnknownTaskError

        body = await json_body(request)
        no_unknown(
            body, ("task_id", "seed", "max_turns", "device", "episode_id", "agent", "profile")
        )
        task_id = take(body, "task_id", str, '"elementwise/rope" (see GET /tasks)', required=True)
        seed = seed_field(body)
        max_turns = take(body, "max_turns", int, "a positive integer such as 4")
        max_turns = self.max_turns if max_turns is None else max_turns
        if max_turns < 1:
            raise HttpError(400, f"`max_turns` is {max_turns}: give 1 or more", "max_turns")
        device = self._device(body)
        profile = profile_field(body)
        agent = take(body, "agent", str, '"my-policy" (the name the leaderboard shows)')
        episode_id = take(body, "episode_id", str, "a new, unused id (or leave it out)")
        if episode_id is not None and (
            episode_id in self.episodes or not 0 < len(episode_id) <= 255
        ):
            raise HttpError(
                409,
                f"`episode_id` {episode_id[:60]} is in use or not 1-255 characters: leave it out to get a fresh one",
                "episode_id",
            )
        if self.draining:
            raise HttpError(
                503,
                "the server is shutting down: start the episode on another server",
                headers={"Retry-After": "5"},
            )
        await find(self.arena, task_id)  # read off the loop; KernelEnv finds it cached
        self._make_room()
        env = KernelEnv(
            task_id,
            device=device or next(self._device_cycle),
            max_turns=max_turns,
            reward=self.reward,
            arena=self.arena,
            profile=profile or "full",
        )
        try:
            observation = await env.areset(seed=seed)
        except (UnknownTaskError, EpisodeError) as exc:
            raise HttpError(400, str(exc), "task_id") from None
        episode_id = episode_id or secrets.token_urlsafe(12)
        self.episodes[episode_id] = _Episode(env, agent)
        return {
            "episode_id": episode_id,
            "observation": observation.to_json(),
            "reward": None,
            "done": False,
            "info": {"task_id": task_id, "device": env.device, "profile": env.profile},
        }

    async def step(self, request: Request) -> dict[str, Any]:
        from core.rl.env import EpisodeError

        body = await json_body(request)
        no_unknown(body, ("episode_id", "action", "timeout_s", "request_id"))
        episode_id, episode = self._episode(body)
        action = take(
            body,
            "action",
            dict,
            '{"code": "<the module\'s source>"} or {"final": true}',
            required=True,
        )
        no_unknown(action, ("code", "final"), "action.")
        final = take(action, "final", bool, "true or false", where="action.") or False
        code = take(
            action,
            "code",
            str,
            "the candidate module's Python source",
            required=not final,
            where="action.",
        )
        if episode.lock.locked():
            raise HttpError(
                409,
                f"episode {episode_id} is already evaluating a step: wait for its response",
                "episode_id",
            )
        async with episode.lock:
            try:
                observation, reward, done, info = await self._tracked(
                    self._step(episode, code, final)
                )
            except EpisodeError as exc:
                raise HttpError(409, str(exc), "action") from None
            except (TypeError, ValueError) as exc:
                raise HttpError(400, str(exc), "action.code") from None
        return {
            "episode_id": episode_id,
            "observation": observation.to_json(),
            "reward": reward,
            "done": done,
            "info": info,
        }

    async def _step(self, episode: _Episode, code: str | None, final: bool) -> Any:
        """One step; an episode's final evaluation goes to the store (or, cut by a shutdown, a
        cancelled job for the candidate it was scoring)."""
        env = episode.env
        ep = env.episode
        ending = (
            ep is not None
            and not ep.done
            and (final or (code is not None and len(ep.turns) + 1 >= env.max_turns))
        )
        try:
            out = await env.astep(code, final=final)
        except asyncio.CancelledError:
            if ending and self.recorder is not None:
                best = ep.turns[ep.best].source if ep.best is not None else code  # type: ignore[union-attr]
                if best is not None:
                    job = await self.recorder.start(
                        ep.task.id, env.device, best, episode.agent, "episode"
                    )  # type: ignore[union-attr]
                    await self.recorder.cancel(job)
            raise
        if out[2] and self.recorder is not None and env.episode.final is not None:
            final_rr, ep = env.episode.final, env.episode
            job = await self.recorder.start(
                ep.task.id, env.device, ep.turns[ep.best].source, episode.agent, "episode"
            )
            await self.recorder.finish(job, final_rr.result)
        return out

    async def evaluate(self, request: Request) -> dict[str, Any]:
        """One candidate (`{task_id, code, ...}`) or several (`{candidates: [...]}`: one batch
        through the core's batch API, answers in the candidates' order)."""
        from core.rl.arena import EvalRequest

        body = await json_body(request)
        fields = ("task_id", "code", "seed", "visible_only", "device", "agent", "profile")
        group, group_size = None, None
        if "candidates" in body:
            no_unknown(body, ("candidates", "agent"))
            items = take(
                body,
                "candidates",
                list,
                '[{"task_id": "elementwise/rope", "code": "..."}, ...]',
                required=True,
            )
            if not items:
                raise HttpError(
                    400,
                    "`candidates` is empty: give one or more {task_id, code} objects",
                    "candidates",
                )
            if len(items) > self.max_queue:
                raise HttpError(
                    413,
                    f"`candidates` has {len(items)} entries, more than the {self.max_queue} allowed (--max-queue): split the batch",
                    "candidates",
                )
            default_agent = take(body, "agent", str, '"my-policy"')
        else:
            no_unknown(body, (*fields, "group", "group_size"))
            group, group_size = group_fields(body)
            items, default_agent = (
                [{k: v for k, v in body.items() if k not in ("group", "group_size")}],
                None,
            )
        requests, agents = [], []
        for i, item in enumerate(items):
            where = f"candidates[{i}]." if "candidates" in body else ""
            if not isinstance(item, dict):
                raise HttpError(
                    400,
                    f'`{where[:-1]}` is not an object: give {{"task_id": ..., "code": ...}}',
                    where[:-1],
                )
            no_unknown(item, fields, where)
            task_id = take(
                item,
                "task_id",
                str,
                '"elementwise/rope" (see GET /tasks)',
                required=True,
                where=where,
            )
            code = take(
                item,
                "code",
                str,
                "the candidate module's Python source",
                required=True,
                where=where,
            )
            visible_only = take(item, "visible_only", bool, "true or false", where=where) or False
            device = self._device(item, where)
            profile = profile_field(item, where) or "full"
            seed = seed_field(item, where)
            agents.append(take(item, "agent", str, '"my-policy"', where=where) or default_agent)
            await find(self.arena, task_id, f"{where}task_id")  # off the loop, cached
            try:
                requests.append(
                    EvalRequest(task_id, code, seed, device, visible_only, profile=profile)
                )
            except (TypeError, ValueError) as exc:
                raise HttpError(400, str(exc), f"{where}code") from None
        if "candidates" not in body:
            rr = await self._tracked(
                self._recorded(
                    requests[0],
                    lambda: self._gather.submit(group, group_size, requests[0]),
                    agents[0],
                    "evaluate",
                )
            )
            return rr.to_json(public=True)
        rrs = await self._tracked(self._batch(requests, agents), len(requests))
        return {"results": [rr.to_json(public=True) for rr in rrs]}

    async def _batch(self, requests: list[Any], agents: list[str | None]) -> list[Any]:
        """A batch through `Arena.aevaluate_many`, each full evaluation with its job in the store."""
        jobs: list[int | None] = []
        for r, agent in zip(requests, agents):
            keep = self.recorder is not None and not r.visible_only
            device = r.device or (self.arena.devices[0] if len(self.arena.devices) == 1 else "any")
            jobs.append(
                await self.recorder.start(r.task_id, device, r.source, agent, "evaluate")
                if keep
                else None
            )  # type: ignore[union-attr]
        try:
            rrs = await self.arena.aevaluate_many(requests)
        except BaseException:
            for job in jobs:
                if job is not None:
                    await asyncio.shield(self.recorder.cancel(job))  # type: ignore[union-attr]
            raise
        for job, rr in zip(jobs, rrs):
            if job is not None:
                await self.recorder.finish(job, rr.result)  # type: ignore[union-attr]
        return rrs

    async def state(self, request: Request) -> dict[str, Any]:
        body = dict(request.query_params) if request.method == "GET" else await json_body(request)
        no_unknown(body, ("episode_id",))
        episode_id, episode = self._episode(body)
        return {"episode_id": episode_id, **episode.env.state(), "busy": episode.lock.locked()}

    async def close(self, request: Request) -> dict[str, Any]:
        body = await json_body(request)
        no_unknown(body, ("episode_id",))
        episode_id, _ = self._episode(body)
        del self.episodes[episode_id]
        return {"episode_id": episode_id, "closed": True}


__all__ = ["RLService", "endpoint"]
