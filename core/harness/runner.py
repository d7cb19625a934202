"""One evaluation, stage by stage, each stage gating the next:
compile → correctness (visible workloads) → generalization (hidden) → performance.

Runs in the harness parent. It never touches the GPU itself: the workers do, so the parent can
keep forking fresh workers for later evaluations. Everything the candidate's worker sends is
checked in this process before it is believed (sizes, types, which calls it kept); what the harness
proves or suspects is emitted as `finding` events (docs/integrity.md).

This module holds the evaluation's lifecycle (its workers, its stages in order, the checks
after them) and `run_job`; the stages and the calls they make are in calls.py, fan_out.py,
correctness.py and performance.py, failures in faults.py, versions and hashes in provenance.py.
The names other modules import from here stay importable here.
"""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

from core.harness import jit_cache, trace
from core.harness.baseline_rounds import BaselineWorkers
from core.harness.calls import Emit, _workload
from core.harness.correctness import CorrectnessStages, verdict
from core.harness.fan_out import evaluation_cores
from core.harness.faults import StageFailed, await_trusted, cannot_evaluate
from core.harness.performance import PerformanceStage, _times
from core.harness.provenance import HARNESS_DIR, harness_hashes, task_hashes, versions
from core.harness.workers import (
    TaskFileChanged,
    Worker,
    WorkerDied,
    WorkerTimeout,
    candidate_view,
    trusted_main,
)
from core.harness.zygote import Zygote, ZygoteError

__all__ = [
    "Emit",
    "Evaluation",
    "JobRun",
    "StageFailed",
    "_times",
    "_workload",
    "await_trusted",
    "cannot_evaluate",
    "evaluation_cores",
    "harness_hashes",
    "run_job",
    "task_hashes",
    "verdict",
    "versions",
]


class JobRun:
    """What an evaluation and a batch start from: the job, where its events go, the file
    descriptors a forked worker closes, and the zygote (forked here when none was given)."""

    def __init__(
        self,
        job: dict[str, Any],
        emit: Emit,
        close_fds: tuple[int, ...],
        zygote: Zygote | None = None,
    ):
        self.job, self.emit, self.close_fds = job, emit, close_fds
        self.own_zygote = zygote is None
        self.zygote = zygote
        self._setup()

    def _setup(self) -> None:
        """The subclass's own state, once the job's is set."""


class Evaluation(JobRun, CorrectnessStages, PerformanceStage):
    """One candidate's evaluation: its workers, its stages in order (`_compile`,
    `_correctness`, `_generalization`: correctness.py, `_performance`: performance.py), and
    what it checks after them. Batches (batch.py, concurrent.py) and ranks (ranked.py)
    override the stages and the worker start-up."""

    def _setup(self) -> None:
        self.workdir = Path(self.job["workdir"])
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.candidate: Worker | None = None
        self.second: Worker | None = (
            None  # a second candidate worker, for stages of independent workloads (_fan_out)
        )
        self.trusted: Worker | None = None
        self.rng = (
            random.SystemRandom()
        )  # which timed calls are checked: never the candidate's to know
        self.tamper_seen: set[str] = set()
        self.stage = "compile"
        self.stage_limit = 0.0
        self.key_prefix = (
            ""  # of the trusted worker's per-candidate state (a batch shares one trusted worker)
        )
        self.keep_pid: int | None = None  # a worker the cleanup spares (concurrent.py keeps it)
        # The compile's first call draws its inputs in the candidate's process: from a seed no
        # check uses (the checks' inputs are the trusted worker's to draw: shared_check.py).
        self.compile_seed = self.rng.randrange(1 << 31)
        self.no_share: dict[int, str] = {}  # pid of a candidate worker -> why it cannot map
        self.sharing_proven = False  # a worker mapped shared memory before candidate code ran
        self.mapped: dict[int, str] = {}  # freed in the trusted worker once its worker is dead
        # The baseline's worker (baseline_rounds.py): a batch's, or this evaluation's own,
        # forked as its correctness stages begin (_load_baseline).
        self.baselines: BaselineWorkers | None = None
        self.own_baselines = False
        self.tuned: dict[int, dict[str, list[int]]] = {}  # what its autotuners tried, per worker
        # Its files' digest: an identical earlier candidate's compiled kernels are its seed
        self.source_key = jit_cache.source_key(self.job["candidate"])
        self.isolation_note: str | None = None  # why its worker sees other evaluations' files

    # --- the lifecycle ----------------------------------------------------------------

    def run(self) -> None:
        started = time.monotonic()
        self.emit(
            {
                "type": "evaluation_started",
                "task_id": self.job["task_id"],
                "device": self.job["device"],
                "versions": versions(),
            }
        )
        status, fault = "passed", None
        harness_before = harness_hashes()
        task_before = task_hashes(
            Path(self.job["task_dir"]), sorted(self.job.get("task_files") or {})
        )
        try:
            for stage in ("compile", "correctness", "generalization", "performance"):
                ok, fault = self._stage(stage)
                if not ok:
                    status = "failed"
                    break
        finally:
            if status == "passed" and self.trusted in self._workers():
                self._keep_trusted_jit()  # its own trusted worker: what it compiled, kept
            alive = [worker for worker in self._workers() if worker is not None]
            own = (
                [w for w in (self.baselines.worker, self.baselines.pending) if w is not None]
                if self.own_baselines and self.baselines
                else []
            )
            with trace.span("end: kill workers"):
                for worker in [*alive, *own]:  # all at once, then each reaped
                    worker.signal_kill()
                for worker in alive:
                    worker.kill()
                if self.own_baselines and self.baselines is not None:
                    self.baselines.close()
            self._forget_regions(alive)
            with trace.span("end: leftovers and hashes"):
                self._after(harness_before, task_before)
            self.emit(
                {
                    "type": "evaluation_finished",
                    "status": status,
                    "fault": fault,
                    "seconds": time.monotonic() - started,
                    "autotune": self._autotune_summary(),
                }
            )

    def _workers(self) -> list[Worker | None]:
        return [self.candidate, self.second, self.trusted]

    def _correctness(self, deadline: float) -> dict[str, Any]:
        self._load_baseline()  # it loads while the candidate's correctness runs
        return super()._correctness(deadline)

    def _keep_trusted_jit(self) -> None:
        """What the trusted worker compiled (the baseline's kernels, their launchers) into the
        parent's store, for every later trusted worker (jit_cache.py). Asked only of a worker
        whose channel is clean (after a passed evaluation, a batch's drain); one that fails to
        answer gives nothing."""
        keep_trusted_jit(self.trusted)
        if self.own_baselines and self.baselines is not None:
            keep_trusted_jit(self.baselines.worker)  # the baseline's kernels, too

    def _kill_candidate(self) -> None:
        for worker in (self.candidate, self.second):
            if worker is not None:
                self._end_worker(worker)

    def _after(self, harness_before: dict[str, str], task_before: dict[str, str | None]) -> None:
        """What the candidate may have left behind: processes, changed files."""
        self.stage = "cleanup"
        if self.zygote is not None:
            try:
                escaped = self.zygote.cleanup(self.keep_pid)
            except ZygoteError as exc:
                escaped = []
                self._finding(
                    "leftover_processes", f"could not check for leftover processes: {exc}", False
                )
            if escaped:
                shown = "; ".join(f"{p['pid']} `{p['command']}`" for p in escaped[:5])
                # Proven: the worker's own children (a compiler, torch.compile's worker pool)
                # stay in its process group; only a process that detached itself is here.
                self._finding(
                    "leftover_processes",
                    f"{len(escaped)} process(es) the candidate started had left its process group and were still running; killed: {shown}",
                    True,
                )
            if self.own_zygote:
                self.zygote.close()
        now = task_hashes(Path(self.job["task_dir"]), sorted(task_before))
        changed = sorted(
            name for name, sha in task_before.items() if sha is not None and now.get(name) != sha
        )
        if changed:
            self._finding(
                "task_files_modified",
                f"{', '.join(changed)} of the task folder changed on disk during the evaluation (the verdict used the files as "
                "they were when the job was built; restore the folder before the next job)",
                True,
            )
        after = harness_hashes()
        changed = sorted(
            name
            for name in set(harness_before) | set(after)
            if harness_before.get(name) != after.get(name)
        )
        if changed:
            self._finding(
                "harness_files_modified",
                f"{', '.join(changed)} in {HARNESS_DIR} changed on disk during the evaluation",
                True,
            )

    def _stage(self, stage: str) -> tuple[bool, str | None]:
        self.stage = stage
        limit = self.job["limits"][f"{'correctness' if stage == 'generalization' else stage}_s"]
        self.stage_limit = float(limit)
        deadline = time.monotonic() + limit
        self.emit({"type": "stage_started", "stage": stage})
        t0 = time.monotonic()
        try:
            details = getattr(self, f"_{stage}")(deadline)
        except StageFailed as failed:
            if failed.fault == "candidate" and failed.status in ("timeout", "crashed"):
                self._kill_candidate()  # nothing it started outlives the stage
            self.emit(
                {
                    "type": "stage_finished",
                    "stage": stage,
                    "status": failed.status,
                    "message": failed.message,
                    "fault": failed.fault,
                    "seconds": time.monotonic() - t0,
                    "log": self._log("candidate.log") if stage == "compile" else "",
                }
            )
            return False, failed.fault
        self.emit(
            {
                "type": "stage_finished",
                "stage": stage,
                "status": "passed",
                "seconds": time.monotonic() - t0,
                **details,
            }
        )
        return True, None

    def _start_workers(self, deadline: float) -> None:
        """The trusted worker has read the reference and the baseline (hash-checked) before
        any candidate code runs, so a candidate that rewrites them on disk changes nothing this
        evaluation computes. While it loads, the candidate's worker (no candidate code yet)
        starts its device: on a GPU both CUDA contexts are made at once, not one after the
        other."""
        with trace.span("start: fork trusted"):
            pending = Worker.fork("trusted", trusted_main, self.job)
        try:
            view = candidate_view(self.job)
            if self.zygote is None:
                self.zygote = Zygote()
            with trace.span("start: spawn candidate"):
                jit_cache.STORE.seed(self.job["workdir"], self.source_key)
                self.candidate = Worker.spawn("candidate", self.zygote, view)
                self.candidate.send({"op": "warm"})
        except (TaskFileChanged, ZygoteError, WorkerDied) as exc:
            pending.kill()
            raise StageFailed(
                "error", f"could not start the candidate's worker: {exc}", "infrastructure"
            ) from None
        except BaseException:
            pending.kill()
            raise
        with trace.span("start: trusted ready"):
            self.trusted = await_trusted(pending, self._remaining(deadline))
        with trace.span("start: candidate warm"):
            reply, _ = self._candidate_recv(self.candidate, deadline)
        if not reply.get("ok"):
            raise StageFailed(
                "error",
                f"the candidate's worker could not start its device: {reply.get('error')}",
                "infrastructure",
            )
        if reply.get("isolation"):  # it sees what other evaluations left (isolation.py)
            self.isolation_note = (
                f"not isolated from other evaluations: {str(reply['isolation'])[:200]}"
            )

    def _compile(self, deadline: float) -> dict[str, Any]:
        self._start_workers(deadline)
        with trace.span("start: prove sharing"):
            self._prove_sharing(deadline)
        first = self.job["stages"]["correctness"][0]
        reply, _ = self._candidate_call(
            {"op": "compile", "workload": _workload(first), "seed": self.compile_seed}, deadline
        )
        if not reply.get("ok"):
            cannot_evaluate(reply)
            raise StageFailed(
                "failed", f"{reply.get('error')}\n{reply.get('traceback', '')}".strip()
            )
        with trace.span("compile: harvest"):  # for a later identical source (jit_cache.py)
            jit_cache.STORE.harvest(self.job["workdir"], self.source_key)
        notes = [n for n in (reply.get("first_call_error"), self.isolation_note) if n]
        return {"log": self._log("candidate.log"), "note": "; ".join(notes) or None}


def keep_trusted_jit(trusted: Worker | None) -> None:
    """`Evaluation._keep_trusted_jit` for any trusted worker (a batch's, a slot's)."""
    if trusted is None or trusted.returncode is not None:
        return
    try:
        with trace.span("end: keep the baseline's kernels"):
            reply, payload = trusted.request({"op": "jit"}, 30.0)
    except (WorkerDied, WorkerTimeout):
        return
    jit_cache.STORE.add_trusted(jit_cache.unpack(reply, payload))


def run_job(
    job: dict[str, Any], emit: Emit, close_fds: tuple[int, ...] = (), zygote: Zygote | None = None
) -> None:
    """Evaluate one job. `zygote`, forked before the job was read, forks the candidate's worker;
    without one, a zygote is forked now (a copy of this process, which holds the job). A job
    with a `world_size` runs on that many ranks (ranked.py)."""
    if job.get("world_size"):
        from core.harness.ranked import RankedEvaluation

        RankedEvaluation(job, emit, close_fds, zygote).run()
    elif job.get("batch"):
        from core.harness.batch import BatchEvaluation
        from core.harness.concurrent import ConcurrentBatch, slot_count

        concurrent = (
            job.get("concurrency", 1) != 1 and slot_count(job) > 1
        )  # untimed stages K at a time
        (ConcurrentBatch if concurrent else BatchEvaluation)(job, emit, close_fds, zygote).run()
    else:
        Evaluation(job, emit, close_fds, zygote).run()
