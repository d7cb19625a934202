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
    ray: auto                                       # the Ray cluster of `ray:` devices (docs/ray.md)

A candidate path may use `{family}`, `{name}` and `{task}` (the id with `/` as `__`), so that one
line names a folder of solutions, e.g. `solutions/{family}/{name}.py`.

Agents add attempts (core/agents/runner.py): each agent × task × device × variant × iteration
gets a workspace, runs to its budget, and its final solution.py is evaluated on every
workload; `arena check` and the final evaluations go through the same scheduler as candidate
jobs, so the device slots are shared. An attempt whose agent produced nothing to score
(`agent_error`, `no_submission`: core/agents/outcome.py) is recorded `done` with its outcome
and reason and no final evaluation. `parallelism` caps the attempts running at once:

    agents:
      - {name: ref, kind: reference, options: {solution: baseline}, budget_s: 600}
    variants: [{name: plain}, {name: sheet, cheatsheet: true, prompt: "extra text"}]
    parallelism: 2
"""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
import itertools
import secrets
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

import yaml

from . import events
from .agents.base import AGENT_KINDS, AgentConfig
from .agents.outcome import FAILURES
from .evaluate import BadCandidate, Evaluator, check_candidate
from .profiles import ProfileError, parse_profile
from .executors import Executor, HarnessError, LocalExecutor
from .result import Result
from .scheduler import InfrastructureFault, Job, JobFailed, Scheduler, Slot, slots_for
from .store import Store
from .tasks import Task, discover, find_task
from .workspace import Variant

BUILTIN_CANDIDATES = ("starter", "baseline")
ExecutorFactory = Callable[[str, Path], Executor]
OnRunEvent = Callable[[int | None, events.Event], None]  # (store job id, event); transcripts too, with job id None
OnAttempt = Callable[["AttemptReport"], None]
AGENT_FIELDS = ("name", "kind", "model", "options", "budget_s", "max_cost_usd", "max_tokens")
VARIANT_FIELDS = ("name", "cheatsheet", "prompt", "options")


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
    agents: tuple[AgentConfig, ...] = ()
    variants: tuple[Variant, ...] = (Variant(),)
    parallelism: int | None = None  # agent attempts at once (default: one per agent)
    ray: str | None = None  # the Ray cluster's address, for `ray:` devices (core/ray_executor.py)
    profile: str = "full"  # the evaluation profile of the run's jobs: full or train (docs/evaluation.md)

    def to_json(self) -> dict[str, Any]:
        data = {k: list(v) if isinstance(v, tuple) else v for k, v in self.__dict__.items()}
        data["agents"] = [{k: getattr(a, k) for k in AGENT_FIELDS} for a in self.agents]
        data["variants"] = [v.to_json() for v in self.variants]
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "RunSpec":
        values = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items() if k in cls.__dataclass_fields__}
        values["agents"] = tuple(AgentConfig(**a) for a in data.get("agents", []))  # a run stored before agents has none
        values["variants"] = tuple(Variant(**v) for v in data.get("variants", [])) or (Variant(),)
        return cls(**values)


# What a newcomer sees first: three small, quick tasks of three families (every bundled task
# takes ten minutes on two CPU cores, where Triton runs in its interpreter).
DEMO_TASKS = ("activation/silu_mul", "norm/add_rmsnorm", "gemm/bf16_gemm")

# `arena run` alone: the offline reference agent submits the demo tasks' starters on the CPU.
DEFAULT_RUN = RunSpec(
    name="default", tasks=DEMO_TASKS, candidates=(), devices=("cpu",),
    agents=(AgentConfig(name="reference", kind="reference", options={"solution": "starter"}, budget_s=600.0),),
)


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
    allowed = ("name", "tasks", "candidates", "devices", "iterations", "cpu_slots", "max_retries", "agents", "variants", "parallelism", "ray", "profile")
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

    agents = _agents(path, raw.get("agents"))
    spec = RunSpec(
        name=str(raw.get("name") or path.stem),
        tasks=strings("tasks", None),
        candidates=strings("candidates", ("starter",)) if "candidates" in raw or not agents else (),
        devices=strings("devices", ("cpu",)),
        iterations=positive("iterations", 1) or 1,
        cpu_slots=positive("cpu_slots", None),
        max_retries=positive("max_retries", 2) or 0,
        tasks_dir=str(tasks_dir) if tasks_dir else None,
        base_dir=str(path.resolve().parent),
        agents=agents,
        variants=_variants(path, raw.get("variants")),
        parallelism=positive("parallelism", None),
        ray=_ray_address(path, raw.get("ray")),
        profile=_profile(path, raw.get("profile", "full")),
    )
    try:
        plan(spec)
    except (LookupError, ValueError) as exc:
        raise RunFileError(path, "tasks" if "task" in str(exc) else "candidates", str(exc), "see `arena tasks list` and docs/runs.md") from None
    try:
        plan_attempts(spec)
    except (LookupError, ValueError) as exc:
        raise RunFileError(path, "agents", str(exc), "fix the agent's options (docs/runs.md)") from None
    return spec


def _ray_address(path: Path, raw: Any) -> str | None:
    if raw is not None and (not isinstance(raw, str) or not raw.strip()):
        raise RunFileError(path, "ray", f"must be a Ray address, got {raw!r}", "write e.g. `ray: auto`, `ray: ray://head:10001` or `ray: local` (docs/ray.md)")
    return raw.strip() if raw else None


def _profile(path: Path, raw: Any) -> str:
    try:
        return parse_profile(raw).value
    except ProfileError as exc:
        raise RunFileError(path, "profile", str(exc), "write `profile: full` (leaderboards) or `profile: train`") from None


def _agents(path: Path, raw: Any) -> tuple[AgentConfig, ...]:
    if raw is None:
        return ()
    example = "write e.g. `agents: [{name: ref, kind: reference}]`"
    if not isinstance(raw, list) or not raw:
        raise RunFileError(path, "agents", f"must be a non-empty list of agents, got {raw!r}", example)
    agents: list[AgentConfig] = []
    for i, entry in enumerate(raw):
        where = f"agents[{i}]"
        if not isinstance(entry, dict):
            raise RunFileError(path, where, f"must be a mapping with name and kind, got {entry!r}", example)
        unknown = sorted(set(entry) - set(AGENT_FIELDS))
        if unknown:
            raise RunFileError(path, f"{where}.{unknown[0]}", "is not an agent key", f"use only {', '.join(AGENT_FIELDS)}")
        kind = entry.get("kind")
        if kind not in AGENT_KINDS:
            raise RunFileError(path, f"{where}.kind", f"is {kind!r}", f"use one of {', '.join(AGENT_KINDS)}")
        name = entry.get("name", kind)
        if not isinstance(name, str) or not name or "|" in name or "/" in name:
            raise RunFileError(path, f"{where}.name", f"must be a non-empty name without | or /, got {name!r}", "name the agent, e.g. `name: claude-sonnet`")
        if any(a.name == name for a in agents):
            raise RunFileError(path, f"{where}.name", f"`{name}` is used twice", "give each agent its own name")
        model = entry.get("model")
        if model is not None and not isinstance(model, str):
            raise RunFileError(path, f"{where}.model", f"must be a string, got {model!r}", "write e.g. `model: gpt-5`")
        options = entry.get("options") or {}
        if not isinstance(options, dict):
            raise RunFileError(path, f"{where}.options", f"must be a mapping, got {options!r}", "write e.g. `options: {solution: baseline}`")
        numbers: dict[str, Any] = {}
        for key, kind_of in (("budget_s", float), ("max_cost_usd", float), ("max_tokens", int)):
            value = entry.get(key)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0 or (kind_of is int and not isinstance(value, int)):
                raise RunFileError(path, f"{where}.{key}", f"must be a positive {'integer' if kind_of is int else 'number'}, got {value!r}", f"write e.g. `{key}: {600 if key == 'budget_s' else 5 if key == 'max_cost_usd' else 1000000}`")
            numbers[key] = kind_of(value)
        agents.append(AgentConfig(name=name, kind=kind, model=model, options=dict(options), **numbers))
    return tuple(agents)


def _variants(path: Path, raw: Any) -> tuple[Variant, ...]:
    if raw is None:
        return (Variant(),)
    example = "write e.g. `variants: [{name: plain}, {name: sheet, cheatsheet: true}]`"
    if not isinstance(raw, list) or not raw:
        raise RunFileError(path, "variants", f"must be a non-empty list, got {raw!r}", example)
    variants: list[Variant] = []
    for i, entry in enumerate(raw):
        where = f"variants[{i}]"
        if isinstance(entry, str):
            entry = {"name": entry}
        if not isinstance(entry, dict):
            raise RunFileError(path, where, f"must be a mapping with a name, got {entry!r}", example)
        unknown = sorted(set(entry) - set(VARIANT_FIELDS))
        if unknown:
            raise RunFileError(path, f"{where}.{unknown[0]}", "is not a variant key", f"use only {', '.join(VARIANT_FIELDS)}")
        name = entry.get("name")
        if not isinstance(name, str) or not name or "|" in name or "/" in name or any(v.name == name for v in variants):
            raise RunFileError(path, f"{where}.name", f"must be a unique non-empty name without | or /, got {name!r}", example)
        if not isinstance(entry.get("cheatsheet", False), bool):
            raise RunFileError(path, f"{where}.cheatsheet", f"must be true or false, got {entry['cheatsheet']!r}", "write `cheatsheet: true`")
        if not isinstance(entry.get("prompt", ""), str):
            raise RunFileError(path, f"{where}.prompt", "must be text", "write `prompt: \"extra instructions\"`")
        if not isinstance(entry.get("options", {}), dict):
            raise RunFileError(path, f"{where}.options", "must be a mapping", "write e.g. `options: {temperature: 0}`")
        variants.append(Variant(name=name, cheatsheet=entry.get("cheatsheet", False), prompt=entry.get("prompt", ""), options=dict(entry.get("options", {}))))
    return tuple(variants)


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
            check_candidate(candidate, task)
            for device in spec.devices:
                for i in range(spec.iterations):
                    jobs.append(PlannedJob(task, candidate, entry, device, i))
    return jobs


@dataclass(frozen=True)
class PlannedAttempt:
    index: int  # 1, 2, ... in the run: the attempt's id is `<run id>/<index>`
    agent: AgentConfig  # options resolved for this task (offline agents' paths)
    task: Task
    device: str
    variant: Variant
    iteration: int

    @property
    def key(self) -> str:
        from .agents.runner import attempt_key

        return attempt_key(self.agent.name, self.task.id, self.device, self.variant.name, self.iteration)


def plan_attempts(spec: RunSpec) -> list[PlannedAttempt]:
    """Every attempt of the run, agents side by side: task, device, variant, iteration, agent."""
    if not spec.agents:
        return []
    from .agents.offline import resolve_options

    attempts = []
    counter = itertools.count(1)
    for task in select_tasks(spec.tasks, spec.tasks_dir):
        resolved = [resolve_options(a, task, spec.base_dir) for a in spec.agents]
        for device in spec.devices:
            for variant in spec.variants:
                for i in range(spec.iterations):
                    for agent in resolved:
                        attempts.append(PlannedAttempt(next(counter), agent, task, device, variant, i))
    return attempts


@dataclass(frozen=True)
class AttemptReport:
    """What a front end hears of an attempt: it started, or it ended (with its result)."""

    attempt_id: str
    agent: str
    task_id: str
    device: str
    variant: str
    state: str  # running | done | failed | cancelled
    stop_reason: str | None = None
    result: Result | None = None  # None on `done`: the agent produced nothing to score (see outcome)
    error: str | None = None
    outcome: str | None = None  # on `done`: scored | starter | agent_error | no_submission (core/agents/outcome.py)
    outcome_reason: str | None = None


@dataclass(frozen=True)
class EvalRequest:
    """A scheduler job's payload: evaluate `candidate` on `task`; `job_id` is the store's job
    that keeps the result (None: an `arena check`, kept nowhere but in the agent's transcript)."""

    task: Task
    candidate: Path
    job_id: int | None
    visible_only: bool = False
    on_event: Callable[[events.Event], None] | None = None


@dataclass(frozen=True)
class BatchRequest:
    """A scheduler job's payload: candidates of one task on one device as one batch
    (core/batch.py), on the same secret seed; `job_ids` are their store jobs, in order."""

    task: Task
    candidates: tuple[Path, ...]
    job_ids: tuple[int, ...]
    seed: int
    keys: tuple[str, ...] = ()  # their plan keys (the scheduler ids a job of its own would have), in order


@dataclass(frozen=True)
class Queued:
    """What `RunControl.rerun` / `requeue` queued: the store job that will hold the result. When
    the run was not live, a follow-up run (`run_id`, `spec`) holds it: execute that with `execute`."""

    job_id: int
    run_id: str
    spec: RunSpec | None = None  # set for a follow-up run, which the caller executes


class RunControl:
    """Act on one run, live or after the fact (the app's triage). Pass it to `execute`: while the
    run executes, `cancel_attempt` stops one agent (recorded `cancelled`, the others go on), and
    `rerun` / `requeue` add an evaluation job to the store and to the run's scheduler. On a run
    that is not executing, `rerun` / `requeue` create a small follow-up run of that one job
    (named after the original) and return it for the caller to `execute`.

    `rerun(job)`: the same candidate, the same device, the job's stored secret seed, so the same
    hidden workloads and inputs. `requeue(job, device)`: the same candidate, a fresh seed, on
    another device. A job is a store job id, or an attempt id (`<run>/<n>`: its final evaluation).
    """

    def __init__(self, store: Store, tasks_dir: str | Path | None = None) -> None:
        self.store = store
        self.tasks_dir = str(tasks_dir) if tasks_dir else None  # for a follow-up run whose original names none
        self._live: _Live | None = None

    @property
    def live(self) -> bool:
        return self._live is not None

    def cancel_attempt(self, attempt_id: str) -> bool:
        """Stop one attempt of the executing run; False when it is not running or already ended."""
        live = self._live
        task = live.attempts.get(attempt_id) if live else None
        if task is None or task.done():
            return False
        task.cancel()
        return True

    def rerun(self, job: int | str) -> Queued:
        original = self._job(job)
        if original.seed is None:
            raise ValueError(f"job {original.id} has no stored seed (evaluated before seeds were kept, or never evaluated): requeue it instead")
        return self._queue(original, original.device_id, original.seed, "rerun")

    def requeue(self, job: int | str, device: str) -> Queued:
        return self._queue(self._job(job), device, None, "requeue")

    def _job(self, job: int | str) -> Any:
        if isinstance(job, str):
            attempt = self.store.get_attempt(job)
            if attempt.job_id is None:
                raise ValueError(f"attempt {job} has no final evaluation yet: nothing to re-run")
            job = attempt.job_id
        found = self.store.get_job(job)
        if not found.candidate:
            raise ValueError(f"job {found.id} has no candidate file")
        return found

    def _queue(self, original: Any, device: str, seed: int | None, how: str) -> Queued:
        live = self._live
        if live is not None and original.run_id == live.run_id:
            if device not in live.devices:
                raise ValueError(f"device {device} is not one of this run's ({', '.join(sorted(live.devices))}): requeue it once the run has ended")
            n = sum(1 for j in self.store.jobs(live.run_id) if j.key.startswith(f"{original.key}|{how}-"))
            key = f"{original.key}|{how}-{device}-{n + 1}"
            job_id = self.store.add_job(live.run_id, task_id=original.task_id, device_id=device, candidate=original.candidate,
                                        family=original.family, agent=original.agent, variant=original.variant, key=key)
            if seed is not None:
                self.store.set_job_seed(job_id, seed)
            live.submit(key, job_id, original.task_id, Path(original.candidate), device)
            return Queued(job_id, live.run_id)
        run = self.store.get_run(original.run_id)
        spec = RunSpec(name=f"{run.name}-{how}-j{original.id}", tasks=(original.task_id,), candidates=(original.candidate,), devices=(device,),
                       cpu_slots=run.spec.get("cpu_slots"), max_retries=run.spec.get("max_retries", 2),
                       tasks_dir=run.spec.get("tasks_dir") or self.tasks_dir)
        planned = plan(spec)[0]
        run_id = self.store.create_run(spec.name, spec.to_json())
        job_id = self.store.add_job(run_id, task_id=original.task_id, device_id=device, candidate=planned.candidate, family=original.family,
                                    agent=original.agent, variant=original.variant, key=planned.key)
        if seed is not None:
            self.store.set_job_seed(job_id, seed)
        return Queued(job_id, run_id, spec)


@dataclass
class _Live:
    """What a `RunControl` reaches of an executing run."""

    run_id: str
    devices: frozenset[str]
    attempts: dict[str, asyncio.Task]
    submit: Callable[[str, int, str, Path, str], None]  # (scheduler key, store job id, task id, candidate, device)


def local_executor(device_id: str, root: Path) -> Executor:
    return LocalExecutor(device_id, root)


@dataclass
class RunOutcome:
    run_id: str
    results: list[Result] = field(default_factory=list)
    failed_jobs: list[str] = field(default_factory=list)  # infrastructure faults past their retries
    interrupted: bool = False
    attempts: list[AttemptReport] = field(default_factory=list)  # the attempts that ended in this execution


async def execute(
    store: Store,
    run_id: str,
    spec: RunSpec,
    executor_factory: ExecutorFactory = local_executor,
    on_event: OnRunEvent | None = None,
    on_attempt: OnAttempt | None = None,
    attempts_root: Path | None = None,
    control: RunControl | None = None,
) -> RunOutcome:
    """Evaluate every job of the run that has no result yet and run every attempt that has not
    ended; record each result in the store before reporting it. Cancelling the returned
    coroutine (Ctrl-C) stops the agents (and everything they started), records them
    `cancelled`, and leaves the run resumable: a resumed run reruns cancelled attempts from a
    fresh workspace, re-evaluates those whose agent had ended, and never redoes a finished one.
    Attempt folders go under `attempts_root` (default: `attempts/<run id>` beside the store).
    A `control` acts on the run while it executes (cancel one attempt, re-run or requeue a job).

    Each evaluation job draws its secret seed (hidden workloads, inputs) when it first runs and
    keeps it in the store (`jobs.seed`): a retry, a resume and a `RunControl.rerun` reuse it. The
    seed goes to the harness only; no event, result or workspace carries it."""
    planned = {p.key: p for p in plan(spec)}
    for p in planned.values():
        store.add_job(run_id, task_id=p.task.id, device_id=p.device, candidate=p.candidate, family=p.task.family, key=p.key)
    # Every job without a result: queued, interrupted while running, or failed for an
    # infrastructure fault last time. A job with a result is never evaluated again.
    finished = {row.job_id for row in store.results(run_id)}
    pending = {job.key: job for job in store.jobs(run_id) if job.id not in finished and job.key in planned}
    attempts = plan_attempts(spec)
    attempt_ids = {a.key: store.add_attempt(
        run_id, a.index, key=a.key, agent=a.agent.name, agent_kind=a.agent.kind, model=a.agent.model, task_id=a.task.id,
        family=a.task.family, device_id=a.device, variant=a.variant.name, iteration=a.iteration) for a in attempts}
    rows = {row.key: row for row in store.attempts(run_id)}
    open_attempts = [a for a in attempts if rows[a.key].state != "done"]
    outcome = RunOutcome(run_id)
    root = Path(tempfile.mkdtemp(prefix="arena-run-"))
    folders = attempts_root or store.path.parent / "attempts" / run_id
    evaluators: dict[Slot, Evaluator] = {}
    job_ids: dict[str, int] = {}
    checks = itertools.count(1)

    def emit(job_id: int | None, event: events.Event) -> None:
        store.append_event(run_id, job_id, event)
        if on_event is not None:
            on_event(job_id, event)

    batch_members: dict[str, tuple[str, ...]] = {}  # a batch's scheduler job -> its members' keys
    members_done: set[str] = set()

    def on_scheduler_event(event: events.Event) -> None:
        scheduler_id = getattr(event, "job_id", "")
        if isinstance(event, events.JobStateChanged) and scheduler_id in batch_members:
            # A batch is one scheduler job: each member that has no result yet moves with it
            # (a member's `done` is announced when its result is recorded, in batch_runner).
            for key in batch_members[scheduler_id]:
                if key not in members_done and event.state != "done":
                    on_scheduler_event(replace(event, job_id=key))
            return
        job_id = job_ids.get(scheduler_id, None)
        if isinstance(event, events.JobStateChanged) and job_id is not None and event.state in ("queued", "running", "retrying", "cancelled"):
            store.set_job_state(job_id, "queued" if event.state in ("retrying", "cancelled") else event.state, attempts=event.attempt)
        if "|check-" in scheduler_id:  # an agent's `arena check`: shown, not kept in the run's log
            if on_event is not None:
                on_event(None, event)
            return
        emit(job_id, event)

    async def runner(job: Job, slot: Slot) -> Any:
        request = job.payload
        evaluator = evaluators.get(slot)
        if evaluator is None:
            try:
                evaluator = Evaluator(executor=executor_factory(slot.device, root / f"{slot.device.replace('/', '_')}-{slot.index}"))
            except Exception as exc:  # noqa: BLE001 - a device that cannot be reached is an infrastructure fault
                raise InfrastructureFault(f"{slot.device}: {exc}") from exc
            evaluators[slot] = evaluator
        if isinstance(request, BatchRequest):
            return await batch_runner(request, slot, evaluator)

        def forward(event: events.Event) -> None:
            if request.job_id is not None:
                emit(request.job_id, event)
            if request.on_event is not None:
                request.on_event(event)

        # An `arena check` (no store job) draws a fresh seed; a job keeps its own for replays.
        seed = store.set_job_seed(request.job_id, secrets.randbits(63)) if request.job_id is not None else None
        try:
            result = await evaluator.aevaluate(request.task, request.candidate, seed, on_event=forward, visible_only=request.visible_only, profile=spec.profile)
        except HarnessError as exc:
            evaluators.pop(slot).executor.close()
            raise InfrastructureFault(str(exc)) from exc
        except asyncio.CancelledError:
            evaluators.pop(slot).executor.close()  # stops the harness and everything it started
            raise
        if request.job_id is not None:
            store.record_result(request.job_id, result)
        return result

    async def batch_runner(request: BatchRequest, slot: Slot, evaluator: Evaluator) -> list[Result]:
        member = [0]

        def forward(event: events.Event) -> None:  # the batch's events, each under its own job
            emit(request.job_ids[min(member[0], len(request.job_ids) - 1)], event)
            if isinstance(event, events.EvaluationFinished):
                member[0] += 1

        for job_id in request.job_ids:
            store.set_job_state(job_id, "running")

        def recorded(k: int, result: Result) -> None:
            store.record_result(request.job_ids[k], result)
            key = request.keys[k]
            members_done.add(key)  # finished now, like a job of its own (progress lines, the app)
            on_scheduler_event(events.JobStateChanged(job_id=key, state="done", device=slot.device, slot=slot.index, attempt=1))

        try:
            # Each result is recorded the moment it is known: an interrupted batch keeps what it finished.
            results = await evaluator.aevaluate_batch(request.task, list(request.candidates), request.seed, on_event=forward, profile=spec.profile,
                                                      on_result=recorded)
        except HarnessError as exc:
            evaluators.pop(slot).executor.close()
            raise InfrastructureFault(str(exc)) from exc
        except asyncio.CancelledError:
            evaluators.pop(slot).executor.close()
            raise
        return results

    def batches(keys: list[str]) -> tuple[list[str], list[tuple[list[str], int]]]:
        """Pending jobs that run alone, and groups of one task's candidates on one device that
        run as a batch (the same seed: a resumed job keeps its own, so it joins only its equals)."""
        groups: dict[tuple[str, str], list[str]] = {}
        alone = []
        for key in keys:
            try:
                if planned[key].task.external is not None:
                    raise BadCandidate("external tasks run their own commands, never in a batch")
                check_candidate(planned[key].candidate)
            except (BadCandidate, ValueError):
                alone.append(key)  # reported by its own evaluation, as ever
                continue
            groups.setdefault((planned[key].task.id, pending[key].device_id), []).append(key)
        together = []
        for members in groups.values():
            # Ray devices run each evaluation as its own Ray task, spread over the cluster's slots
            # (core/ray_executor.py): a batch would pin a task's candidates to one node.
            if len(members) == 1 or planned[members[0]].task.world_size is not None or pending[members[0]].device_id.startswith("ray:"):
                alone += members
                continue
            fresh = secrets.randbits(63)
            by_seed: dict[int, list[str]] = {}
            for key in members:
                by_seed.setdefault(store.set_job_seed(pending[key].id, fresh), []).append(key)
            for seed, group in by_seed.items():
                (together.append((group, seed)) if len(group) > 1 else alone.extend(group))
        return alone, together

    async def member_of(batch: asyncio.Future, index: int) -> Result:
        return (await batch)[index]

    devices = sorted({p.device for p in planned.values()} | {a.device for a in attempts})
    if not devices:
        store.finish_run(run_id, "finished")
        return outcome
    capacities: dict[str, int] = {}
    if spec.ray or any(d.startswith("ray:") for d in devices):  # slots from the cluster's resources
        from . import ray_executor

        capacities = ray_executor.capacities(devices, spec.ray)
        if executor_factory is local_executor:
            executor_factory = ray_executor.with_ray(None, spec.ray)
    slots = slots_for(devices, cpu_slots=spec.cpu_slots, capacities=capacities)
    attempt_tasks: list[asyncio.Task] = []
    extra: dict[str, asyncio.Future] = {}  # jobs a RunControl added while the run executes
    try:
        async with Scheduler(slots, runner, max_retries=spec.max_retries, on_event=on_scheduler_event) as scheduler:
            futures = {}
            alone, together = batches(list(pending))
            for key in alone:
                job = pending[key]
                job_ids[key] = job.id
                futures[key] = scheduler.submit(Job(id=key, devices=(job.device_id,), payload=EvalRequest(planned[key].task, planned[key].candidate, job.id)))
            for group, seed in together:  # many candidates of one task: one batch (core/batch.py)
                first = pending[group[0]]
                payload = BatchRequest(planned[group[0]].task, tuple(planned[k].candidate for k in group), tuple(pending[k].id for k in group), seed, tuple(group))
                batch_members[f"batch|{group[0]}"] = tuple(group)
                batch = scheduler.submit(Job(id=f"batch|{group[0]}", devices=(first.device_id,), payload=payload))
                for i, key in enumerate(group):
                    job_ids[key] = pending[key].id
                    futures[key] = asyncio.ensure_future(member_of(batch, i))
            futures = {key: futures[key] for key in pending}  # the run's order
            limit = asyncio.Semaphore(spec.parallelism or max(1, len(spec.agents)))
            for a in open_attempts:
                context = _AttemptContext(store, scheduler, job_ids, checks, folders, root, on_event, on_attempt, outcome)
                attempt_tasks.append(asyncio.ensure_future(_attempt(a, attempt_ids[a.key], rows[a.key], run_id, context, limit)))
            if control is not None:
                tasks_by_id = {t.id: t for t in select_tasks(spec.tasks, spec.tasks_dir)}

                def submit(key: str, job_id: int, task_id: str, candidate: Path, device: str) -> None:
                    task = tasks_by_id.get(task_id) or find_task(task_id, spec.tasks_dir)
                    job_ids[key] = job_id
                    extra[key] = scheduler.submit(Job(id=key, devices=(device,), payload=EvalRequest(task, candidate, job_id)))

                control._live = _Live(run_id, frozenset(devices), {attempt_ids[a.key]: t for a, t in zip(open_attempts, attempt_tasks)}, submit)
            for key, future in futures.items():
                try:
                    outcome.results.append(await future)
                except Exception as exc:  # noqa: BLE001 - JobFailed: recorded, the run goes on
                    outcome.failed_jobs.append(f"{key}: {exc}")
                    store.set_job_state(job_ids[key], "failed")
            if attempt_tasks:
                await asyncio.gather(*attempt_tasks, return_exceptions=True)  # one attempt cancelled alone ends as `cancelled`
            while extra:  # a job added meanwhile is awaited too; none can be added once this ends
                key, future = extra.popitem()
                try:
                    outcome.results.append(await future)
                except Exception as exc:  # noqa: BLE001
                    outcome.failed_jobs.append(f"{key}: {exc}")
                    store.set_job_state(job_ids[key], "failed")
            if control is not None:
                control._live = None
    except asyncio.CancelledError:
        outcome.interrupted = True
        for task in attempt_tasks:
            task.cancel()
        if attempt_tasks:
            await asyncio.wait(attempt_tasks)  # each stops its agent and records it cancelled
        store.finish_run(run_id, "interrupted")
        raise
    finally:
        if control is not None:
            control._live = None
        for evaluator in evaluators.values():
            evaluator.close()
    store.finish_run(run_id, "finished")
    return outcome


@dataclass
class _AttemptContext:
    """What every attempt of one execution shares."""

    store: Store
    scheduler: Scheduler
    job_ids: dict[str, int]
    checks: Any  # itertools.count: unique scheduler ids for checks
    folders: Path
    eval_root: Path
    on_event: OnRunEvent | None
    on_attempt: OnAttempt | None
    outcome: RunOutcome


async def _attempt(planned: PlannedAttempt, attempt_id: str, row: Any, run_id: str, ctx: _AttemptContext, limit: asyncio.Semaphore) -> None:
    """One attempt through the runner, recorded at each step: started (transcript cleared),
    agent ended (stop reason, usage, the snapshot: state `evaluating`), final result (`done`).
    An attempt whose agent had ended before an interruption is only evaluated again."""
    from .agents import adapter as make_adapter
    from .agents.runner import Attempt, evaluate_submission, run_agent, snapshot
    from .workspace import make_workspace

    store = ctx.store
    attempt = Attempt(attempt_id, run_id, planned.agent, planned.task, planned.device, planned.variant, planned.iteration)
    final_key = f"{planned.key}|final"

    def report(state: str, stop_reason: str | None = None, result: Result | None = None, error: str | None = None,
               outcome: str | None = None, outcome_reason: str | None = None) -> AttemptReport:
        rep = AttemptReport(attempt_id, planned.agent.name, planned.task.id, planned.device, planned.variant.name, state, stop_reason, result, error,
                            outcome, outcome_reason)
        if ctx.on_attempt is not None:
            ctx.on_attempt(rep)
        return rep

    async def evaluate(candidate: Path, visible_only: bool, on_event: Callable[[events.Event], None] | None) -> Result:
        if visible_only:
            job_id, scheduler_id = None, f"{attempt_id}|check-{next(ctx.checks)}"
        else:
            job_id = store.add_job(run_id, task_id=planned.task.id, device_id=planned.device, candidate=candidate, family=planned.task.family,
                                   agent=planned.agent.name, variant=planned.variant.name, key=final_key)
            scheduler_id = final_key
            ctx.job_ids[scheduler_id] = job_id
        future = ctx.scheduler.submit(Job(id=scheduler_id, devices=(planned.device,), payload=EvalRequest(planned.task, candidate, job_id, visible_only, on_event)))
        return await future

    def on_transcript(event: events.TranscriptEvent) -> None:
        store.append_transcript(event)
        if ctx.on_event is not None:
            ctx.on_event(None, event)

    def cancelled_while_queued() -> None:
        store.set_attempt_state(attempt_id, "cancelled", stop_reason="cancelled")
        report("cancelled", "cancelled")

    async with _held(limit, cancelled_while_queued):
        stop_reason = row.stop_reason
        submission = Path(row.submission) if row.submission else None
        outcome, outcome_reason = row.outcome, row.outcome_reason
        kept = None
        try:
            if row.state not in ("evaluating", "failed") or submission is None or not submission.is_file():
                folder = ctx.folders / attempt.slug
                store.start_attempt(attempt_id, folder)
                report("running")
                workspace = make_workspace(folder, planned.task, planned.device, planned.variant, planned.agent.budget_s,
                                           planned.agent.max_cost_usd, planned.agent.max_tokens)
                agent = await run_agent(attempt, make_adapter(planned.agent.kind), workspace, evaluate, on_transcript,
                                        masked=(ctx.eval_root, planned.task.path.parent.parent))
                submission = snapshot(workspace, "final")
                stop_reason = agent.stop_reason
                outcome, outcome_reason = agent.outcome, agent.verdict.reason
                store.end_agent(attempt_id, stop_reason=agent.stop_reason, exit_status=agent.exit_status, submission=submission,
                                checks=agent.checks, seconds=agent.seconds, usage=agent.usage.to_json(), sandbox=agent.sandbox_status, error=agent.error,
                                outcome=outcome, outcome_reason=outcome_reason)
            else:
                store.set_attempt_state(attempt_id, "evaluating")
                # Interrupted between the final result and the attempt's last update: the result stands.
                kept = next((r for r in store.results(run_id) if store.get_job(r.job_id).key == final_key and r.status != "infrastructure_error"), None)
            if outcome in FAILURES:  # nothing of the agent's to score: the starter left there is not its work
                store.set_attempt_state(attempt_id, "done")
                ctx.outcome.attempts.append(report("done", stop_reason, outcome=outcome, outcome_reason=outcome_reason))
                return
            result = kept.to_result() if kept else await evaluate_submission(attempt, submission, evaluate)
            job_id = store.add_job(run_id, task_id=planned.task.id, device_id=planned.device, candidate=submission, family=planned.task.family,
                                   agent=planned.agent.name, variant=planned.variant.name, key=final_key)
            store.record_result(job_id, result)  # again where the scheduler did: the same result; once where no harness ran (no `run`)
            state = "failed" if result.status == "infrastructure_error" else "done"
            store.set_attempt_state(attempt_id, state, job_id=job_id)
            ctx.outcome.attempts.append(report(state, stop_reason, result, outcome=outcome, outcome_reason=outcome_reason))
        except asyncio.CancelledError:
            store.set_attempt_state(attempt_id, "cancelled", stop_reason="cancelled")
            report("cancelled", "cancelled")
            raise
        except JobFailed as exc:  # the final evaluation hit infrastructure faults past its retries: resume re-evaluates
            store.set_attempt_state(attempt_id, "failed", error=str(exc))
            ctx.outcome.failed_jobs.append(f"{attempt_id}: {exc}")
            ctx.outcome.attempts.append(report("failed", stop_reason, error=str(exc)))
        except Exception as exc:  # noqa: BLE001 - one attempt's fault (a bad adapter option) must not end the run
            store.set_attempt_state(attempt_id, "failed", error=f"{type(exc).__name__}: {exc}")
            ctx.outcome.failed_jobs.append(f"{attempt_id}: {type(exc).__name__}: {exc}")
            ctx.outcome.attempts.append(report("failed", stop_reason, error=f"{type(exc).__name__}: {exc}"))


@contextlib.asynccontextmanager
async def _held(limit: asyncio.Semaphore, on_cancelled: Callable[[], None]) -> Any:
    """Hold one of the run's attempt places; an attempt cancelled while it waits for one is
    recorded by `on_cancelled` (it never started)."""
    try:
        await limit.acquire()
    except asyncio.CancelledError:
        on_cancelled()
        raise
    try:
        yield
    finally:
        limit.release()
