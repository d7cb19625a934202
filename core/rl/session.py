"""Arena: a trainer's long-lived evaluations over a set of devices, through one scheduler
(core/orchestration/scheduler.py) and one warm evaluator per slot (core/orchestration/pool.py),
so concurrency is bounded by the devices' slots and an infrastructure fault is retried on
another slot. Sources are written to private temporary folders (mode 700) for the evaluation;
one that cannot be a candidate is scored as a compile failure, not raised."""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import shutil
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.devices.device import DeviceError, parse_device
from core.devices.ids import timing_kind_of
from core.evaluation.evaluator import BadCandidate, Evaluator, check_candidate
from core.evaluation.executors import LocalExecutor
from core.evaluation.job import Timing
from core.model.result import Result
from core.model.scratch import owned_tempdir
from core.model.task import Task
from core.orchestration.pool import EvaluatorPool, ExecutorFactory
from core.orchestration.scheduler import (
    Job,
    JobFailed,
    Scheduler,
    Slot,
    slots_for,
)
from core.rl.requests import EvalRequest, RewardedResult
from core.rl.rewards import RewardFn, get_reward, group_rewards, has_code, reward_name
from core.rl.unevaluated import device_json, no_code, not_a_candidate, synthetic
from core.tasks.discovery import find_task


def _write_candidate(source: str, parent: Path) -> tuple[Path, Path]:
    """The source in a private folder (mode 700) under `parent`, outside every harness's folders:
    (folder, file)."""
    folder = Path(tempfile.mkdtemp(dir=parent))
    path = folder / "candidate.py"
    path.write_text(source)
    path.chmod(0o600)
    return folder, path


# --- the arena ---------------------------------------------------------------------------------


@dataclass
class _Work:
    task: Task
    path: Path
    request: EvalRequest


@dataclass
class _BatchWork:
    task: Task
    paths: list[Path]
    request: EvalRequest  # the first; every request of the batch has its batch_key


class Arena:
    """Evaluations for trainers over a set of devices, through one scheduler. Use as an async
    context manager (or call `aclose`); every method runs in the loop that first used it.

    `devices`: ids (`cpu`, `cuda:0`, `box1/cuda:0`); `reward`: a name or a callable (see
    core/rl/rewards.py); `executor_factory(device_id, folder)`: how a slot's executor is made (the
    default makes local ones; pass one for remote hosts); `timing`: a shorter timing budget
    (tests, benchmarks); `cpu_slots`: evaluations at once per CPU device; `ray`: a Ray cluster's
    address (`auto`, `ray://head:10001`, `local`) whose `ray:` devices (`ray:cpu`, `ray:cuda`,
    `ray:H100`) take one slot per GPU, and which the default devices become (docs/ray.md)."""

    def __init__(
        self,
        devices: Sequence[str] = ("cpu",),
        reward: str | RewardFn | None = None,
        tasks_dir: Path | str | None = None,
        executor_factory: ExecutorFactory | None = None,
        cpu_slots: int | None = None,
        max_retries: int = 2,
        timing: Timing | None = None,
        ray: str | None = None,
    ):
        if isinstance(devices, str):
            devices = [devices]
        devices = list(dict.fromkeys(devices))
        capacities: dict[str, int] = {}
        if ray is not None or any(
            d.startswith("ray:") for d in devices
        ):  # a Ray cluster's devices (core/orchestration/ray_executor.py)
            from core.orchestration import ray_executor

            if ray is not None and devices == [
                "cpu"
            ]:  # the default: the cluster's GPUs, else its CPUs
                devices = [ray_executor.default_device(ray)]
            capacities = ray_executor.capacities(devices, ray)
            if (
                executor_factory is None
            ):  # a caller's factory makes its own (the command line's executor_factory(hosts, ray) does)
                executor_factory = ray_executor.with_ray(None, ray)
        if not devices or not all(isinstance(d, str) and d for d in devices):
            raise ValueError(
                f"devices: give one or more device ids such as cpu or cuda:0, got {devices!r}"
            )
        for d in devices:
            if d in capacities:
                continue
            if "/" in d:
                if executor_factory is None:
                    raise DeviceError(
                        f"device `{d}` is on a remote host: pass an executor_factory that reaches it, e.g. the command line's "
                        "executor_factory(hosts_file) (docs/rl.md; core does not import remotes/)"
                    )
            else:
                parse_device(d)
        self.devices = devices
        self.reward_fn = get_reward(reward)
        self.reward_label = reward_name(reward)
        self.tasks_dir = tasks_dir
        self.factory = executor_factory or (lambda device, folder: LocalExecutor(device, folder))
        self.timing = timing
        self.slots = slots_for(devices, cpu_slots=cpu_slots, capacities=capacities)
        self.scheduler = Scheduler(self.slots, self._run, max_retries=max_retries)
        # Made on the first evaluation (a refused server leaves nothing behind), each with an
        # owner file: the next server removes them if this process is killed (core/model/scratch.py).
        self._root: Path | None = None
        self._sources: Path | None = None
        self.pool = EvaluatorPool(self.factory, lambda: self.root, timing=timing)
        self._tasks: dict[str, Task] = {}
        self._ids = itertools.count(1)
        self._closed = False

    async def __aenter__(self) -> Arena:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Cancel what is running, stop every harness, remove the temporary files."""
        if self._closed:
            return
        self._closed = True
        await self.scheduler.close()
        await self.pool.aclose()
        for folder in (self._root, self._sources):
            if folder is not None:
                shutil.rmtree(folder, ignore_errors=True)

    @property
    def root(self) -> Path:
        """The evaluators' working folders (job files, harness logs)."""
        if self._root is None:
            self._root = owned_tempdir("arena-rl-")
        return self._root

    @property
    def sources(self) -> Path:
        """The candidates' sources while they are evaluated, one private folder each."""
        if self._sources is None:
            self._sources = owned_tempdir("arena-cand-")
        return self._sources

    def task(self, task_id: str) -> Task:
        """The task by id (cached); UnknownTaskError names the close matches."""
        if task_id not in self._tasks:
            self._tasks[task_id] = find_task(task_id, self.tasks_dir)
        return self._tasks[task_id]

    async def aevaluate(
        self,
        task_id: str,
        source: str,
        seed: int | None = None,
        device: str | None = None,
        visible_only: bool = False,
        performance: bool = True,
        reward: str | RewardFn | None = None,
        profile: str = "full",
    ) -> RewardedResult:
        """One evaluation on any free slot (of `device`, if given)."""
        return await self.submit(
            EvalRequest(task_id, source, seed, device, visible_only, performance, profile), reward
        )

    async def aevaluate_many(
        self,
        requests: Iterable[EvalRequest | Mapping[str, Any] | Sequence[Any]],
        reward: str | RewardFn | None = None,
        batch: bool = True,
    ) -> list[RewardedResult]:
        """Every request at once, spread over the slots; results in the requests' order.

        Requests for the same task with the same seed, device, profile and flags (a GRPO
        group) are evaluated as batches (core/evaluation/batch.py): one per slot they may use, each
        sharing the reference outputs and the warm baseline, every candidate on the same
        workloads and seeds. `batch=False` evaluates each alone."""
        items = [EvalRequest.coerce(r) for r in requests]
        groups: dict[tuple[Any, ...], list[int]] = {}
        for i, r in enumerate(items):
            groups.setdefault(r.batch_key() if batch else (i,), []).append(i)
        results: list[RewardedResult | None] = [None] * len(items)

        async def one(i: int) -> None:
            results[i] = await self.submit(items[i], reward)

        async def chunk(indices: list[int]) -> None:
            for i, rr in zip(indices, await self.submit_batch([items[i] for i in indices], reward)):
                results[i] = rr

        work = []
        for indices in groups.values():
            if len(indices) == 1:
                work.append(one(indices[0]))
                continue
            first = items[indices[0]]
            slots = sum(1 for s in self.slots if first.device is None or s.device == first.device)
            parts = max(1, min(len(indices), slots))
            work += [chunk(indices[k::parts]) for k in range(parts)]
        await asyncio.gather(*work)
        return [r for r in results if r is not None]

    async def submit(
        self, request: EvalRequest, reward: str | RewardFn | None = None
    ) -> RewardedResult:
        if self._closed:
            raise RuntimeError("this Arena is closed: make a new one")
        self._check_device(request.device)
        task = self.task(request.task_id)
        fn, label = self._reward(reward)
        if not has_code(request.source):
            result = no_code(task, request.device or self.devices[0], request)
            return RewardedResult(result, fn(result), label, request.visible_only, task)
        folder, path = _write_candidate(request.source, self.sources)
        job = Job(
            f"rl-{next(self._ids)}",
            tuple([request.device] if request.device else self.devices),
            payload=_Work(task, path, request),
        )
        try:
            result = await self.scheduler.submit(job)
        except JobFailed as exc:
            if exc.kind != "infrastructure":
                raise
            sha = hashlib.sha256(request.source.encode(errors="replace")).hexdigest()
            device = request.device or self.devices[0]
            result = synthetic(
                task.id,
                device_json(None, device),
                timing_kind_of(device).value,
                sha,
                "infrastructure_error",
                exc.reason,
                request.profile,
            )
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        return RewardedResult(result, fn(result), label, request.visible_only, task)

    def _check_device(self, device: str | None) -> None:
        if device is not None and device not in self.devices:
            raise DeviceError(
                f"device `{device}` is not one of this arena's devices ({', '.join(self.devices)}): leave it out or add it"
            )

    def _reward(self, reward: str | RewardFn | None) -> tuple[RewardFn, str]:
        """The reward a request asks for, else the arena's own, and its name."""
        if reward is None:
            return self.reward_fn, self.reward_label
        return get_reward(reward), reward_name(reward)

    async def submit_batch(
        self, requests: Sequence[EvalRequest], reward: str | RewardFn | None = None
    ) -> list[RewardedResult]:
        """Requests of one `batch_key` as one batch on one slot; results in their order."""
        if self._closed:
            raise RuntimeError("this Arena is closed: make a new one")
        first = requests[0]
        if any(r.batch_key() != first.batch_key() for r in requests):
            raise ValueError(
                "a batch's requests must share task_id, seed, device, visible_only, performance and profile"
            )
        self._check_device(first.device)
        task = self.task(first.task_id)
        fn, label = self._reward(reward)
        coded = [r for r in requests if has_code(r.source)]
        if len(coded) < len(requests):  # abstentions never reach the batch
            done = iter(await self.submit_batch(coded, reward) if coded else [])
            out = []
            for r in requests:
                if has_code(r.source):
                    out.append(next(done))
                    continue
                result = no_code(task, r.device or self.devices[0], r)
                out.append(RewardedResult(result, fn(result), label, r.visible_only, task))
            return out
        folders, paths = (
            list(x) for x in zip(*(_write_candidate(r.source, self.sources) for r in requests))
        )
        job = Job(
            f"rl-{next(self._ids)}",
            tuple([first.device] if first.device else self.devices),
            payload=_BatchWork(task, paths, first),
        )
        try:
            results = await self.scheduler.submit(job)
        except JobFailed as exc:
            if exc.kind != "infrastructure":
                raise
            device = first.device or self.devices[0]
            results = [
                synthetic(
                    task.id,
                    device_json(None, device),
                    timing_kind_of(device).value,
                    hashlib.sha256(r.source.encode(errors="replace")).hexdigest(),
                    "infrastructure_error",
                    exc.reason,
                    r.profile,
                )
                for r in requests
            ]
        finally:
            for folder in folders:
                shutil.rmtree(folder, ignore_errors=True)
        rewards = group_rewards(fn, list(results))
        return [
            RewardedResult(result, reward_value, label, r.visible_only, task)
            for r, result, reward_value in zip(requests, results, rewards)
        ]

    async def _evaluator(self, slot: Slot) -> Evaluator:
        return await self.pool.get(
            slot
        )  # probing a device blocks for seconds: off the loop, so other episodes go on

    async def _run(self, job: Job, slot: Slot) -> Any:
        if isinstance(job.payload, _BatchWork):
            return await self._run_batch(job.payload, slot)
        work: _Work = job.payload
        evaluator = await self._evaluator(slot)
        try:
            check_candidate(work.path, work.task)
        except (BadCandidate, ValueError) as exc:  # ValueError: NUL bytes, which ast refuses
            return not_a_candidate(work.task, work.path, exc, evaluator, slot, work.request)
        with self.pool.guarded(slot):
            return await evaluator.aevaluate(
                work.task,
                work.path,
                seed=work.request.seed,
                performance=work.request.performance,
                visible_only=work.request.visible_only,
                profile=work.request.profile,
            )

    async def _run_batch(self, work: _BatchWork, slot: Slot) -> list[Result]:
        evaluator = await self._evaluator(slot)
        results: list[Result | None] = [None] * len(work.paths)
        good: list[int] = []
        for i, path in enumerate(work.paths):
            try:
                check_candidate(path, work.task)
                good.append(i)
            except (BadCandidate, ValueError) as exc:  # a compile failure, outside the batch
                results[i] = not_a_candidate(work.task, path, exc, evaluator, slot, work.request)
        r = work.request
        with self.pool.guarded(slot):
            if good:
                done = await evaluator.aevaluate_batch(
                    work.task,
                    [work.paths[i] for i in good],
                    seed=r.seed,
                    performance=r.performance,
                    visible_only=r.visible_only,
                    profile=r.profile,
                )
                for i, result in zip(good, done):
                    results[i] = result
        return [x for x in results if x is not None]
