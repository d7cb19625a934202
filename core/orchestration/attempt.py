"""One agent attempt of a run, recorded at each step: its workspace, the agent through
core.agents.runner, its `arena check`s and final evaluation on the run's scheduler, and the
attempt's state in the store (started, agent ended, final result, cancelled, failed)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.model import events, keys
from core.model.outcome import FAILURES
from core.model.result import Result
from core.orchestration.planning import PlannedAttempt
from core.orchestration.reports import AttemptReport, EvalRequest, OnAttempt, OnRunEvent, RunOutcome
from core.orchestration.scheduler import Job, JobFailed, Scheduler
from core.store.db import Store


@dataclass
class AttemptContext:
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


async def run_attempt(
    planned: PlannedAttempt,
    attempt_id: str,
    row: Any,
    run_id: str,
    ctx: AttemptContext,
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

    def add_final_job(candidate: Path) -> int:
        """The store job of the attempt's final evaluation (added again on a resume: the same key)."""
        return store.add_job(
            run_id,
            task_id=planned.task.id,
            device_id=planned.device,
            candidate=candidate,
            family=planned.task.family,
            agent=planned.agent.name,
            variant=planned.variant.name,
            key=final_key,
        )

    async def evaluate(
        candidate: Path, visible_only: bool, on_event: Callable[[events.Event], None] | None
    ) -> Result:
        if visible_only:
            job_id, scheduler_id = None, keys.check_key(attempt_id, next(ctx.checks))
        else:
            job_id = add_final_job(candidate)
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
            job_id = add_final_job(submission)
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
