"""The correctness and generalization stages: every seed of every workload run by the
candidate and judged in order against the reference, the inputs drawn and the outputs collected
by the trusted worker in shared memory where the device allows (shared_check.py), proof that
this evaluation's workers can share memory before any candidate code runs, and `verdict`, which
folds one seed's outputs into a message and the worst result (ranked.py folds its ranks' too)."""

from __future__ import annotations

import socket
from typing import Any

from core.harness import shared_check
from core.harness.calls import _workload
from core.harness.fan_out import FanOut
from core.harness.faults import StageFailed, cannot_evaluate
from core.harness.workers import Worker, WorkerDied


class CorrectnessStages(FanOut):
    """`_correctness` and `_generalization` (runner.Evaluation's stages of those names)."""

    def _correctness(self, deadline: float) -> dict[str, Any]:
        return self._check("correctness", self.job["stages"]["correctness"], deadline)

    def _generalization(self, deadline: float) -> dict[str, Any]:
        return self._check("generalization", self.job["stages"]["generalization"], deadline)

    def _check(
        self, stage: str, workloads: list[dict[str, Any]], deadline: float
    ) -> dict[str, Any]:
        """Every seed of every workload, run by the candidate (on two workers where the
        evaluation has two cores) and judged in order against the reference. Each run's inputs
        are drawn by the trusted worker into memory the candidate's worker maps, its outputs
        come back the same way (shared_check.py); the reference is computed while the
        candidate runs. After a wrong seed, a workload's later seeds are not judged."""
        assert self.trusted is not None
        runs = [
            (i, seed, 2 if j == 0 else 1)
            for i, w in enumerate(workloads)
            for j, seed in enumerate(w["seeds"])
        ]  # the first seed runs twice on the same inputs
        requests = [  # the old path's: the candidate's worker draws the inputs from the seed
            (
                {"op": "run", "workload": _workload(workloads[i]), "seed": seed, "repeat": repeat},
                repeat * self._out_bytes(workloads[i]),
            )
            for i, seed, repeat in runs
        ]
        worst: list[dict[str, Any] | None] = [None] * len(workloads)
        message: list[str | None] = [None] * len(workloads)
        failures: list[str] = []
        replies: dict[int, tuple[dict[str, Any], bytearray | None]] = {}
        shared: dict[int, str] = {}  # run -> the region its inputs and outputs are in
        not_shared: list[str] = []
        off = self.job["timing"].get("shared_io") is False
        judged = 0

        def key(k: int) -> str:
            return f"{workloads[runs[k][0]]['label']}#{runs[k][1]}"

        def prepare(k: int, worker: Worker) -> tuple[dict[str, Any], int]:
            i, seed, repeat = runs[k]
            rkey = None if off or worker.pid in self.no_share else f"{worker.name}:{worker.pid}"
            ack = self._trusted_call(
                {
                    "op": "stage",
                    "key": key(k),
                    "member": self.key_prefix,
                    "workload": _workload(workloads[i]),
                    "seed": seed,
                    "repeat": repeat,
                    "region": None if rkey is None else self.key_prefix + rkey,
                    "first": k == 0,
                },
                deadline,
            )
            if ack.get("oom"):
                raise StageFailed("error", str(ack["oom"]), "infrastructure")
            reason = ack.get("reason") or self.no_share.get(worker.pid)
            if off:
                reason = "the job's timing.shared_io is off"
            if "layout" in ack and rkey is not None:
                fds = shared_check.recv_fds(self.trusted.conn, ack.get("region"))  # type: ignore[union-attr]
                if "region" not in ack or self._attach(worker, ack["region"], fds, deadline):
                    shared[k] = self.key_prefix + rkey
                    return {
                        "op": "run_shared",
                        "workload": _workload(workloads[i]),
                        "layout": ack["layout"],
                    }, 0
                reason = self.no_share[worker.pid]
            if reason and reason not in not_shared:
                not_shared.append(str(reason))
            return requests[k]

        def done(k: int, worker: Worker, reply: dict[str, Any]) -> None:
            if k in shared:  # its slots are copied out before the region takes the next run
                op = "collect" if reply.get("ok") else "drop"
                self._trusted_send(
                    {"op": op, "key": key(k), "member": self.key_prefix, "region": shared[k]}
                )

        for k, reply, payload in self._fan_out(requests, deadline, prepare, done):
            replies[k] = (reply, payload)
            while judged in replies:
                i, seed, repeat = runs[judged]
                reply, payload = replies.pop(judged)
                if message[i] is None:
                    worst[i], message[i] = self._judge(
                        stage,
                        workloads[i],
                        seed,
                        repeat,
                        reply,
                        payload,
                        worst[i],
                        deadline,
                        judged in shared,
                    )
                else:
                    self._trusted_send(
                        {"op": "drop", "key": key(judged), "member": self.key_prefix}
                    )
                judged += 1
                if judged == len(runs) or runs[judged][0] != i:  # the workload's last seed
                    w = workloads[i]
                    self.emit(
                        {
                            "type": "workload_checked",
                            "stage": stage,
                            "workload": w["label"],
                            "axes": w["axes"],
                            "passed": message[i] is None,
                            "message": message[i],
                            "worst": worst[i],
                        }
                    )
                    if message[i] is not None:
                        failures.append(f"{w['label']}: {message[i]}")
        if shared:
            self._detach_regions(deadline)
        if failures:
            raise StageFailed(
                "failed",
                f"{len(failures)} of {len(workloads)} workload(s) wrong; first: {failures[0]}",
            )
        note = f"{shared_check.OLD_PATH_NOTE} ({'; '.join(not_shared)})" if not_shared else None
        return {"workloads": len(workloads), "note": note}

    def _detach_regions(self, deadline: float) -> None:
        """At the end of a stage, every candidate worker unmaps its region, then the trusted
        worker frees it. A mapping pins its memory in the trusted worker (the CUDA IPC producer
        may not reuse a block its consumer still maps), and a worker kept for its timing, or one
        killed without unmapping, would pin its region for the rest of a batch: with gigabytes
        of KV cache per region, eight slots' worth ran the H200 out of memory."""
        for worker in (self.candidate, self.second):
            if worker is None or worker.pid in self.no_share:
                continue
            reply, _ = self._candidate_recv(worker, deadline, header={"op": "detach"})
            if not reply.get("ok"):
                raise StageFailed(
                    "failed",
                    f"the candidate's worker could not unmap its region: {reply.get('error')}",
                )
            # Kept in `mapped` all the same: once the worker is dead, what it kept is freed.
            self._trusted_send(
                {
                    "op": "release",
                    "region": self._region_key(worker),
                    # the candidate kept a tensor over it: it waits for the worker's death
                    "kept": bool(reply.get("kept")),
                }
            )

    def _prove_sharing(self, deadline: float) -> None:
        """Map a small region into the candidate's worker before any of the candidate's code
        runs. Where that works, this evaluation's workers can share memory (the same user, the
        same sandbox), so a later failure to map one is the candidate's doing: it would buy the
        old path, where its own process draws the inputs and holds the sampled calls, and it
        fails the stage instead (`shared_memory_refused`). Where it does not work (CUDA IPC
        between two users, unsandboxed as root), the old path is this environment's, said in
        each stage's note."""
        assert self.candidate is not None and self.trusted is not None
        if self.job["timing"].get("shared_io") is False:
            return
        worker = self.candidate
        ack = self._trusted_call(
            {
                "op": "probe_region",
                "member": self.key_prefix,
                "region": f"{self.key_prefix}{worker.name}:{worker.pid}",
            },
            deadline,
        )
        if ack.get("oom"):
            raise StageFailed("error", str(ack["oom"]), "infrastructure")
        if "region" not in ack:  # this device cannot share: nothing to prove
            return
        fds = shared_check.recv_fds(self.trusted.conn, ack["region"])
        self.sharing_proven = self._attach(worker, ack["region"], fds, deadline)

    def _attach(
        self, worker: Worker, desc: dict[str, Any], fds: list[int], deadline: float
    ) -> bool:
        """Have a candidate worker map the region its correctness runs use; False (and the old
        path for it from now on) where it cannot."""
        try:
            worker.send({"op": "attach", "region": desc})
            if fds:
                socket.send_fds(worker.conn, [b"f"], fds)
        except (WorkerDied, OSError):
            raise StageFailed(
                "crashed", f"the candidate's process {worker.exit_reason()}"
            ) from None
        finally:
            shared_check.close_fds(fds)
        self.mapped[worker.pid] = self._region_key(worker)  # from now on it may map it
        reply, _ = self._candidate_recv(worker, deadline)
        failed = reply.get("attach_failed") if reply.get("ok") else reply.get("error")
        if not failed:
            return True
        if self.sharing_proven:
            raise self._refused(str(failed)[:300])
        self.no_share[worker.pid] = f"its worker could not map the shared memory: {failed}"[:300]
        self._trusted_send({"op": "release", "region": self._region_key(worker)})
        return False

    def _judge(
        self,
        stage: str,
        w: dict[str, Any],
        seed: int,
        repeat: int,
        reply: dict[str, Any],
        payload: bytearray | None,
        worst: dict[str, Any] | None,
        deadline: float,
        shared: bool = False,
    ) -> tuple[dict[str, Any] | None, str | None]:
        """One seed's runs against the reference: the workload's worst output so far, and what
        was wrong (None if nothing). `shared`: its outputs are the ones the trusted worker
        collected from the run's slots, not a payload."""
        if not reply.get("ok"):
            self._trusted_send(
                {"op": "drop", "key": f"{w['label']}#{seed}", "member": self.key_prefix}
            )
            cannot_evaluate(reply)
            return {
                "error": reply.get("error"),
                "traceback": reply.get("traceback"),
            }, f"seed {seed}: {reply.get('error')}"
        check = self._trusted_call(
            {
                "op": "judge" if shared else "check",
                "key": f"{w['label']}#{seed}",
                "workload": _workload(w),
                "workload_key": self.key_prefix + w["label"],
                "member": self.key_prefix,
                "seed": seed,
                "runs": repeat,
                "tensors": reply.get("tensors"),
            },
            deadline,
            payload,
        )
        if check.get("malformed"):
            return {
                "error": check["malformed"]
            }, f"seed {seed}: the candidate's worker sent malformed outputs: {check['malformed']}"
        message, worst = verdict([[outputs] for outputs in check["runs"]], seed, worst)
        if message:
            return worst, message
        if check.get("independent"):
            self.emit(
                {
                    "type": "workload_checked",
                    "stage": stage,
                    "workload": w["label"],
                    "axes": w["axes"],
                    "passed": False,
                    "message": check["independent"],
                    "worst": worst,
                }
            )
            raise self._violation(
                "input_independent_output", f"{w['label']}: {check['independent']}", w["label"]
            )
        return worst, None


def verdict(
    runs: list[list[dict[str, Any]]],
    seed: int,
    worst: dict[str, Any] | None,
    ranked: bool = False,
) -> tuple[str | None, dict[str, Any] | None]:
    """The first wrong output of one seed's runs (each a list of per-rank outputs; one rank for
    a single-device task) as a message, and the worst result seen so far. `ranked` names the
    rank in both."""
    message = None
    for run_index, ranks in enumerate(runs):
        for rank, outputs in enumerate(ranks):
            where = f" on rank {rank}" if ranked else ""
            for name, result in outputs.items():
                if (
                    worst is None
                    or result.get("max_abs_err", float("inf")) > worst.get("max_abs_err", -1.0)
                    or not result["passed"]
                ):
                    worst = {
                        "output": name,
                        **({"rank": rank} if ranked else {}),
                        "seed": seed,
                        **({"run": run_index + 1} if run_index else {}),
                        **result,
                    }
                if not result["passed"] and message is None:
                    if run_index == 0:
                        message = f"output `{name}`{where}, seed {seed}: {result.get('message')}"
                    else:
                        message = (
                            f"output `{name}`{where}, seed {seed}: run {run_index + 1} on the same inputs is wrong where run 1 was "
                            f"right ({result.get('message')}): the candidate is not deterministic (a race, or uninitialised memory)"
                        )
            if message:
                return message, worst
    return message, worst
