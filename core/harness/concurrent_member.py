"""One slot of a concurrent batch (concurrent.py) and the members it runs: a slot has its own
zygote and trusted worker; a member's evaluation is split into its untimed stages (run in the
slot's thread, its worker then kept CUDA-locked and stopped where quiesce.py can prove it idle)
and its timing (run later, alone, in the kept worker or a fresh one)."""

from __future__ import annotations

import secrets
import time
from pathlib import Path
from typing import Any

from core.harness import isolation
from core.harness.batch import BatchEvaluation, _Member
from core.harness.calls import _workload
from core.harness.faults import StageFailed, await_trusted, spawn_candidate
from core.harness.provenance import harness_hashes, task_hashes, versions
from core.harness.quiesce import Quiescer
from core.harness.workers import Worker, trusted_main
from core.harness.zygote import Zygote

UNTIMED = ("compile", "correctness", "generalization")


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
        # A `sim:` device's performance stage predicts (it counts, it does not time): nothing
        # in it needs the device alone, so it runs in the untimed phase, in the worker the
        # checks ran in, beside the other slots (no second compile, no wait for its turn).
        self.predicted = job["timing"].get("kind") == "predicted"
        self.performed = False  # its performance stage ran in the untimed phase

    def _refresh(self) -> None:
        if not self.private_zygote:
            self.zygote = self.slot.zygote  # the slot's zygote may have been replaced since

    def _hold(self) -> None:
        """Keep the untimed worker for the timing where the driver can prove it idle
        (quiesce.py): lock its CUDA, stop it; its other processes die in the cleanup that
        follows (`keep_pid`). Anything else: killed, as before, and timed in a fresh worker."""
        quiescer = self.slot.quiescer
        if self.status != "passed" or not self.job["stages"]["performance"] or self.performed:
            return
        if quiescer is None or self.candidate is None:
            self.timing_note = "fresh worker: no quiescing for this batch"
            return
        if self.second is not None:
            self._end_worker(self.second)
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
                self._end_worker(self.candidate)
                self.candidate = None

    def untimed(self) -> None:
        t0 = time.monotonic()
        self._refresh()
        self.events.append(
            {
                "type": "evaluation_started",
                "task_id": self.job["task_id"],
                "device": self.job["device"],
                "versions": versions(),
                "member": self.index,
            }
        )
        harness_before = harness_hashes()
        task_before = task_hashes(
            Path(self.job["task_dir"]), sorted(self.job.get("task_files") or {})
        )
        try:
            for stage in (*UNTIMED, "performance") if self.predicted else UNTIMED:
                ok, fault = self._stage(stage)
                self.performed = stage == "performance"
                if not ok:
                    self.status, self.fault = "failed", fault
                    break
        except Exception as exc:  # noqa: BLE001 - the harness's own fault, reported as this candidate's infrastructure error
            self._harness_failed(exc)
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
            if self.status == "passed" and not self.performed:
                ok, fault = self._stage("performance")
                if not ok:
                    self.status, self.fault = "failed", fault
        except Exception as exc:  # noqa: BLE001 - as in untimed()
            self._harness_failed(exc)
        finally:
            self.kept, self.keep_pid = False, None
            self._kill_candidate()
            self._after(harness_before, task_before)
            self.spent += time.monotonic() - t0

    def _harness_failed(self, exc: Exception) -> None:
        """The harness itself failed in one of its stages: this candidate's infrastructure error."""
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

    def retime(self, why: str) -> None:
        """Its timing again, in a fresh worker: a waiting worker was resumed meanwhile, so the
        first timing's device and host were not proven its own."""
        del self.events[self.mark :]
        self.status, self.fault, self.timing_note = "passed", None, f"fresh worker: {why}"
        self.timed()

    def finish(self) -> None:
        self.release()
        # Its files and builds go with it (core/harness/isolation.py).
        isolation.forget(
            Path(self.job["workdir"]),
            Path(self.job["candidate"]).parent,
            Path(self.job["workdir"]).parent,
        )
        self.events.append(
            {
                "type": "evaluation_finished",
                "status": self.status,
                "fault": self.fault,
                "seconds": self.spent,
                "autotune": self._autotune_summary(),
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
        the compile stage did, then timed as a one-at-a-time member is; a prediction in the
        untimed phase (`predicted`) in the worker it has."""
        if self.predicted and self.stage == "performance" and not self.performed:
            return super()._performance(deadline)
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
            self.candidate = spawn_candidate(self.zygote, self.job)
            first = self.job["stages"]["correctness"][0]
            reply, _ = self._candidate_call(
                {"op": "compile", "workload": _workload(first), "seed": first["seeds"][0]},
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
