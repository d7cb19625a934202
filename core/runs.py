"""Runs: a run file says which candidates to evaluate on which tasks and devices; the run goes
through the scheduler, every result lands in the store before it is shown, and an interrupted
run resumes with nothing lost and nothing done twice.

Run file (YAML; docs/runs.md):

    name: starters-vs-baselines
    tasks: [gemm/bf16_gemm, norm, "activation/*"]   # ids, families or globs
    candidates: [starter, baseline]                 # the task's own files, or paths
    devices: [cpu]                                  # cpu, cuda:N, xpu:N, <host>/<device>
    iterations: 1
    cpu_slots: 2                                    # evaluations at once per CPU device
    max_retries: 2                                  # infrastructure faults, on another slot

A candidate path may use `{family}`, `{name}` and `{task}` (the id with `/` as `__`), so that one
line names a folder of solutions, e.g. `solutions/{family}/{name}.py`. Agents (a later issue)
add their own entries; the engine only needs the (task, candidate, device) jobs they produce.
"""

from __future__ import annotations

import asyncio
import fnmatch
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import yaml

from . import events
from .evaluate import Evaluator, check_candidate
from .executors import Executor, HarnessError, LocalExecutor
from .result import Result
from .scheduler import InfrastructureFault, Job, Scheduler, Slot, slots_for
from .store import Store
from .tasks import Task, discover, find_task

BUILTIN_CANDIDATES = ("starter", "baseline")
ExecutorFactory = Callable[[str, Path], Executor]
OnRunEvent = Callable[[int | None, events.Event], None]  # (store job id, event)


class RunFileError(ValueError):
    """A run file that cannot be used; the message names the file, the field and the fix."""

    def __init__(self, path: Path | str, field_name: str, problem: str, fix: str):
        super().__init__(f"{path}: `{field_name}`: {problem}. Fix: {fix}")


@dataclass(frozen=True)
class RunSpec:
    name: str
    tasks: tuple[str, ...]
    candidates: tuple[str, ...] = ("starter",)
    devices: tuple[str, ...] = ("cpu",)
    iterations: int = 1
    cpu_slots: int | None = None
    max_retries: int = 2
    tasks_dir: str | None = None
    base_dir: str = "."  # where relative candidate paths are read from: the run file's folder

    def to_json(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in self.__dict__.items()}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "RunSpec":
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in data.items() if k in cls.__dataclass_fields__})


DEFAULT_RUN = RunSpec(name="default", tasks=("*",), candidates=("starter",), devices=("cpu",))


def load_run_file(path: Path | str, tasks_dir: Path | None = None) -> RunSpec:
    path = Path(path)
    if not path.is_file():
        raise RunFileError(path, "(file)", "does not exist", "pass the path of a run file (docs/runs.md)")
    try:
        raw = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise RunFileError(path, "(syntax)", f"is not valid YAML ({exc})", "fix the YAML syntax") from None
    if not isinstance(raw, dict):
        raise RunFileError(path, "(top level)", "must be a mapping", "start with `name:` and `tasks:`")
    allowed = ("name", "tasks", "candidates", "devices", "iterations", "cpu_slots", "max_retries")
    unknown = sorted(set(raw) - set(allowed))
    if unknown:
        raise RunFileError(path, unknown[0], "is not a run-file key", f"use only {', '.join(allowed)}")

    def strings(key: str, default: tuple[str, ...] | None) -> tuple[str, ...]:
        value = raw.get(key, default)
        if value is None:
            raise RunFileError(path, key, "is missing", f"list the {key}, e.g. `{key}: [gemm/bf16_gemm]`")
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, (list, tuple)) or not value or not all(isinstance(v, str) for v in value):
            raise RunFileError(path, key, f"must be a non-empty list of strings, got {value!r}", f"write e.g. `{key}: [a, b]`")
        return tuple(value)

    def positive(key: str, default: int | None) -> int | None:
        value = raw.get(key, default)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < (0 if key == "max_retries" else 1)):
            raise RunFileError(path, key, f"must be a positive integer, got {value!r}", f"write e.g. `{key}: 2`")
        return value

    spec = RunSpec(
        name=str(raw.get("name") or path.stem),
        tasks=strings("tasks", None),
        candidates=strings("candidates", ("starter",)),
        devices=strings("devices", ("cpu",)),
        iterations=positive("iterations", 1) or 1,
        cpu_slots=positive("cpu_slots", None),
        max_retries=positive("max_retries", 2) or 0,
        tasks_dir=str(tasks_dir) if tasks_dir else None,
        base_dir=str(path.resolve().parent),
    )
    try:
        plan(spec)
    except (LookupError, ValueError) as exc:
        raise RunFileError(path, "tasks" if "task" in str(exc) else "candidates", str(exc), "see `arena tasks list` and docs/runs.md") from None
    return spec


@dataclass(frozen=True)
class PlannedJob:
    task: Task
    candidate: Path
    candidate_label: str
    device: str
    iteration: int

    @property
    def key(self) -> str:
        return f"{self.task.id}|{self.candidate_label}|{self.device}|{self.iteration}"


def select_tasks(patterns: tuple[str, ...], tasks_dir: str | None) -> list[Task]:
    """Tasks by id, family or glob, in sorted order, each once."""
    every = discover(tasks_dir)
    chosen: dict[str, Task] = {}
    for pattern in patterns:
        hits = [t for t in every if t.id == pattern or t.family == pattern or fnmatch.fnmatch(t.id, pattern)]
        if not hits:
            find_task(pattern, tasks_dir)  # raises with a suggestion
        chosen.update({t.id: t for t in hits})
    return [chosen[k] for k in sorted(chosen)]


def _candidate(task: Task, entry: str, base_dir: str) -> Path:
    if entry in BUILTIN_CANDIDATES:
        return task.file(f"{entry}.py")
    path = Path(entry.format(family=task.family, name=task.name, task=task.id.replace("/", "__")))
    return path if path.is_absolute() else Path(base_dir) / path


def plan(spec: RunSpec) -> list[PlannedJob]:
    jobs = []
    for task in select_tasks(spec.tasks, spec.tasks_dir):
        for entry in spec.candidates:
            candidate = _candidate(task, entry, spec.base_dir)
            check_candidate(candidate)
            for device in spec.devices:
                for i in range(spec.iterations):
                    jobs.append(PlannedJob(task, candidate, entry, device, i))
    return jobs


def local_executor(device_id: str, root: Path) -> Executor:
    return LocalExecutor(device_id, root)


@dataclass
class RunOutcome:
    run_id: str
    results: list[Result] = field(default_factory=list)
    failed_jobs: list[str] = field(default_factory=list)  # infrastructure faults past their retries
    interrupted: bool = False


async def execute(
    store: Store,
    run_id: str,
    spec: RunSpec,
    executor_factory: ExecutorFactory = local_executor,
    on_event: OnRunEvent | None = None,
) -> RunOutcome:
    """Evaluate every job of the run that has no result yet; record each result in the store
    before reporting it. Cancelling the returned coroutine (Ctrl-C) leaves the run resumable."""
    planned = {p.key: p for p in plan(spec)}
    for p in planned.values():
        store.add_job(run_id, task_id=p.task.id, device_id=p.device, candidate=p.candidate, family=p.task.family, key=p.key)
    # Every job without a result: queued, interrupted while running, or failed for an
    # infrastructure fault last time. A job with a result is never evaluated again.
    finished = {row.job_id for row in store.results(run_id)}
    pending = {job.key: job for job in store.jobs(run_id) if job.id not in finished and job.key in planned}
    outcome = RunOutcome(run_id)
    root = Path(tempfile.mkdtemp(prefix="arena-run-"))
    evaluators: dict[Slot, Evaluator] = {}
    job_ids: dict[str, int] = {}

    def emit(job_id: int | None, event: events.Event) -> None:
        store.append_event(run_id, job_id, event)
        if on_event is not None:
            on_event(job_id, event)

    def on_scheduler_event(event: events.Event) -> None:
        job_id = job_ids.get(getattr(event, "job_id", ""), None)
        if isinstance(event, events.JobStateChanged) and job_id is not None and event.state in ("queued", "running", "retrying", "cancelled"):
            store.set_job_state(job_id, "queued" if event.state in ("retrying", "cancelled") else event.state, attempts=event.attempt)
        emit(job_id, event)

    async def runner(job: Job, slot: Slot) -> Result:
        p: PlannedJob = job.payload
        job_id = job_ids[job.id]
        evaluator = evaluators.get(slot)
        if evaluator is None:
            try:
                evaluator = Evaluator(executor=executor_factory(slot.device, root / f"{slot.device.replace('/', '_')}-{slot.index}"))
            except Exception as exc:  # noqa: BLE001 - a device that cannot be reached is an infrastructure fault
                raise InfrastructureFault(f"{slot.device}: {exc}") from exc
            evaluators[slot] = evaluator
        try:
            result = await evaluator.aevaluate(p.task, p.candidate, on_event=lambda e: emit(job_id, e))
        except HarnessError as exc:
            evaluators.pop(slot).executor.close()
            raise InfrastructureFault(str(exc)) from exc
        except asyncio.CancelledError:
            evaluators.pop(slot).executor.close()  # stops the harness and everything it started
            raise
        store.record_result(job_id, result)
        return result

    devices = sorted({p.device for p in planned.values()})
    slots = slots_for(devices, cpu_slots=spec.cpu_slots)
    try:
        async with Scheduler(slots, runner, max_retries=spec.max_retries, on_event=on_scheduler_event) as scheduler:
            futures = {}
            for key, job in pending.items():
                job_ids[key] = job.id
                futures[key] = scheduler.submit(Job(id=key, devices=(job.device_id,), payload=planned[key]))
            for key, future in futures.items():
                try:
                    outcome.results.append(await future)
                except Exception as exc:  # noqa: BLE001 - JobFailed: recorded, the run goes on
                    outcome.failed_jobs.append(f"{key}: {exc}")
                    store.set_job_state(job_ids[key], "failed")
    except asyncio.CancelledError:
        outcome.interrupted = True
        store.finish_run(run_id, "interrupted")
        raise
    finally:
        for evaluator in evaluators.values():
            evaluator.close()
    store.finish_run(run_id, "finished")
    return outcome
