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

import math
import os
import threading
from typing import Any

from core.harness import jit_cache
from core.harness.baseline_rounds import BaselineWorkers
from core.harness.baseline_worker import uses_baseline_worker
from core.harness.batch import _Member
from core.harness.concurrent_member import _Concurrent, _Slot
from core.harness.inputs import dtype_of
from core.harness.provenance import versions
from core.harness.quiesce import Quiescer
from core.harness.runner import JobRun, keep_trusted_jit
from core.harness.zygote import Zygote

MAX_SLOTS = 8


# A GPU slot in flight holds, for the largest workload it runs, the trusted worker's inputs
# and reference outputs, the shared region (inputs and outputs again, per copy) and the
# candidate's own temporaries: about four times the workload's tensors, plus two CUDA contexts
# and allocator slack. The slots may take three quarters of the device; the rest is for the
# workers kept for their timing and the baseline's.
SLOT_FOOTPRINT = 4
SLOT_OVERHEAD_BYTES = 2 << 30
DEVICE_SHARE = 0.75


def workload_bytes(job: dict[str, Any], workload: dict[str, Any]) -> int:
    """The bytes of a workload's declared input and output tensors."""
    shapes = workload.get("shapes") or {}
    total = 0
    for spec in [*job.get("inputs", []), *job.get("outputs", [])]:
        shape = shapes.get(spec.get("name"))
        if shape is not None:
            total += math.prod(shape) * dtype_of(spec["dtype"]).itemsize
    return total


def memory_slots(job: dict[str, Any]) -> int | None:
    """How many candidates' untimed stages a GPU's memory holds at once, from the job's largest
    workload (None where the device's memory is not known, or it is not a GPU). Without the
    bound, five slots of a task whose hidden workloads take tens of GB ran out of device memory
    (decode_paged_local, mxfp4_moe on the H200, 2026-12-02)."""
    device = job.get("device") or {}
    total = device.get("memory_bytes")
    if not total or device.get("type") in ("cpu", "sim"):
        return None
    largest = max(
        (
            workload_bytes(job, w)
            for stage in ("correctness", "generalization", "performance")
            for w in job["stages"].get(stage) or []
        ),
        default=0,
    )
    per_slot = SLOT_FOOTPRINT * largest + SLOT_OVERHEAD_BYTES
    return max(1, int(DEVICE_SHARE * total // per_slot))


def ran_out_of_memory(events: list[dict[str, Any]]) -> bool:
    """Whether a member's failure was the device's (or the host's) memory running out."""
    return any(
        e.get("type") == "stage_finished"
        and e.get("status") != "passed"
        and "out of memory" in str(e.get("message") or "").lower()
        for e in events
    )


def slot_count(job: dict[str, Any]) -> int:
    """How many candidates run their untimed stages at once: the job's `concurrency`, or with
    0 (`auto`) half this host's cores on a GPU (each candidate's worker and its slot's trusted
    worker keep a core busy), every core on the CPU and `sim:` devices (a candidate's worker
    is the busy one there: the trusted side's references are computed once per slot), at most
    MAX_SLOTS; never more than the batch has candidates."""
    asked = int(job.get("concurrency") or 0)
    if asked <= 0:
        try:
            cores = len(os.sched_getaffinity(0))
        except AttributeError:  # not Linux
            cores = os.cpu_count() or 1
        on_cpu = (job.get("device") or {}).get("type") in ("cpu", "sim")
        asked = min(MAX_SLOTS, cores if on_cpu else cores // 2)
    fits = memory_slots(job)
    if fits is not None:
        asked = min(asked, fits)
    return max(1, min(asked, len(job["batch"])))


class ConcurrentBatch(JobRun):
    """A batch's untimed stages K slots at a time, then each passing candidate timed alone."""

    def _setup(self) -> None:
        self.slots: list[_Slot] = []
        self.lock = threading.Lock()  # the harness's zygote answers one request at a time
        self.finished = threading.Event()
        self.broken: list[str] = []  # what broke a slot's thread
        self.idle = threading.Semaphore(0)  # one release per slot whose untimed work is done
        # One baseline worker for every slot's timings (they run one at a time, in this thread).
        self.baselines = BaselineWorkers(self.job)
        # Each member's source digest, and those a slot has started (a copy waits: _next)
        self.keys = [jit_cache.spec_key(m) for m in self.job["batch"]]
        self.started: set[str] = set()

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
        slot._record_regions(member.index, "alone")

    def _unrun(self, index: int) -> None:
        """A candidate whose slot broke before it ran: an evaluation of its own that says so."""
        message = f"the batch's slot broke before this candidate ran: {'; '.join(self.broken) or 'unknown'}"
        self.emit(
            {
                "type": "evaluation_started",
                "task_id": self.job["task_id"],
                "device": self.job["device"],
                "versions": versions(),
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
                k = self._next(queue)
            if not slot.zygote.alive():  # the last candidate killed it: a clean one for the next
                slot.zygote.close()
                slot.zygote = self._slot_zygote()
            spec = self.job["batch"][k]
            # Beside other slots, a candidate runs on one worker: the slots share the cores
            # that a lone evaluation's two workers would use (fan_out.py).
            job = {**self.job, **slot._stage(spec), "fan_out": len(self.slots) == 1}
            job.pop("batch")
            member = members[k] = _Concurrent(job, slot, k, spec)
            member.untimed()
            slot._drain()
            slot._record_regions(k, "untimed")
            if member.kept:  # its worker stays below this zygote: the next candidate gets another
                slot.zygote = self._slot_zygote()

    def _next(self, queue: list[int]) -> int:
        """The candidate a free slot takes: the first whose source no slot has started yet or
        whose first copy's kernels are kept already (jit_cache.py: the copy then loads them
        instead of compiling them beside it), else the first. Under the lock."""
        pick = next(
            (
                i
                for i, k in enumerate(queue)
                if self.keys[k] is None
                or self.keys[k] not in self.started
                or jit_cache.STORE.has(self.keys[k])
            ),
            0,
        )
        k = queue.pop(pick)
        if self.keys[k] is not None:
            self.started.add(self.keys[k])  # type: ignore[arg-type]
        return k

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
                slot.baselines = self.baselines
            if uses_baseline_worker(self.job):
                self.baselines.prefork()
            queue = list(range(len(batch)))
            threads = [
                threading.Thread(target=self._slot_main, args=(slot, members, queue), daemon=True)
                for slot in self.slots
            ]
            for thread in threads:
                thread.start()
            for _ in threads:
                self.idle.acquire()
            # The untimed stages are over: what the slots' trusted workers kept for them (the
            # cached references, their allocator's free blocks) goes back to the device, so the
            # timed processes' allocations are not squeezed by it.
            for slot in self.slots:
                slot._trim()
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
                member.slot._record_regions(index, "timed")
                if member.status == "passed":
                    for event in member.events:
                        self.emit(event)
                else:
                    if ran_out_of_memory(member.events):
                        # The workers kept for their timing hold their device memory (what
                        # their candidates keep alive): given up, so the candidate's run
                        # alone has the device's memory as it would alone; they are timed
                        # in fresh workers instead. Every slot's trusted worker gives back
                        # its cached references and free blocks too (their peaks, 29-38 GiB
                        # each, left a rerun no room on the H200).
                        for other in members:
                            if other is not None and other is not member:
                                other.demote(
                                    "a neighbour ran out of memory beside the kept workers"
                                )
                        for slot in self.slots:
                            slot._trim()
                    self._alone(member)
        finally:
            quiescer.close()
            keep_trusted_jit(self.baselines.worker)  # the baseline's kernels, for later jobs
            self.baselines.close()
            for member in members:
                if member is not None:
                    member.demote("the batch ended")  # a batch that broke off kills what waits
                    member.release()
            for slot in self.slots:  # before the threads end (a worker dies with its thread)
                keep_trusted_jit(slot.trusted)  # drained after its last candidate
            self.finished.set()
            for slot in self.slots:
                for worker in (slot.trusted, slot.pending):
                    if worker is not None:
                        worker.kill()
                if slot.zygote is not None:
                    slot.zygote.close()
            if self.own_zygote and self.zygote is not None:
                self.zygote.close()
