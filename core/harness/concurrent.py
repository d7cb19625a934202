"""A concurrent batch: the untimed stages of several candidates at once, their timing alone.

Only the performance stage needs the device to itself. So a batch with `concurrency: K`
(K > 1; the engine picks it from the host's cores, core/evaluation/batch.py) runs in two phases:

1. **Untimed, K at a time.** K slots, each with its own zygote (forked by the harness's zygote,
   so it too never saw the job) and its own trusted worker, take the batch's candidates in
   order and run compile → correctness → generalization, one candidate per slot at a time,
   exactly as a one-at-a-time batch does (batch.py's `_Member`). When a candidate's untimed
   stages end, every process of it is killed and its slot's zygote buries what it left
   behind (`leftover_processes` is the candidate's own: its slot ran nothing else) — except,
   where the device can prove it idle, its worker (below).
2. **Timed, one at a time, nothing else running.** Once every slot is idle, each candidate
   that passed is timed, interleaved with its slot's warm baseline, as before, with no other
   candidate process able to run or to have GPU work queued:
   - **kept worker** (quiesce.py): where the CUDA driver's checkpoint API can act on it (asked
     by the harness's helper unsandboxed, by the engine's host locker sandboxed), a
     passing candidate's worker was CUDA-locked when its untimed stages ended (the lock
     completes what it had submitted and blocks further calls), then SIGSTOPped; everything
     else of it was killed, and its zygote kept (the slot goes on with a new one). At its
     turn it is resumed and unlocked and timed without a recompile. Before and after each
     timing, every waiting worker must still be stopped: one that is not (a neighbour of the
     same uid resumed it, or killed it) is killed and its candidate timed in a fresh worker;
     if that happened during a timing, every waiting worker is killed and the candidate just
     timed is timed again, fresh. No driver call touches a stopped process.
   - **fresh worker** (where any step is unavailable or failed: a CPU device, no checkpoint
     API, a driver that refuses the process, no host locker or one that failed, a lock
     timeout): the worker was killed at the barrier (a killed
     process's CUDA context, and every kernel it queued, is torn down by the driver; a
     merely stopped one's queued kernels would still run) and the candidate gets a fresh
     worker (the same sandbox and limits; its kernels load from the JIT cache its untimed run
     filled), compiled again in a freshly written folder.
   The performance stage's message says which, and why (`fresh worker: <reason>`). The
   trusted workers of the other slots are ours and idle (they run only on request).

Every candidate keeps its own verdict and integrity checks: its stages, its trusted worker's
per-member state (the slot's worker served its checks and serves its timed-output checks),
its own findings. Each candidate's events are held back and emitted in the batch's order, one
evaluation after another, as a one-at-a-time batch emits them; `seconds` counts its own work
(both phases), not the time it waited for its turn.

Concurrency is for candidates that cannot write the task's or the engine's files (sandboxed,
or unsandboxed as root, where each worker is uid 65534): the harness's check of the task and
harness files after a candidate cannot tell which of K concurrent candidates changed one.
"""

from __future__ import annotations

import os
import secrets
import threading
import time
from pathlib import Path
from typing import Any

from core.harness.batch import BatchEvaluation, _Member
from core.harness.quiesce import Quiescer
from core.harness.runner import Emit, StageFailed, await_trusted, harness_hashes, task_hashes
from core.harness.workers import (
    TaskFileChanged,
    Worker,
    WorkerDied,
    candidate_view,
    trusted_main,
)
from core.harness.zygote import Zygote, ZygoteError

UNTIMED = ("compile", "correctness", "generalization")
MAX_SLOTS = 8


class _Slot(BatchEvaluation):
    """One slot of the untimed phase: its own zygote and trusted worker, one candidate at a time."""

    def __init__(self, job: dict[str, Any], zygote: Zygote, number: int):
        super().__init__(job, lambda event: None, (), zygote)
        # A slot always has its own zygote (never None, unlike a lone evaluation's).
        self.zygote: Zygote = zygote
        self.own_zygote = False
        self.number = number
        self.pending: Worker | None = None
        self.quiescer: Quiescer | None = None  # the batch's, set before the slot's thread starts

    def prefork(self) -> None:
        """Fork the trusted worker now, from the batch's main thread (forking from a thread of
        a threaded process is what `fork` handles worst); it loads while the others fork."""
        self.pending = Worker.fork("trusted", trusted_main, self.job)

    def trusted_worker(self, timeout: float) -> Worker:
        if self.pending is not None:
            self.trusted, self.pending = await_trusted(self.pending, timeout), None
            return self.trusted
        return super().trusted_worker(timeout)


class _Concurrent(_Member):
    """A batch member whose evaluation is split: `untimed()` in its slot's thread, `timed()` later."""

    def __init__(self, job: dict[str, Any], slot: _Slot, index: int, spec: dict[str, Any]):
        self.events: list[dict[str, Any]] = []
        super().__init__(job, self.events.append, (), slot.zygote, slot, index)  # type: ignore[arg-type]
        self.slot, self.spec = slot, spec
        self.status: str = "passed"
        self.fault: str | None = None
        self.spent = 0.0  # seconds of its own work, both phases
        self.kept = False  # its untimed worker waits, stopped and CUDA-locked, for its timing
        self.private_zygote = False  # the zygote that holds its kept worker is its own now
        self.timing_note = "fresh worker"  # which worker its timing ran in, and why
        self.mark = 0  # where its timed events start (a re-timing replaces them)

    def _refresh(self) -> None:
        if not self.private_zygote:
            self.zygote = self.slot.zygote  # the slot's zygote may have been replaced since

    def _hold(self) -> None:
        """Keep the untimed worker for the timing where the driver can prove it idle
        (quiesce.py): lock its CUDA, stop it; its other processes die in the cleanup that
        follows (`keep_pid`). Anything else: killed, as before, and timed in a fresh worker."""
        quiescer = self.slot.quiescer
        if self.status != "passed" or not self.job["stages"]["performance"]:
            return
        if quiescer is None or self.candidate is None:
            self.timing_note = "fresh worker: no quiescing for this batch"
            return
        if self.second is not None:
            self.second.kill()
            self.second = None
        why = quiescer.hold(self.candidate.pid)
        if why is None:
            self.kept, self.keep_pid, self.private_zygote = True, self.candidate.pid, True
        else:
            self.timing_note = f"fresh worker: {why}"

    def release(self) -> None:
        """Close the zygote that held its kept worker (and with it anything left below it)."""
        if self.private_zygote and self.zygote is not None:
            self.private_zygote = False
            self.zygote.close()

    def demote(self, why: str) -> None:
        """Its kept worker is no longer proven idle: killed; its timing runs in a fresh one."""
        if self.kept:
            self.kept, self.keep_pid = False, None
            self.timing_note = f"fresh worker: {why}"
            if self.candidate is not None:
                self.candidate.kill()
                self.candidate = None

    def untimed(self) -> None:
        t0 = time.monotonic()
        self._refresh()
        self.events.append(
            {
                "type": "evaluation_started",
                "task_id": self.job["task_id"],
                "device": self.job["device"],
                "versions": _versions(),
                "member": self.index,
            }
        )
        harness_before = harness_hashes()
        task_before = task_hashes(
            Path(self.job["task_dir"]), sorted(self.job.get("task_files") or {})
        )
        try:
            for stage in UNTIMED:
                ok, fault = self._stage(stage)
                if not ok:
                    self.status, self.fault = "failed", fault
                    break
        except Exception as exc:  # noqa: BLE001 - the harness's own fault, reported as this candidate's infrastructure error
            self.status, self.fault = "failed", "infrastructure"
            self.events.append(
                {
                    "type": "stage_finished",
                    "stage": self.stage,
                    "status": "error",
                    "message": f"the harness failed: {exc}",
                    "fault": "infrastructure",
                    "seconds": 0.0,
                }
            )
        finally:
            self._hold()
            if not self.kept:
                self._kill_candidate()
            self._after(harness_before, task_before)  # its slot's zygote: what it left is its own
            self.spent += time.monotonic() - t0

    def timed(self) -> None:
        t0 = time.monotonic()
        self.mark = len(self.events)
        self._refresh()
        harness_before = harness_hashes()
        task_before = task_hashes(
            Path(self.job["task_dir"]), sorted(self.job.get("task_files") or {})
        )
        try:
            if self.status == "passed":
                ok, fault = self._stage("performance")
                if not ok:
                    self.status, self.fault = "failed", fault
        except Exception as exc:  # noqa: BLE001 - as in untimed()
            self.status, self.fault = "failed", "infrastructure"
            self.events.append(
                {
                    "type": "stage_finished",
                    "stage": self.stage,
                    "status": "error",
                    "message": f"the harness failed: {exc}",
                    "fault": "infrastructure",
                    "seconds": 0.0,
                }
            )
        finally:
            self.kept, self.keep_pid = False, None
            self._kill_candidate()
            self._after(harness_before, task_before)
            self.spent += time.monotonic() - t0

    def retime(self, why: str) -> None:
        """Its timing again, in a fresh worker: a waiting worker was resumed meanwhile, so the
        first timing's device and host were not proven its own."""
        del self.events[self.mark :]
        self.status, self.fault, self.timing_note = "passed", None, f"fresh worker: {why}"
        self.timed()

    def finish(self) -> None:
        self.release()
        self.events.append(
            {
                "type": "evaluation_finished",
                "status": self.status,
                "fault": self.fault,
                "seconds": self.spent,
            }
        )

    def _restage(self) -> None:
        """The candidate's files written again, into a fresh folder of a name nobody could
        guess, now that no other candidate's process exists: what its untimed neighbours could
        have done to its first folder does not reach the code that is timed."""
        folder = (
            Path(self.job["workdir"]).parent / f"member-{secrets.token_hex(8)}" / "candidate"
        )  # as any member's: no sign that it is timed
        folder.mkdir(parents=True, mode=0o700)
        for name, text in self.spec["sources"].items():
            (folder / name).write_text(text)
        self.job["candidate"] = str(folder / self.spec["entry"])

    def _performance(self, deadline: float) -> dict[str, Any]:
        """A fresh worker for the timed rounds (the untimed phase's was killed), compiled as
        the compile stage did, then timed as a one-at-a-time member is."""
        if self.kept and self.candidate is not None and self.slot.quiescer is not None:
            why = self.slot.quiescer.resume(self.candidate.pid)
            if why is None:
                self.kept, self.keep_pid = False, None
                self.timing_note = "kept worker"
                self.trusted = self.slot.trusted_worker(self._remaining(deadline))
                note = "its own worker, kept from its untimed stages (its CUDA locked and the process stopped while others ran)"
                return {**super()._performance(deadline), "recompile_s": 0.0, "message": note}
            self.demote(why)
        if self.job["stages"]["performance"]:
            t0 = time.monotonic()
            self._restage()
            self.trusted = self.slot.trusted_worker(self._remaining(deadline))
            try:
                self.candidate = Worker.spawn("candidate", self.zygote, candidate_view(self.job))
            except (TaskFileChanged, ZygoteError, WorkerDied) as exc:
                raise StageFailed(
                    "error", f"could not start the candidate's worker: {exc}", "infrastructure"
                ) from None
            first = self.job["stages"]["correctness"][0]
            reply, _ = self._candidate_call(
                {
                    "op": "compile",
                    "workload": {"axes": first["axes"], "shapes": first["shapes"]},
                    "seed": first["seeds"][0],
                },
                deadline,
            )
            if not reply.get("ok"):
                raise StageFailed(
                    "failed",
                    f"the candidate did not compile again for timing (it compiled for the correctness runs): {reply.get('error')}",
                )
            recompile_s = time.monotonic() - t0
            result = super()._performance(deadline)
            return {**result, "recompile_s": recompile_s, "message": self.timing_note}
        return super()._performance(deadline)


def slot_count(job: dict[str, Any]) -> int:
    """How many candidates run their untimed stages at once: the job's `concurrency`, or with
    0 (`auto`) half this host's cores, at most MAX_SLOTS (each candidate's worker and its
    slot's trusted worker keep a core busy); never more than the batch has candidates."""
    asked = int(job.get("concurrency") or 0)
    if asked <= 0:
        try:
            cores = len(os.sched_getaffinity(0))
        except AttributeError:  # not Linux
            cores = os.cpu_count() or 1
        asked = min(MAX_SLOTS, cores // 2)
    return max(1, min(asked, len(job["batch"])))


def _versions() -> dict[str, Any]:
    from core.harness.runner import versions

    return versions()


class ConcurrentBatch:
    def __init__(
        self,
        job: dict[str, Any],
        emit: Emit,
        close_fds: tuple[int, ...],
        zygote: Zygote | None = None,
    ):
        self.job, self.emit = job, emit
        self.own_zygote = zygote is None
        self.zygote = zygote
        self.slots: list[_Slot] = []
        self.lock = threading.Lock()  # the harness's zygote answers one request at a time
        self.finished = threading.Event()
        self.broken: list[str] = []  # what broke a slot's thread
        self.idle = threading.Semaphore(0)  # one release per slot whose untimed work is done

    def _slot_zygote(self) -> Zygote:
        assert self.zygote is not None
        with self.lock:
            if not self.zygote.alive():
                self.zygote.close()
                self.zygote = Zygote()
            return self.zygote.fork_zygote()

    def _alone(self, member: _Concurrent) -> None:
        """A candidate that failed beside others is evaluated again, alone, and that verdict
        is its result: a neighbour running at the same time shares its uid, so it could have
        signalled its worker or swapped its files, and a failure must be the candidate's own.
        A pass needs no second look (a neighbour gains nothing by making another pass, and
        the timed code was staged afresh with nothing else alive)."""
        slot = member.slot
        if not slot.zygote.alive():
            slot.zygote.close()
            slot.zygote = self._slot_zygote()
        job = {**self.job, **slot._stage(member.spec)}
        job.pop("batch")

        def emit(event: dict[str, Any]) -> None:
            if event.get("type") == "evaluation_started":
                event = {**event, "member": member.index, "alone": True}
            self.emit(event)

        alone = _Member(job, emit, (), slot.zygote, slot, member.index)  # type: ignore[arg-type]
        alone.key_prefix = (
            f"alone{member.index}:"  # fresh per-candidate state in the slot's trusted worker
        )
        alone.run()
        slot._drain()

    def _unrun(self, index: int) -> None:
        """A candidate whose slot broke before it ran: an evaluation of its own that says so."""
        message = f"the batch's slot broke before this candidate ran: {'; '.join(self.broken) or 'unknown'}"
        self.emit(
            {
                "type": "evaluation_started",
                "task_id": self.job["task_id"],
                "device": self.job["device"],
                "versions": _versions(),
                "member": index,
            }
        )
        self.emit({"type": "stage_started", "stage": "compile"})
        self.emit(
            {
                "type": "stage_finished",
                "stage": "compile",
                "status": "error",
                "message": message,
                "fault": "infrastructure",
                "seconds": 0.0,
            }
        )
        self.emit(
            {
                "type": "evaluation_finished",
                "status": "failed",
                "fault": "infrastructure",
                "seconds": 0.0,
            }
        )

    def _slot_main(self, slot: _Slot, members: list[_Concurrent | None], queue: list[int]) -> None:
        try:
            self._serve_slot(slot, members, queue)
        except BaseException as exc:  # noqa: BLE001 - its candidates left unrun are reported as infrastructure faults
            self.broken.append(f"slot {slot.number}: {exc}")
        finally:
            self.idle.release()
            # The thread lives on until the batch ends: a worker's death signal
            # (PR_SET_PDEATHSIG) fires when the *thread* that forked it exits, and this one
            # forked the slot's trusted worker, which the timed phase still needs.
            self.finished.wait()

    def _serve_slot(self, slot: _Slot, members: list[_Concurrent | None], queue: list[int]) -> None:
        while True:
            with self.lock:
                if not queue:
                    return
                k = queue.pop(0)
            if not slot.zygote.alive():  # the last candidate killed it: a clean one for the next
                slot.zygote.close()
                slot.zygote = self._slot_zygote()
            spec = self.job["batch"][k]
            job = {**self.job, **slot._stage(spec)}
            job.pop("batch")
            member = members[k] = _Concurrent(job, slot, k, spec)
            member.untimed()
            slot._drain()
            if member.kept:  # its worker stays below this zygote: the next candidate gets another
                slot.zygote = self._slot_zygote()

    @staticmethod
    def _disturbed(members: list[_Concurrent | None], current: _Concurrent) -> bool:
        """Demote every waiting worker that is no longer stopped (resumed, or dead); True if
        one was. Only the candidate being timed could have done it (it alone runs then)."""
        found = False
        for other in members:
            if other is not None and other is not current and other.kept:
                assert other.candidate is not None
                why = Quiescer.intact(other.candidate.pid)
                if why is not None:
                    other.demote(why)
                    found = True
        return found

    def run(self) -> None:
        if self.zygote is None:
            self.zygote = Zygote()
        batch = self.job["batch"]
        quiescer = Quiescer(self.job)  # its helper forked here, from the main thread
        members: list[_Concurrent | None] = [None] * len(batch)
        try:
            count = slot_count(self.job)
            # Each slot's trusted worker keeps its share of the job's reference cache.
            slot_job = {
                **self.job,
                "reference_cache_bytes": int(self.job.get("reference_cache_bytes") or 0) // count,
            }
            self.slots = [_Slot(slot_job, self._slot_zygote(), s) for s in range(count)]
            for slot in self.slots:
                slot.prefork()
                slot.quiescer = quiescer
            queue = list(range(len(batch)))
            threads = [
                threading.Thread(target=self._slot_main, args=(slot, members, queue), daemon=True)
                for slot in self.slots
            ]
            for thread in threads:
                thread.start()
            for _ in threads:
                self.idle.acquire()
            # Every slot is idle and every candidate process gone: time them one at a time.
            for index, member in enumerate(members):
                if member is None:  # its slot broke before it ran
                    self._unrun(index)
                    continue
                if not member.slot.zygote.alive():
                    member.slot.zygote.close()
                    member.slot.zygote = self._slot_zygote()
                self._disturbed(members, member)  # before: what was resumed is timed fresh
                member.timed()
                if self._disturbed(members, member):
                    # A waiting worker ran during this timing: every waiting one is killed (so
                    # nothing can run beside a timing again) and this candidate is re-timed.
                    for other in members:
                        if other is not None and other is not member:
                            other.demote("another candidate resumed a waiting worker")
                    member.retime("a waiting worker was resumed during its first timing")
                member.finish()
                member.slot._drain()
                if member.status == "passed":
                    for event in member.events:
                        self.emit(event)
                else:
                    self._alone(member)
        finally:
            quiescer.close()
            for member in members:
                if member is not None:
                    member.demote("the batch ended")  # a batch that broke off kills what waits
                    member.release()
            self.finished.set()
            for slot in self.slots:
                for worker in (slot.trusted, slot.pending):
                    if worker is not None:
                        worker.kill()
                if slot.zygote is not None:
                    slot.zygote.close()
            if self.own_zygote and self.zygote is not None:
                self.zygote.close()
