"""Runs: the run goes through the scheduler, every result lands in the store before it is
shown, and an interrupted run resumes with nothing lost and nothing done twice. The run file
is read by core.orchestration.runfile, expanded into jobs and attempts by
core.orchestration.planning; `RunControl` (cancel, re-run, re-queue from a front end) is here.

Agents add attempts (core/agents/runner.py): each agent × task × device × variant × iteration
gets a workspace, runs to its budget, and its final solution.py is evaluated on every
workload; `arena check` and the final evaluations go through the same scheduler as candidate
jobs, so the device slots are shared. An attempt whose agent produced nothing to score
(`agent_error`, `no_submission`: core/model/outcome.py) is recorded `done` with its outcome
and reason and no final evaluation.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import secrets
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from core.evaluation.evaluator import BadCandidate, Evaluator, check_candidate
from core.evaluation.executors import Executor, HarnessError, LocalExecutor
from core.model import events, keys
from core.model.outcome import FAILURES
from core.model.result import Result
from core.model.task import Task
from core.orchestration.planning import PlannedAttempt, plan, plan_attempts, select_tasks
from core.orchestration.pool import EvaluatorPool, ExecutorFactory
from core.orchestration.runfile import RunSpec
from core.orchestration.scheduler import (
    InfrastructureFault,
    Job,
    JobFailed,
    Scheduler,
    Slot,
    slots_for,
)
from core.store.db import Store
from core.tasks.discovery import find_task

OnRunEvent = Callable[
    [int | None, events.Event], None
]  # (store job id, event); transcripts too, with job id None
OnAttempt = Callable[["AttemptReport"], None]


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
    result: Result | None = (
        None  # None on `done`: the agent produced nothing to score (see outcome)
    )
    error: str | None = None
    outcome: str | None = (
        None  # on `done`: scored | starter | agent_error | no_submission (core/model/outcome.py)
    )
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
    (core/evaluation/batch.py), on the same secret seed; `job_ids` are their store jobs, in order."""

    task: Task
    candidates: tuple[Path, ...]
    job_ids: tuple[int, ...]
    seed: int
    keys: tuple[
        str, ...
    ] = ()  # their plan keys (the scheduler ids a job of its own would have), in order


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
        self.tasks_dir = (
            str(tasks_dir) if tasks_dir else None
        )  # for a follow-up run whose original names none
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
            raise ValueError(
                f"job {original.id} has no stored seed (evaluated before seeds were kept, or never evaluated): requeue it instead"
            )
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
                raise ValueError(
                    f"device {device} is not one of this run's ({', '.join(sorted(live.devices))}): requeue it once the run has ended"
                )
            n = sum(
                1
                for j in self.store.jobs(live.run_id)
                if j.key.startswith(keys.rerun_prefix(original.key, how))
            )
            key = keys.rerun_key(original.key, how, device, n + 1)
            job_id = self.store.add_job(
                live.run_id,
                task_id=original.task_id,
                device_id=device,
                candidate=original.candidate,
                family=original.family,
                agent=original.agent,
                variant=original.variant,
                key=key,
            )
            if seed is not None:
                self.store.set_job_seed(job_id, seed)
            live.submit(key, job_id, original.task_id, Path(original.candidate), device)
            return Queued(job_id, live.run_id)
        run = self.store.get_run(original.run_id)
        spec = RunSpec(
            name=f"{run.name}-{how}-j{original.id}",
            tasks=(original.task_id,),
            candidates=(original.candidate,),
            devices=(device,),
            cpu_slots=run.spec.get("cpu_slots"),
            max_retries=run.spec.get("max_retries", 2),
            tasks_dir=run.spec.get("tasks_dir") or self.tasks_dir,
        )
        planned = plan(spec)[0]
        run_id = self.store.create_run(spec.name, spec.to_json())
        job_id = self.store.add_job(
            run_id,
            task_id=original.task_id,
            device_id=device,
            candidate=planned.candidate,
            family=original.family,
            agent=original.agent,
            variant=original.variant,
            key=planned.key,
        )
        if seed is not None:
            self.store.set_job_seed(job_id, seed)
        return Queued(job_id, run_id, spec)


@dataclass
class _Live:
    """What a `RunControl` reaches of an executing run."""

    run_id: str
    devices: frozenset[str]
    attempts: dict[str, asyncio.Task]
    submit: Callable[
        [str, int, str, Path, str], None
    ]  # (scheduler key, store job id, task id, candidate, device)


def local_executor(device_id: str, root: Path) -> Executor:
    return LocalExecutor(device_id, root)


@dataclass
class RunOutcome:
    run_id: str
    results: list[Result] = field(default_factory=list)
    failed_jobs: list[str] = field(default_factory=list)  # infrastructure faults past their retries
    interrupted: bool = False
    attempts: list[AttemptReport] = field(
        default_factory=list
    )  # the attempts that ended in this execution


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
        store.add_job(
            run_id,
            task_id=p.task.id,
            device_id=p.device,
            candidate=p.candidate,
            family=p.task.family,
            key=p.key,
        )
    # Every job without a result: queued, interrupted while running, or failed for an
    # infrastructure fault last time. A job with a result is never evaluated again.
    finished = {row.job_id for row in store.results(run_id)}
    pending = {
        job.key: job for job in store.jobs(run_id) if job.id not in finished and job.key in planned
    }
    attempts = plan_attempts(spec)
    attempt_ids = {
        a.key: store.add_attempt(
            run_id,
            a.index,
            key=a.key,
            agent=a.agent.name,
            agent_kind=a.agent.kind,
            model=a.agent.model,
            task_id=a.task.id,
            family=a.task.family,
            device_id=a.device,
            variant=a.variant.name,
            iteration=a.iteration,
        )
        for a in attempts
    }
    rows = {row.key: row for row in store.attempts(run_id)}
    open_attempts = [a for a in attempts if rows[a.key].state != "done"]
    outcome = RunOutcome(run_id)
    root = Path(tempfile.mkdtemp(prefix="arena-run-"))
    folders = attempts_root or store.path.parent / "attempts" / run_id
    pool = EvaluatorPool(executor_factory, lambda: root, keep_folders=False)
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
        if (
            isinstance(event, events.JobStateChanged)
            and job_id is not None
            and event.state in ("queued", "running", "retrying", "cancelled")
        ):
            store.set_job_state(
                job_id,
                "queued" if event.state in ("retrying", "cancelled") else event.state,
                attempts=event.attempt,
            )
        if keys.is_check(
            scheduler_id
        ):  # an agent's `arena check`: shown, not kept in the run's log
            if on_event is not None:
                on_event(None, event)
            return
        emit(job_id, event)

    async def runner(job: Job, slot: Slot) -> Any:
        request = job.payload
        evaluator = await pool.get(
            slot
        )  # the device is probed off the loop (the app's, during `arena run`)
        if isinstance(request, BatchRequest):
            return await batch_runner(request, slot, evaluator)

        def forward(event: events.Event) -> None:
            if request.job_id is not None:
                emit(request.job_id, event)
            if request.on_event is not None:
                request.on_event(event)

        # An `arena check` (no store job) draws a fresh seed; a job keeps its own for replays.
        seed = (
            store.set_job_seed(request.job_id, secrets.randbits(63))
            if request.job_id is not None
            else None
        )
        try:
            result = await evaluator.aevaluate(
                request.task,
                request.candidate,
                seed,
                on_event=forward,
                visible_only=request.visible_only,
                profile=spec.profile,
            )
        except HarnessError as exc:
            pool.drop(slot)
            raise InfrastructureFault(str(exc)) from exc
        except asyncio.CancelledError:
            pool.drop(slot)  # stops the harness and everything it started
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
            on_scheduler_event(
                events.JobStateChanged(
                    job_id=key, state="done", device=slot.device, slot=slot.index, attempt=1
                )
            )

        try:
            # Each result is recorded the moment it is known: an interrupted batch keeps what it finished.
            results = await evaluator.aevaluate_batch(
                request.task,
                list(request.candidates),
                request.seed,
                on_event=forward,
                profile=spec.profile,
                on_result=recorded,
            )
        except HarnessError as exc:
            pool.drop(slot)
            raise InfrastructureFault(str(exc)) from exc
        except asyncio.CancelledError:
            pool.drop(slot)
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
            # (core/orchestration/ray_executor.py): a batch would pin a task's candidates to one node.
            if (
                len(members) == 1
                or planned[members[0]].task.world_size is not None
                or pending[members[0]].device_id.startswith("ray:")
            ):
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
        from core.orchestration import ray_executor

        capacities = ray_executor.capacities(devices, spec.ray)
        if executor_factory is local_executor:
            executor_factory = ray_executor.with_ray(None, spec.ray)
    slots = slots_for(devices, cpu_slots=spec.cpu_slots, capacities=capacities)
    attempt_tasks: list[asyncio.Task] = []
    extra: dict[str, asyncio.Future] = {}  # jobs a RunControl added while the run executes
    try:
        async with Scheduler(
            slots, runner, max_retries=spec.max_retries, on_event=on_scheduler_event
        ) as scheduler:
            futures = {}
            alone, together = batches(list(pending))
            for key in alone:
                job = pending[key]
                job_ids[key] = job.id
                futures[key] = scheduler.submit(
                    Job(
                        id=key,
                        devices=(job.device_id,),
                        payload=EvalRequest(planned[key].task, planned[key].candidate, job.id),
                    )
                )
            for (
                group,
                seed,
            ) in together:  # many candidates of one task: one batch (core/evaluation/batch.py)
                first = pending[group[0]]
                payload = BatchRequest(
                    planned[group[0]].task,
                    tuple(planned[k].candidate for k in group),
                    tuple(pending[k].id for k in group),
                    seed,
                    tuple(group),
                )
                batch_members[f"batch|{group[0]}"] = tuple(group)
                batch = scheduler.submit(
                    Job(id=f"batch|{group[0]}", devices=(first.device_id,), payload=payload)
                )
                for i, key in enumerate(group):
                    job_ids[key] = pending[key].id
                    futures[key] = asyncio.ensure_future(member_of(batch, i))
            futures = {key: futures[key] for key in pending}  # the run's order
            limit = asyncio.Semaphore(spec.parallelism or max(1, len(spec.agents)))
            for a in open_attempts:
                context = _AttemptContext(
                    store, scheduler, job_ids, checks, folders, root, on_event, on_attempt, outcome
                )
                attempt_tasks.append(
                    asyncio.ensure_future(
                        _attempt(a, attempt_ids[a.key], rows[a.key], run_id, context, limit)
                    )
                )
            if control is not None:
                tasks_by_id = {t.id: t for t in select_tasks(spec.tasks, spec.tasks_dir)}

                def submit(
                    key: str, job_id: int, task_id: str, candidate: Path, device: str
                ) -> None:
                    task = tasks_by_id.get(task_id) or find_task(task_id, spec.tasks_dir)
                    job_ids[key] = job_id
                    extra[key] = scheduler.submit(
                        Job(id=key, devices=(device,), payload=EvalRequest(task, candidate, job_id))
                    )

                control._live = _Live(
                    run_id,
                    frozenset(devices),
                    {attempt_ids[a.key]: t for a, t in zip(open_attempts, attempt_tasks)},
                    submit,
                )
            for key, future in futures.items():
                try:
                    outcome.results.append(await future)
                except Exception as exc:  # noqa: BLE001 - JobFailed: recorded, the run goes on
                    outcome.failed_jobs.append(f"{key}: {exc}")
                    store.set_job_state(job_ids[key], "failed")
            if attempt_tasks:
                await asyncio.gather(
                    *attempt_tasks, return_exceptions=True
                )  # one attempt cancelled alone ends as `cancelled`
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
        pool.close()
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


async def _attempt(
    planned: PlannedAttempt,
    attempt_id: str,
    row: Any,
    run_id: str,
    ctx: _AttemptContext,
    limit: asyncio.Semaphore,
) -> None:
    """One attempt through the runner, recorded at each step: started (transcript cleared),
    agent ended (stop reason, usage, the snapshot: state `evaluating`), final result (`done`).
    An attempt whose agent had ended before an interruption is only evaluated again."""
    from core.agents import adapter as make_adapter
    from core.agents.runner import Attempt, evaluate_submission, run_agent, snapshot
    from core.agents.workspace import make_workspace

    store = ctx.store
    attempt = Attempt(
        attempt_id,
        run_id,
        planned.agent,
        planned.task,
        planned.device,
        planned.variant,
        planned.iteration,
    )
    final_key = keys.final_key(planned.key)

    def report(
        state: str,
        stop_reason: str | None = None,
        result: Result | None = None,
        error: str | None = None,
        outcome: str | None = None,
        outcome_reason: str | None = None,
    ) -> AttemptReport:
        rep = AttemptReport(
            attempt_id,
            planned.agent.name,
            planned.task.id,
            planned.device,
            planned.variant.name,
            state,
            stop_reason,
            result,
            error,
            outcome,
            outcome_reason,
        )
        if ctx.on_attempt is not None:
            ctx.on_attempt(rep)
        return rep

    async def evaluate(
        candidate: Path, visible_only: bool, on_event: Callable[[events.Event], None] | None
    ) -> Result:
        if visible_only:
            job_id, scheduler_id = None, keys.check_key(attempt_id, next(ctx.checks))
        else:
            job_id = store.add_job(
                run_id,
                task_id=planned.task.id,
                device_id=planned.device,
                candidate=candidate,
                family=planned.task.family,
                agent=planned.agent.name,
                variant=planned.variant.name,
                key=final_key,
            )
            scheduler_id = final_key
            ctx.job_ids[scheduler_id] = job_id
        future = ctx.scheduler.submit(
            Job(
                id=scheduler_id,
                devices=(planned.device,),
                payload=EvalRequest(planned.task, candidate, job_id, visible_only, on_event),
            )
        )
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
            if (
                row.state not in ("evaluating", "failed")
                or submission is None
                or not submission.is_file()
            ):
                folder = ctx.folders / attempt.slug
                store.start_attempt(attempt_id, folder)
                report("running")
                workspace = make_workspace(
                    folder,
                    planned.task,
                    planned.device,
                    planned.variant,
                    planned.agent.budget_s,
                    planned.agent.max_cost_usd,
                    planned.agent.max_tokens,
                )
                agent = await run_agent(
                    attempt,
                    make_adapter(planned.agent.kind),
                    workspace,
                    evaluate,
                    on_transcript,
                    masked=(ctx.eval_root, planned.task.path.parent.parent),
                )
                submission = snapshot(workspace, "final")
                stop_reason = agent.stop_reason
                outcome, outcome_reason = agent.outcome, agent.verdict.reason
                store.end_agent(
                    attempt_id,
                    stop_reason=agent.stop_reason,
                    exit_status=agent.exit_status,
                    submission=submission,
                    checks=agent.checks,
                    seconds=agent.seconds,
                    usage=agent.usage.to_json(),
                    sandbox=agent.sandbox_status,
                    error=agent.error,
                    outcome=outcome,
                    outcome_reason=outcome_reason,
                )
            else:
                store.set_attempt_state(attempt_id, "evaluating")
                # Interrupted between the final result and the attempt's last update: the result stands.
                kept = next(
                    (
                        r
                        for r in store.results(run_id)
                        if store.get_job(r.job_id).key == final_key
                        and r.status != "infrastructure_error"
                    ),
                    None,
                )
            if (
                outcome in FAILURES
            ):  # nothing of the agent's to score: the starter left there is not its work
                store.set_attempt_state(attempt_id, "done")
                ctx.outcome.attempts.append(
                    report("done", stop_reason, outcome=outcome, outcome_reason=outcome_reason)
                )
                return
            result = (
                kept.to_result()
                if kept
                else await evaluate_submission(attempt, submission, evaluate)
            )
            job_id = store.add_job(
                run_id,
                task_id=planned.task.id,
                device_id=planned.device,
                candidate=submission,
                family=planned.task.family,
                agent=planned.agent.name,
                variant=planned.variant.name,
                key=final_key,
            )
            store.record_result(
                job_id, result
            )  # again where the scheduler did: the same result; once where no harness ran (no `run`)
            state = "failed" if result.status == "infrastructure_error" else "done"
            store.set_attempt_state(attempt_id, state, job_id=job_id)
            ctx.outcome.attempts.append(
                report(state, stop_reason, result, outcome=outcome, outcome_reason=outcome_reason)
            )
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
            ctx.outcome.attempts.append(
                report("failed", stop_reason, error=f"{type(exc).__name__}: {exc}")
            )


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
