"""The reward API for trainers: a candidate's source text in, a scored Result and a reward out.

    from core.rl.arena import evaluate, evaluate_many, EvalRequest
    r = evaluate("elementwise/axpy", source, device="cpu")          # one, on a fresh harness
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
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import re
import shutil
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.devices.device import DeviceError, parse_device
from core.devices.ids import timing_kind_of
from core.evaluation.evaluator import BadCandidate, Evaluator, check_candidate
from core.evaluation.executors import HarnessError, LocalExecutor
from core.evaluation.job import Timing
from core.evaluation.profiles import parse_profile
from core.model.result import Result, unevaluated
from core.model.task import Task
from core.orchestration.pool import EvaluatorPool, ExecutorFactory
from core.orchestration.scheduler import (
    InfrastructureFault,
    Job,
    JobFailed,
    Scheduler,
    Slot,
    slots_for,
)
from core.rl.rewards import RewardFn, get_reward, outcome, reward_name
from core.tasks.discovery import find_task

MAX_SOURCE_BYTES = 1 << 20  # a candidate module larger than 1 MiB is not a kernel


@dataclass(frozen=True)
class EvalRequest:
    """One evaluation of a batch. `device` None: any device of the batch. `visible_only`:
    leave the hidden workloads out (an episode's turns); `performance=False`: time nothing."""

    task_id: str
    source: str
    seed: int | None = None
    device: str | None = None
    visible_only: bool = False
    performance: bool = True
    profile: str = "full"  # `full` or `train` (core/evaluation/profiles.py): what is timed, for how long, under which limits

    def __post_init__(self) -> None:
        if not isinstance(self.task_id, str) or not self.task_id:
            raise ValueError(
                f"task_id: give a task id such as elementwise/axpy, got {self.task_id!r}"
            )
        check_source(self.source)
        if self.seed is not None and (
            not isinstance(self.seed, int) or isinstance(self.seed, bool) or self.seed < 0
        ):
            raise ValueError(f"seed: give a non-negative integer or None, got {self.seed!r}")
        object.__setattr__(self, "profile", parse_profile(self.profile).value)

    def batch_key(self) -> tuple[Any, ...]:
        """Requests with equal keys can share one batch (the same workloads, seeds and timing)."""
        return (
            self.task_id,
            self.seed,
            self.device,
            self.visible_only,
            self.performance,
            self.profile,
        )

    @classmethod
    def coerce(cls, item: EvalRequest | Mapping[str, Any] | Sequence[Any]) -> EvalRequest:
        """An EvalRequest from itself, a mapping of its fields, or a (task_id, source) pair."""
        if isinstance(item, EvalRequest):
            return item
        if isinstance(item, Mapping):
            unknown = sorted(set(item) - set(cls.__dataclass_fields__))
            if unknown:
                raise ValueError(
                    f"request field `{unknown[0]}` is unknown: use {', '.join(cls.__dataclass_fields__)}"
                )
            return cls(**item)
        if isinstance(item, (tuple, list)) and len(item) == 2:
            return cls(item[0], item[1])
        raise TypeError(
            f"a request is an EvalRequest, a mapping or a (task_id, source) pair, got {type(item).__name__}"
        )


def check_source(source: object) -> str:
    if not isinstance(source, str):
        raise TypeError(
            f"source: give the candidate's Python source as a string, got {type(source).__name__}"
        )
    if len(source.encode(errors="replace")) > MAX_SOURCE_BYTES:
        raise ValueError(
            f"source: {len(source.encode(errors='replace'))} bytes, more than the {MAX_SOURCE_BYTES} allowed: send one module"
        )
    return source


@dataclass
class RewardedResult:
    """A Result and its reward. `reward` None means an infrastructure fault: not the
    candidate's doing, so the trainer should retry the evaluation rather than learn from it."""

    result: Result
    reward: float | None
    reward_name: str
    visible_only: bool = False
    task: Task | None = field(default=None, repr=False, compare=False)

    @property
    def outcome(self) -> str:
        return outcome(self.result)

    @property
    def retry(self) -> bool:
        return self.reward is None

    @property
    def stages(self) -> dict[str, str]:
        return {s.name: s.status for s in self.result.stages}

    @property
    def speedup(self) -> float:
        return self.result.speedup

    @property
    def sol_fraction(self) -> float | None:
        return self.result.sol_fraction

    @property
    def integrity_flags(self) -> list[str]:
        return self.result.integrity_flags

    @property
    def review_notes(self) -> list[str]:
        return self.result.review_notes

    def to_json(self, public: bool = True) -> dict[str, Any]:
        """`public=True` (the default) names no hidden workload: safe to show a policy."""
        return {
            "reward": self.reward,
            "reward_name": self.reward_name,
            "outcome": self.outcome,
            "retry": self.retry,
            "visible_only": self.visible_only,
            "result": public_result(self.result, self.task) if public else self.result.to_json(),
        }


# --- what a policy may see -----------------------------------------------------------------


def _hidden_workloads(result: Result) -> list[tuple[str, dict[str, int]]]:
    seen: dict[str, dict[str, int]] = {}
    for s in result.stages:
        if s.name == "generalization":
            for w in s.workloads:
                seen.setdefault(w["label"], dict(w.get("axes") or {}))
    for w in result.workloads:
        if w.hidden:
            seen.setdefault(w.label, dict(w.axes))
    return list(seen.items())


def _shape_texts(task: Task | None, axes: dict[str, int]) -> list[str]:
    """How a hidden workload's tensor shapes may be printed in free text (`33, 100`)."""
    if task is None:
        return []
    texts = set()
    for spec in task.inputs + task.outputs:
        if spec.shape is not None and len(spec.shape) >= 2:
            try:
                texts.add(", ".join(str(d) for d in spec.concrete_shape(axes)))
            except Exception:  # noqa: BLE001 - a formula that needs other axes: nothing to scrub
                pass
    return sorted(texts, key=len, reverse=True)


def public_result(result: Result, task: Task | None = None) -> dict[str, Any]:
    """The Result as JSON with every hidden workload anonymised: the generalization stage
    keeps only how many hidden workloads passed; timed hidden workloads are `hidden#k` with no
    axes; free text (messages, flags, notes) has their labels and, given the task, their
    shapes replaced. The numbers a trainer scores on (status, speedup, reward) are unchanged."""
    data = result.to_json()
    hidden = _hidden_workloads(result)
    alias = {label: f"hidden#{i + 1}" for i, (label, _) in enumerate(hidden)}
    patterns = [(re.escape(label), alias[label]) for label in sorted(alias, key=len, reverse=True)]
    for label, axes in hidden:
        patterns += [
            (r"(?<!\d)" + re.escape(text) + r"(?!\d)", f"<{alias[label]} shape>")
            for text in _shape_texts(task, axes)
        ]
    scrub_re = [(re.compile(p), r) for p, r in patterns]

    def scrub(value: Any) -> Any:
        if isinstance(value, str):
            for pattern, repl in scrub_re:
                value = pattern.sub(repl, value)
            return value
        if isinstance(value, list):
            return [scrub(v) for v in value]
        if isinstance(value, dict):
            return {k: scrub(v) for k, v in value.items()}
        return value

    for stage in data["stages"]:
        if stage["name"] == "generalization":
            works = stage["workloads"]
            wrong = sum(1 for w in works if not w.get("passed"))
            stage["workloads"] = [
                {"label": alias.get(w["label"], "hidden"), "passed": bool(w.get("passed"))}
                for w in works
            ]
            stage["log"] = ""
            if stage["message"]:
                stage["message"] = (
                    f"{wrong} of {len(works)} hidden workload(s) wrong (hidden workloads are never described)"
                    if wrong
                    else "hidden workloads withheld"
                )
    for w in data["workloads"]:
        if w["hidden"]:
            w["label"], w["axes"], w["model"] = alias.get(w["label"], "hidden"), {}, None
    return scrub(data)


# --- results the harness never produced ------------------------------------------------------


def _write_candidate(source: str) -> tuple[Path, Path]:
    """The source in a private folder (mode 700) outside every harness's folders: (folder, file)."""
    folder = Path(tempfile.mkdtemp(prefix="arena-cand-"))
    path = folder / "candidate.py"
    path.write_text(source)
    path.chmod(0o600)
    return folder, path


def _device_json(evaluator: Evaluator | None, device: str) -> dict[str, Any]:
    if evaluator is None:
        return {"id": device, "model": None, "vendor": None, "arch": None}
    info = evaluator.info
    return {"id": info.id, "model": info.model, "vendor": info.vendor, "arch": info.arch}


def _synthetic(
    task_id: str,
    device: dict[str, Any],
    timing_kind: str,
    sha: str,
    status: str,
    message: str,
    profile: str | None = None,
) -> Result:
    """A Result for an evaluation that never reached the harness (core.model.result.unevaluated)."""
    return unevaluated(task_id, device, timing_kind, sha, message, status=status, profile=profile)


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
        self._root: Path | None = (
            None  # made on the first evaluation: a refused server leaves nothing behind
        )
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
        if self._root is not None:
            shutil.rmtree(self._root, ignore_errors=True)

    @property
    def root(self) -> Path:
        """The evaluators' working folders (job files, harness logs)."""
        if self._root is None:
            self._root = Path(tempfile.mkdtemp(prefix="arena-rl-"))
        return self._root

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
        folder, path = _write_candidate(request.source)
        fn, label = self._reward(reward)
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
            result = _synthetic(
                task.id,
                _device_json(None, device),
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
        folders, paths = (list(x) for x in zip(*(_write_candidate(r.source) for r in requests)))
        fn, label = self._reward(reward)
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
                _synthetic(
                    task.id,
                    _device_json(None, device),
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
        return [
            RewardedResult(result, fn(result), label, r.visible_only, task)
            for r, result in zip(requests, results)
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
            sha = check_candidate(work.path)
        except (BadCandidate, ValueError) as exc:  # ValueError: NUL bytes, which ast refuses
            sha = hashlib.sha256(work.path.read_bytes()).hexdigest()
            message = str(exc).replace(str(work.path), "candidate.py")
            return _synthetic(
                work.task.id,
                _device_json(evaluator, slot.device),
                evaluator.info.timing_kind,
                sha,
                "failed",
                message,
                work.request.profile,
            )
        try:
            return await evaluator.aevaluate(
                work.task,
                work.path,
                seed=work.request.seed,
                performance=work.request.performance,
                visible_only=work.request.visible_only,
                profile=work.request.profile,
            )
        except HarnessError as exc:
            self._drop(slot)
            raise InfrastructureFault(str(exc)) from exc
        except asyncio.CancelledError:
            self._drop(slot)  # stops the harness and everything it started
            raise

    async def _run_batch(self, work: _BatchWork, slot: Slot) -> list[Result]:
        evaluator = await self._evaluator(slot)
        results: list[Result | None] = [None] * len(work.paths)
        good: list[int] = []
        for i, path in enumerate(work.paths):
            try:
                check_candidate(path)
                good.append(i)
            except (
                BadCandidate,
                ValueError,
            ) as exc:  # scored as a compile failure, outside the batch
                sha = hashlib.sha256(path.read_bytes()).hexdigest()
                results[i] = _synthetic(
                    work.task.id,
                    _device_json(evaluator, slot.device),
                    evaluator.info.timing_kind,
                    sha,
                    "failed",
                    str(exc).replace(str(path), "candidate.py"),
                    work.request.profile,
                )
        r = work.request
        try:
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
        except HarnessError as exc:
            self._drop(slot)
            raise InfrastructureFault(str(exc)) from exc
        except asyncio.CancelledError:
            self._drop(slot)
            raise
        return [x for x in results if x is not None]

    def _drop(self, slot: Slot) -> None:
        self.pool.drop(slot)


# --- one-call helpers ----------------------------------------------------------------------------


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


def evaluate(
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
    """`aevaluate` for synchronous callers (not from inside a running event loop)."""
    return asyncio.run(
        aevaluate(
            task_id,
            source,
            device,
            seed,
            reward,
            visible_only,
            performance,
            tasks_dir,
            executor_factory,
            timing,
            profile,
        )
    )


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


def evaluate_many(
    requests: Iterable[EvalRequest | Mapping[str, Any] | Sequence[Any]],
    devices: Sequence[str] = ("cpu",),
    reward: str | RewardFn | None = None,
    tasks_dir: Path | str | None = None,
    executor_factory: ExecutorFactory | None = None,
    cpu_slots: int | None = None,
    timing: Timing | None = None,
    ray: str | None = None,
) -> list[RewardedResult]:
    """`aevaluate_many` for synchronous callers."""
    return asyncio.run(
        aevaluate_many(
            requests, devices, reward, tasks_dir, executor_factory, cpu_slots, timing, ray
        )
    )


__all__ = [
    "Arena",
    "EvalRequest",
    "RewardedResult",
    "aevaluate",
    "aevaluate_many",
    "evaluate",
    "evaluate_many",
    "public_result",
]
