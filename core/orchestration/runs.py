"""Runs: the run goes through the scheduler, every result lands in the store before it is
shown, and an interrupted run resumes with nothing lost and nothing done twice. The run file
is read by core.orchestration.runfile, expanded into jobs and attempts by
core.orchestration.planning; `RunControl` (cancel, re-run, re-queue from a front end) is in
core.orchestration.control, one attempt in core.orchestration.attempt, what a run reports in
core.orchestration.reports (all importable from here).

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
from dataclasses import replace
from pathlib import Path
from typing import Any

from core.evaluation.evaluator import BadCandidate, Evaluator, check_candidate
from core.evaluation.executors import Executor, LocalExecutor
from core.model import events, keys
from core.model.result import Result
from core.model.scratch import owned_tempdir, remove_tree
from core.orchestration.attempt import AttemptContext, run_attempt
from core.orchestration.control import LiveRun, Queued, RunControl
from core.orchestration.lease import owned
from core.orchestration.planning import plan, plan_attempts, select_tasks
from core.orchestration.pool import EvaluatorPool, ExecutorFactory
from core.orchestration.reports import (
    AttemptReport,
    BatchRequest,
    EvalRequest,
    OnAttempt,
    OnRunEvent,
    RunOutcome,
)
from core.orchestration.runfile import RunSpec
from core.orchestration.scheduler import (
    Job,
    Scheduler,
    Slot,
    slots_for,
)
from core.store.db import Store
from core.store.errors import StorageFault, StoreError
from core.tasks.discovery import find_task


def local_executor(device_id: str, root: Path) -> Executor:
    return LocalExecutor(device_id, root)


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
    seed goes to the harness only; no event, result or workspace carries it.

    One process at a time executes a run: this one takes its lease first (RunOwnedError when
    another live process holds it) and renews it while it runs. The first write the store's
    disk refuses (full, read-only) stops the run like a cancellation, keeping every result
    committed before it, and is raised as that StorageFault: the run stays resumable
    (core/orchestration/lease.py)."""
    return await owned(
        store,
        run_id,
        lambda: _execute(
            store, run_id, spec, executor_factory, on_event, on_attempt, attempts_root, control
        ),
    )


async def _execute(
    store: Store,
    run_id: str,
    spec: RunSpec,
    executor_factory: ExecutorFactory,
    on_event: OnRunEvent | None,
    on_attempt: OnAttempt | None,
    attempts_root: Path | None,
    control: RunControl | None,
) -> RunOutcome:
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
    folders = attempts_root or store.path.parent / "attempts" / run_id
    job_ids: dict[str, int] = {}
    checks = itertools.count(1)

    def emit(job_id: int | None, event: events.Event) -> None:
        # A refused write stops the run (the store told `owned`): the log loses this event, the
        # front end still hears it. Results are never swallowed so: their jobs stay pending.
        # Heartbeats are progress while waiting, not history: never stored.
        if not isinstance(event, events.Heartbeat):
            with contextlib.suppress(StorageFault):
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
            with contextlib.suppress(StorageFault):  # as in emit
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
        with pool.guarded(slot):
            result = await evaluator.aevaluate(
                request.task,
                request.candidate,
                seed,
                on_event=forward,
                visible_only=request.visible_only,
                profile=spec.profile,
            )
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

        with pool.guarded(slot):
            # Each result is recorded the moment it is known: an interrupted batch keeps what it finished.
            results = await evaluator.aevaluate_batch(
                request.task,
                list(request.candidates),
                request.seed,
                on_event=forward,
                profile=spec.profile,
                on_result=recorded,
            )
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
                check_candidate(planned[key].candidate, planned[key].task)
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
    root = owned_tempdir("arena-run-")  # removed by the next start if this process is killed
    pool = EvaluatorPool(  # each slot's folder under root
        executor_factory, lambda: root, baseline_impl=spec.baseline_impl
    )
    capacities: dict[str, int] = {}
    if spec.ray or any(d.startswith("ray:") for d in devices):  # slots from the cluster's resources
        from core.orchestration import ray_executor

        capacities = ray_executor.capacities(devices, spec.ray)
        if executor_factory is local_executor:
            executor_factory = ray_executor.with_ray(None, spec.ray)
    slots = slots_for(devices, cpu_slots=spec.cpu_slots, capacities=capacities)
    attempt_tasks: list[asyncio.Task] = []
    futures: dict[str, asyncio.Future] = {}  # the run's jobs (a batch's members each its own)
    extra: dict[str, asyncio.Future] = {}  # jobs a RunControl added while the run executes
    try:
        async with Scheduler(
            slots, runner, max_retries=spec.max_retries, on_event=on_scheduler_event
        ) as scheduler:
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
                context = AttemptContext(
                    store, scheduler, job_ids, checks, folders, root, on_event, on_attempt, outcome
                )
                attempt_tasks.append(
                    asyncio.ensure_future(
                        run_attempt(a, attempt_ids[a.key], rows[a.key], run_id, context, limit)
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

                control._live = LiveRun(
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
    except BaseException:  # cancelled (Ctrl-C, a signal, a storage fault) or a bug: stop it all
        outcome.interrupted = True
        for future in [*futures.values(), *extra.values(), *attempt_tasks]:
            if future.done() and not future.cancelled():
                future.exception()  # seen: the run stops for one reason, raised below
            future.cancel()
        if attempt_tasks:
            await asyncio.wait(attempt_tasks)  # each stops its agent and records it cancelled
        with contextlib.suppress(StoreError):  # a full disk: the run shows `stale` once we exit
            store.finish_run(run_id, "interrupted")
        raise
    finally:
        if control is not None:
            control._live = None
        await pool.aclose()  # every harness ends here (in threads: the loop may be the app's)
        await asyncio.to_thread(remove_tree, root)
    store.finish_run(run_id, "finished")
    return outcome


__all__ = [
    "AttemptReport",
    "BatchRequest",
    "EvalRequest",
    "OnAttempt",
    "OnRunEvent",
    "Queued",
    "RunControl",
    "RunOutcome",
    "execute",
    "local_executor",
]
