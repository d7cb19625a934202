"""Batches: many candidates of one task evaluated in one harness job (docs/evaluation.md,
"Batches"). What does not depend on the candidate is shared (the trusted worker, the reference
outputs per workload and seed, the warm baseline); each candidate keeps its own worker, stages,
verdict and integrity checks (core/harness/batch.py).

Every candidate of a batch runs on the same workloads and seeds (one secret seed for the batch),
so a GRPO group is compared on equal terms. A harness that dies mid-batch costs only the
candidate it was on: that one is evaluated alone (its fault, its retry), the rest as a new
batch.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from core.evaluation import scan
from core.evaluation.executors import HarnessError
from core.evaluation.profiles import Profile
from core.model import candidate as candidate_model
from core.model import events
from core.model.result import Result
from core.model.task import Limits, Task

if TYPE_CHECKING:
    from core.evaluation.evaluator import Evaluator, OnEvent

GPU_CACHE_BYTES = 16 << 30  # reference inputs and outputs kept in the trusted worker, on a GPU
CPU_CACHE_BYTES = 1 << 30  # ... on the CPU device (and sim:, whose correctness runs on the CPU)


CONCURRENCY_ENV = (
    "ARENA_BATCH_CONCURRENCY"  # slots of a batch's untimed stages: a number, or `auto`
)


def concurrency(evaluator: Evaluator) -> int:
    """How many of a batch's candidates run their untimed stages (compile, correctness,
    generalization; on a `sim:` device the prediction too) at once; timing stays one at a time
    (core/harness/concurrent.py). 0 means `auto`: the harness takes half its host's cores on a
    GPU, every core on the CPU and `sim:` devices (there each candidate then runs on one
    worker instead of two, and the batch keeps both cores busy: docs/performance.md), at most
    8. Only where candidates cannot write the task or engine files (sandboxed, or unsandboxed
    as root: uid 65534), since concurrent candidates make such a change no single candidate's.
    `ARENA_BATCH_CONCURRENCY` (a number, or `auto`) overrides the choice."""
    asked = os.environ.get(CONCURRENCY_ENV, "").strip().lower()
    if asked:
        if asked == "auto":
            return 0
        if not asked.isdigit() or int(asked) < 1:
            raise ValueError(
                f"{CONCURRENCY_ENV}={asked!r}: use a positive number of slots, or `auto`"
            )
        return int(asked)
    sandbox = evaluator.sandbox_record() or {}
    protected = sandbox.get("mode") not in (None, "unsandboxed") or (
        hasattr(os, "geteuid") and os.geteuid() == 0
    )
    return 0 if protected else 1


def candidate_files(path: Path) -> dict[str, str]:
    """The candidate module and its sibling native sources (.cu, .hip, ...), by file name."""
    files = candidate_model.candidate_files(path)
    return {p.name: p.read_text(errors="replace") for p in files}


def split_evaluations(seen: list[events.Event]) -> list[list[events.Event]]:
    """A batch's event stream cut into one list per candidate (each ends at evaluation_finished)."""
    parts: list[list[events.Event]] = [[]]
    for event in seen:
        parts[-1].append(event)
        if isinstance(event, events.EvaluationFinished):
            parts.append([])
    return [p for p in parts if p]


OnResult = Callable[[int, Result], None]


async def evaluate_batch(
    evaluator: Evaluator,
    task: Task,
    paths: list[Path],
    seed: int | None,
    on_event: OnEvent | None,
    limits: Limits | None,
    performance: bool,
    visible_only: bool,
    profile: Profile | str | None,
    on_result: OnResult | None = None,
    first: int = 0,
) -> list[Result]:
    """`on_result(k, result)` is called as soon as candidate k's result is known (a run records
    it then, so an interrupted batch keeps what it finished); `first` numbers them from there."""
    from core.evaluation.adapter import adapted
    from core.evaluation.evaluator import check_candidate
    from core.evaluation.heartbeat import Pulse
    from core.evaluation.job import build_job, job_deadline_s, task_dtypes
    from core.evaluation.verdict import assemble

    def done(k: int, result: Result) -> Result:
        if on_result is not None:
            on_result(first + k, result)
        return result

    limits = limits or task.limits
    seed = seed if seed is not None else secrets.randbits(63)
    single = dict(
        seed=seed,
        on_event=on_event,
        limits=limits,
        performance=performance,
        visible_only=visible_only,
        profile=profile,
    )
    if (
        len(paths) == 1
        or task.world_size is not None
        or not getattr(evaluator.executor, "batches", False)
    ):
        return [done(k, await evaluator.aevaluate(task, p, **single)) for k, p in enumerate(paths)]  # type: ignore[arg-type]
    shas = [check_candidate(p, task) for p in paths]
    notes = [
        scan.scan_candidate(p, task_dtypes(task)) for p in paths
    ]  # before any runs: one may rewrite another's file
    job_dir = evaluator._job_dir()
    members = [
        {"entry": p.name, "sources": candidate_files(adapted(task, p, job_dir / f"member-{k}"))}
        for k, p in enumerate(paths)
    ]  # a KernelBench ModelNew file, say, with its task's adapter.py (core/evaluation/adapter.py)
    staged = evaluator.stage_task(
        task
    )  # judged with the task's files as staged before any candidate ran
    job = build_job(
        task,
        job_dir / "batch",
        evaluator.info,
        evaluator.executor.torch_device(),
        seed,
        job_dir,
        limits,
        evaluator.graphs,
        evaluator.sync_each_call,
        evaluator.timing,
        performance=performance,
        visible_only=visible_only,
        profile=profile,
        files=staged.named(task.path.resolve()),
        baseline_impl=evaluator.baseline_impl,
    )
    job["batch"] = members
    job["concurrency"] = concurrency(evaluator)
    # Keep CPU candidates' workers for their timing too (core/harness/quiesce.py: a stopped
    # process is the whole proof there, no device queue), unless ARENA_QUIESCE_CPU=0.
    job["quiesce_cpu"] = os.environ.get("ARENA_QUIESCE_CPU", "1") != "0"
    job["reference_cache_bytes"] = (
        CPU_CACHE_BYTES if evaluator.info.type in ("cpu", "sim") else GPU_CACHE_BYTES
    )
    seen: list[events.Event] = []
    results: list[Result] = []

    # Task and engine files are compared with their staged bytes after each member finishes, so a
    # change is the member's that just ran (members run one after another): its flag, no neighbour's.
    watched = (("task_files_modified", staged), ("engine_data_modified", evaluator.engine_data))
    on_disk = {what: files.on_disk() for what, files in watched}

    def judged(result: Result) -> Result:
        result.sandbox = evaluator.sandbox_record()
        for what, files in watched:
            now = files.on_disk()
            evaluator._flag_changes(
                result, what, [p for p, data in now.items() if data != on_disk[what][p]]
            )
            on_disk[what] = now
        return result

    def collect(event: events.Event) -> None:
        seen.append(event)
        if on_event is not None:
            on_event(event)
        if isinstance(event, events.EvaluationFinished) and len(results) < len(paths):
            k = len(results)
            part = split_evaluations(seen)[-1]
            seen.clear()
            results.append(
                done(k, judged(assemble(task, job, evaluator.info, shas[k], part, notes[k])))
            )

    try:
        # a heartbeat while a member's stage runs, to the caller only (never among its events)
        pulse = Pulse(job, collect, on_beat=on_event or (lambda event: None))
        await pulse.around(
            evaluator.executor.run(job, job_dir, job_deadline_s(job) * len(paths), pulse)
        )
        broken: HarnessError | None = None
    except HarnessError as exc:
        broken = exc
    if broken is None and len(results) == len(paths):
        return results
    # The harness died on candidate k: k alone (a fault it causes again is its own), the rest as a batch.
    k = len(results)
    from core.evaluation.verdict import infrastructure_result

    try:
        alone = await evaluator.aevaluate(task, paths[k], **single)  # type: ignore[arg-type]
    except HarnessError as exc:
        alone = infrastructure_result(task, evaluator.info, shas[k], str(exc), job.get("profile"))
    results.append(done(k, alone))
    if k + 1 < len(paths):
        results += await evaluate_batch(
            evaluator,
            task,
            paths[k + 1 :],
            seed,
            on_event,
            limits,
            performance,
            visible_only,
            profile,
            on_result,
            first + k + 1,
        )
    return results
