"""A batch: many candidates of one task, evaluated one after another in one job, sharing what
does not depend on the candidate (docs/evaluation.md, "Batches").

Shared: the trusted worker (forked once; the reference and the baseline read and compiled
once), and in it each (workload, seed)'s inputs and reference outputs, computed for the first
candidate and kept for the rest (`ReferenceCache`, within the job's byte budget). Every
candidate is timed in its own rounds, each next to a round of the same warm baseline, so drift
still cancels per candidate.

Not shared: everything of the candidate's. Each candidate gets its own worker forked from the
zygote, its own working folder, its own stages, verdict, findings and timing, and the trusted
worker keeps its per-candidate state (the input-independence history) under the candidate's
own key. Candidates never run at the same time, and the zygote buries what one left behind
before the next starts, so a cheat reaches no neighbour's process or outputs. A candidate
that kills the trusted worker fails its own evaluation as an infrastructure fault; the next
candidate gets a fresh trusted worker (and a fresh cache).

The events of candidate k are the events of one evaluation (evaluation_started …
evaluation_finished) with `member: k` on the first; the engine splits the stream there.
"""

from __future__ import annotations

import json
import secrets
from pathlib import Path
from typing import Any

from core.harness import isolation
from core.harness.baseline_rounds import BaselineWorkers
from core.harness.candidate_owner import grant
from core.harness.faults import await_trusted, spawn_candidate
from core.harness.runner import Emit, Evaluation, JobRun, keep_trusted_jit
from core.harness.workers import Worker, WorkerDied, WorkerTimeout, trusted_main
from core.harness.zygote import Zygote


class _Member(Evaluation):
    """One candidate of a batch: an Evaluation whose trusted worker belongs to the batch."""

    def __init__(
        self,
        job: dict[str, Any],
        emit: Emit,
        close_fds: tuple[int, ...],
        zygote: Zygote,
        batch: BatchEvaluation,
        index: int,
    ):
        super().__init__(job, emit, close_fds, zygote)
        self.batch, self.index = batch, index
        self.own_zygote = False
        self.baselines = batch.baselines  # one warm baseline for the whole batch
        self.key_prefix = f"member{index}:"

    def _start_workers(self, deadline: float) -> None:
        self.trusted = self.batch.trusted_worker(self._remaining(deadline))
        self.candidate = spawn_candidate(self.zygote, self.job)

    def _workers(self) -> list[Worker | None]:
        return [
            self.candidate,
            self.second,
        ]  # the trusted worker outlives the candidate: the batch closes it


class BatchEvaluation(JobRun):
    """A batch's candidates one after another (`_Member`), sharing the batch's trusted worker."""

    def _setup(self) -> None:
        self.trusted: Worker | None = None
        # forked as the first member's correctness begins (_load_baseline)
        self.baselines = BaselineWorkers(self.job)

    def trusted_worker(self, timeout: float) -> Worker:
        """The batch's trusted worker, forked on first use and again after one died."""
        if (
            self.trusted is not None
            and self.trusted.returncode is None
            and not self._exited(self.trusted)
        ):
            return self.trusted
        if self.trusted is not None:
            self.trusted.kill()
        self.trusted = await_trusted(Worker.fork("trusted", trusted_main, self.job), timeout)
        return self.trusted

    @staticmethod
    def _exited(worker: Worker) -> bool:
        return worker._wait(0)

    def _drain(self, timeout: float = 120.0) -> None:
        """Read whatever a stage that ended early left unread in the trusted worker's channel
        (a reference computed ahead, say) so the next candidate's requests get their own
        replies; a trusted worker that does not answer is replaced."""
        if self.trusted is None:
            return
        nonce = secrets.token_hex(8)
        try:
            self.trusted.send({"op": "sync", "nonce": nonce})
            while True:
                reply, _ = self.trusted.recv(timeout)
                if reply.get("sync") == nonce:
                    return
        except (WorkerTimeout, WorkerDied):
            self.trusted.kill()
            self.trusted = None

    def _trim(self) -> None:
        """Have the trusted worker give the device back its cached references and its
        allocator's free blocks: when a concurrent batch's untimed stages end, and before a
        member that ran out of memory runs again alone (concurrent.py). A trusted worker that
        does not answer is replaced."""
        self._drain()  # its channel clean first: the reply read next is the trim's
        if self.trusted is None:
            return
        try:
            self.trusted.request({"op": "trim"}, 60.0)
        except (WorkerTimeout, WorkerDied):
            self.trusted.kill()
            self.trusted = None

    def _record_regions(self, member: int, phase: str) -> None:
        """Append what the trusted worker holds after a candidate's work to the job's
        `trusted_regions.jsonl` (its regions by key, what it freed for dead workers, and on a
        GPU its memory and peak): proof that a finished candidate's regions are gone, for
        tests and bench/h200_regions.sh. A trusted worker that does not answer is replaced."""
        if self.trusted is None:
            return
        try:
            reply, _ = self.trusted.request({"op": "regions"}, 60.0)
        except (WorkerTimeout, WorkerDied):
            self.trusted.kill()
            self.trusted = None
            return
        line = {"member": member, "phase": phase, "slot": getattr(self, "number", 0), **reply}
        with open(Path(self.job["workdir"]) / "trusted_regions.jsonl", "a") as f:
            f.write(json.dumps(line, default=str) + "\n")

    def _stage(self, member: dict[str, Any]) -> dict[str, str]:
        """The candidate's files, written into a fresh folder of a name no earlier candidate
        could guess, only now that every process of the earlier candidates is gone: none of
        them could read, replace or plant anything a later candidate runs."""
        workdir = Path(self.job["workdir"]) / f"member-{secrets.token_hex(8)}"
        folder = workdir / "candidate"
        folder.mkdir(parents=True, mode=0o700)
        grant(
            workdir
        )  # its log and scratch files: the candidate's own (its files stay the harness's)
        for name, text in member["sources"].items():
            if Path(name).name != name or name.startswith("."):
                raise ValueError(f"a batch member's file name {name!r} is not a plain file name")
            (folder / name).write_text(text)
        return {"candidate": str(folder / member["entry"]), "workdir": str(workdir)}

    def run(self) -> None:
        if self.zygote is None:
            self.zygote = Zygote()
        try:
            for index, member in enumerate(self.job["batch"]):
                if (
                    not self.zygote.alive()
                ):  # a candidate killed it: the next one gets a clean zygote
                    self.zygote.close()
                    self.zygote = Zygote()
                job = {**self.job, **self._stage(member)}
                job.pop("batch")

                def emit(event: dict[str, Any], index: int = index) -> None:
                    if event.get("type") == "evaluation_started":
                        event = {**event, "member": index}
                    self.emit(event)

                _Member(job, emit, self.close_fds, self.zygote, self, index).run()
                # Its files and builds go with it: no later member can read or rewrite them.
                isolation.forget(
                    Path(job["workdir"]), Path(job["candidate"]).parent, Path(self.job["workdir"])
                )
                self._drain()
                self._record_regions(index, "evaluation")
        finally:
            if self.trusted is not None:
                keep_trusted_jit(self.trusted)  # drained after its last candidate
                self.trusted.kill()
            keep_trusted_jit(self.baselines.worker)  # the baseline's kernels, too
            self.baselines.close()
            if self.own_zygote and self.zygote is not None:
                self.zygote.close()
