"""How the harness parent talks to an evaluation's workers: requests to the candidate's worker
whose replies are checked before they are believed (timeouts, crashes, runtime patches, hooks
left behind), requests to the trusted worker whose failures are the harness's, and the findings
and violations the stages report. `CandidateCalls` is the base of the evaluation's stage mixins
(fan_out.py, correctness.py, performance.py; runner.Evaluation composes them)."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from core.harness import autotune, inputs, trace
from core.harness.faults import StageFailed, trusted_failed
from core.harness.workers import Worker, WorkerDied, WorkerTimeout
from core.harness.zygote import Zygote

Emit = Callable[[dict[str, Any]], None]
LOG_LIMIT = 64 * 1024
MAX_TAMPER_NOTES = 20
HOOK_FLAGS = ("harness_hooked", "torch_patched")  # guard.HOOKED, guard.PATCHED


def _workload(w: dict[str, Any]) -> dict[str, Any]:
    """What a worker needs of a workload: its axes (for a task's make_inputs) and the concrete
    shapes the engine resolved."""
    return {"axes": w["axes"], "shapes": w["shapes"]}


class CandidateCalls:
    """The calls every stage makes. The state is runner.Evaluation's (set in its __init__)."""

    job: dict[str, Any]
    emit: Emit
    close_fds: tuple[int, ...]
    workdir: Path
    candidate: Worker | None
    second: Worker | None
    trusted: Worker | None
    own_zygote: bool
    zygote: Zygote | None
    rng: random.SystemRandom
    tamper_seen: set[str]
    stage: str
    stage_limit: float
    key_prefix: str
    keep_pid: int | None
    compile_seed: int
    no_share: dict[int, str]
    sharing_proven: bool
    mapped: dict[int, str]  # pid of a candidate worker -> the key of the regions it may map
    tuned: dict[int, dict[str, list[int]]]  # pid -> what its autotuners tried (autotune.py)

    def _region_key(self, worker: Worker) -> str:
        """The trusted worker's key of the regions this candidate worker maps."""
        return f"{self.key_prefix}{worker.name}:{worker.pid}"

    def _forget_regions(self, workers: list[Worker]) -> None:
        """After candidate workers were killed (every path that ends one: a stage's end, its
        failure, a timeout, a crash, a flag, a batch's end): the trusted worker frees what
        each had mapped and never unmapped, at once, not when the batch ends. As dead
        (`gone`: the counts a killed CUDA consumer never returned are returned for it) only
        for a worker reaped; one still alive only loses the trusted side's reference."""
        trusted = self.trusted
        for worker in workers:
            rkey = self.mapped.pop(worker.pid, None)
            if rkey is None or trusted is None or trusted.returncode is not None:
                continue
            try:
                trusted.send(
                    {"op": "release", "region": rkey, "gone": worker.returncode is not None}
                )
            except WorkerDied:  # its regions went with it
                return

    def _end_worker(self, worker: Worker) -> None:
        """Kill a candidate worker, then have the trusted worker free what it had mapped."""
        worker.kill()
        self._forget_regions([worker])

    def _remaining(self, deadline: float) -> float:
        left = deadline - time.monotonic()
        if left <= 0:
            raise WorkerTimeout("stage time limit reached")
        return left

    def _log(self, name: str) -> str:
        path = self.workdir / name
        if not path.is_file():
            return ""
        data = path.read_bytes()
        text = data[-LOG_LIMIT:].decode(errors="replace")
        return ("[... earlier output cut ...]\n" if len(data) > LOG_LIMIT else "") + text

    def _finding(self, check: str, message: str, proven: bool, workload: str | None = None) -> None:
        self.emit(
            {
                "type": "finding",
                "check": check,
                "proven": proven,
                "message": message,
                "stage": self.stage,
                "workload": workload,
            }
        )

    def _violation(self, check: str, message: str, workload: str | None = None) -> StageFailed:
        """A proven violation: reported as a finding, and the stage fails."""
        self._finding(check, message, True, workload)
        return StageFailed("failed", f"{check}: {message}")

    def _refused(self, failed: str) -> StageFailed:
        """A worker that could not map shared memory after this evaluation's first worker
        mapped it before the candidate's code ran."""
        return self._violation(
            "shared_memory_refused",
            f"the candidate's worker could not map the trusted worker's shared memory ({failed}), "
            "though it mapped it before the candidate's code ran: the old path it would fall back "
            "to draws the inputs in the candidate's process",
        )

    def _candidate_call(
        self,
        header: dict[str, Any],
        deadline: float,
        max_payload: int = 0,
        limit_note: str | None = None,
    ) -> tuple[dict[str, Any], bytearray | None]:
        assert self.candidate is not None
        return self._candidate_recv(self.candidate, deadline, max_payload, header, limit_note)

    def _limit_message(self, limit_note: str | None = None) -> str:
        """What a timeout says: the limit that ended it, in seconds, and where it comes from."""
        if limit_note:
            return f"the candidate timed out: {limit_note}"
        profile = self.job.get("profile")
        return (
            f"the candidate did not finish within the {self.stage} stage's limit of {self.stage_limit:g} s"
            + (f" (profile {profile})" if profile else "")
        )

    def _candidate_recv(
        self,
        worker: Worker,
        deadline: float,
        max_payload: int = 0,
        header: dict[str, Any] | None = None,
        limit_note: str | None = None,
    ) -> tuple[dict[str, Any], bytearray | None]:
        """The reply of a candidate's worker (sending `header` first, if given), with its
        failures as the stage's and its runtime patches as findings."""
        try:
            with trace.span(f"{worker.name} {header.get('op') if header else 'reply'}"):
                if header is not None:
                    worker.send(header)
                reply, payload = worker.recv(self._remaining(deadline), max_payload)
        except WorkerTimeout:
            raise StageFailed("timeout", self._limit_message(limit_note)) from None
        except WorkerDied as died:
            raise StageFailed("crashed", f"the candidate's process {died.reason}") from None
        self._raise_hooks(reply)
        self._note_tampering(reply)
        if "autotune" in reply:
            autotune.merge(self.tuned, worker.pid, reply["autotune"])
        return reply, payload

    def _autotune_summary(self) -> list[dict[str, Any]] | None:
        """What the candidate's autotuners tried (a diagnostic: the candidate wrote it), for
        the evaluation_finished event."""
        return autotune.summary(self.tuned, self.job.get("autotune_configs")) or None

    def _note_tampering(self, reply: dict[str, Any]) -> None:
        """The names a candidate's worker saw replaced in its process, each a finding once."""
        tampered = reply.get("tampered")
        if isinstance(tampered, list):
            for name in tampered[:MAX_TAMPER_NOTES]:
                if (
                    isinstance(name, str)
                    and name not in self.tamper_seen
                    and len(self.tamper_seen) < MAX_TAMPER_NOTES
                ):
                    self.tamper_seen.add(name)
                    self._finding(
                        "runtime_patch", f"the candidate replaced `{name}` in its process", False
                    )

    def _raise_hooks(self, reply: dict[str, Any], where: str = "") -> None:
        """A candidate's worker found a dispatch mode left pushed or torch replaced
        (guard.Watch): each is reported, the first fails the stage (docs/integrity.md, class 1)."""
        hooked = reply.get("hooked")
        if not isinstance(hooked, list) or not hooked:
            return
        found = [
            h
            for h in hooked[:MAX_TAMPER_NOTES]
            if isinstance(h, dict)
            and h.get("check") in HOOK_FLAGS
            and isinstance(h.get("message"), str)
        ]
        if not found:
            raise StageFailed("failed", "the candidate's worker sent a malformed hook report")
        for h in found[1:]:
            self._finding(h["check"], f"{where}{h['message']}", True)
        raise self._violation(
            found[0]["check"],
            f"{where}{found[0]['message']} (the harness's own tensor work runs with Python dispatch off; a hook left behind is proof of an attempt to reach it)",
        )

    def _trusted_call(
        self, header: dict[str, Any], deadline: float, payload: bytes | bytearray | None = None
    ) -> dict[str, Any]:
        assert self.trusted is not None
        try:
            reply, _ = self.trusted.request(header, self._remaining(deadline), payload)
        except WorkerTimeout:
            raise StageFailed(
                "timeout",
                "the reference/baseline worker did not finish within the stage's time limit",
                "infrastructure",
            ) from None
        except WorkerDied as died:
            raise StageFailed(
                "error", f"the reference/baseline worker {died.reason}", "infrastructure"
            ) from None
        if not reply.get("ok"):
            raise trusted_failed(reply)
        return reply

    def _out_bytes(self, w: dict[str, Any]) -> int:
        return inputs.nbytes(inputs.expected_meta(self.job["outputs"], w["shapes"]))

    def _trusted_send(self, header: dict[str, Any]) -> None:
        """A request the trusted worker does not answer."""
        assert self.trusted is not None
        try:
            self.trusted.send(header)
        except WorkerDied as died:
            raise StageFailed(
                "error", f"the reference/baseline worker {died.reason}", "infrastructure"
            ) from None
