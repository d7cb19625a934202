"""One evaluation, stage by stage, each stage gating the next:
compile → correctness (visible workloads) → generalization (hidden) → performance.

Runs in the harness parent. It never touches the GPU itself: the workers do, so the parent can
keep forking fresh workers for later evaluations. Everything the candidate's worker sends is
checked here before it is believed (sizes, types, which calls it kept); what the harness
proves or suspects is emitted as `finding` events (docs/integrity.md).
"""

from __future__ import annotations

import hashlib
import math
import os
import platform
import random
import select
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from core.harness import inputs, shared_check, shared_round
from core.harness.timing import ci_rel, picks, summarize
from core.harness.workers import (
    TaskFileChanged,
    Worker,
    WorkerDied,
    WorkerTimeout,
    candidate_view,
    trusted_main,
)
from core.harness.zygote import Zygote, ZygoteError

Emit = Callable[[dict[str, Any]], None]
LOG_LIMIT = 64 * 1024
MAX_TAMPER_NOTES = 20
HOOK_FLAGS = ("harness_hooked", "torch_patched")  # guard.HOOKED, guard.PATCHED
TIMING_MODES = ("graph", "events", "queued", "wall")
HARNESS_DIR = Path(__file__).resolve().parent
ON_CPU = (
    "cpu",
    "sim",
)  # devices whose candidate runs on the CPU: a GPU runs one worker's work faster than two CPU cores
MAX_CANDIDATE_WORKERS = (
    2  # the scheduler's default slots (cores / 2) give each evaluation two cores
)


def evaluation_cores() -> int:
    """Cores one evaluation may keep busy: two where this process may run on two (a
    simulated device counts workloads on both; the reference side idles meanwhile)."""
    try:
        available = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        available = os.cpu_count() or 1
    return max(1, min(MAX_CANDIDATE_WORKERS, available))


class StageFailed(Exception):
    def __init__(self, status: str, message: str, fault: str = "candidate"):
        self.status, self.message, self.fault = status, message, fault
        super().__init__(message)


def await_trusted(worker: Worker, timeout: float) -> Worker:
    """`worker` (a trusted worker just forked) once it says it has loaded the reference and the
    baseline; its failure to start or to load is the harness's, not the candidate's."""
    try:
        ready, _ = worker.recv(timeout)
    except (WorkerTimeout, WorkerDied) as exc:
        raise StageFailed(
            "error", f"the reference/baseline worker did not start: {exc}", "infrastructure"
        ) from None
    if not ready.get("ok"):
        raise StageFailed(
            "error",
            f"the reference/baseline could not be loaded: {ready.get('error')}\n{ready.get('traceback', '')}",
            "infrastructure",
        )
    return worker


def cannot_evaluate(reply: dict[str, Any]) -> None:
    """A candidate's failure that its worker traced to a construct this device's interpreter
    cannot run (triton_cpu.unsupported_reason): an infrastructure-style outcome, never a wrong
    answer (the kernel may well be right on a GPU)."""
    if isinstance(reply.get("unsupported"), str):
        raise StageFailed(
            "error",
            f"cannot evaluate on this device: {reply['unsupported'][:500]}",
            "infrastructure",
        )


def versions() -> dict[str, Any]:
    import numpy
    import torch

    found: dict[str, Any] = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "numpy": numpy.__version__,
    }
    try:
        import triton

        found["triton"] = triton.__version__
    except ImportError:
        found["triton"] = None
    found["cuda"] = torch.version.cuda
    found["hip"] = getattr(torch.version, "hip", None)
    driver = Path("/proc/driver/nvidia/version")
    if driver.is_file():
        first = driver.read_text().splitlines()[0]
        found["driver"] = next((w for w in first.split() if w[:1].isdigit() and "." in w), first)
    return found


def harness_hashes() -> dict[str, str]:
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(HARNESS_DIR.glob("*.py"))
    }


def task_hashes(task_dir: Path, names: list[str]) -> dict[str, str | None]:
    """sha256 of the task files this process can see (None: absent or hidden)."""
    found: dict[str, str | None] = {}
    for name in names:
        try:
            found[name] = hashlib.sha256((task_dir / name).read_bytes()).hexdigest()
        except OSError:
            found[name] = None
    return found


class Evaluation:
    def __init__(
        self,
        job: dict[str, Any],
        emit: Emit,
        close_fds: tuple[int, ...],
        zygote: Zygote | None = None,
    ):
        self.job, self.emit, self.close_fds = job, emit, close_fds
        self.workdir = Path(job["workdir"])
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.candidate: Worker | None = None
        self.second: Worker | None = (
            None  # a second candidate worker, for stages of independent workloads (_fan_out)
        )
        self.trusted: Worker | None = None
        self.own_zygote = zygote is None
        self.zygote = zygote
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

    # --- helpers -------------------------------------------------------------------------

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
            if header is not None:
                worker.send(header)
            reply, payload = worker.recv(self._remaining(deadline), max_payload)
        except WorkerTimeout:
            raise StageFailed("timeout", self._limit_message(limit_note)) from None
        except WorkerDied as died:
            raise StageFailed("crashed", f"the candidate's process {died.reason}") from None
        self._raise_hooks(reply)
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
        return reply, payload

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

    def _fan_out(
        self,
        requests: list[tuple[dict[str, Any], int]],
        deadline: float,
        prepare: Callable[[int, Worker], tuple[dict[str, Any], int]] | None = None,
        done: Callable[[int, Worker, dict[str, Any]], None] | None = None,
    ) -> Iterator[tuple[int, dict[str, Any], bytearray | None]]:
        """Send independent (request, max payload) pairs to the candidate's worker and, where
        the evaluation has a second core, to a second worker forked the same way (same sandbox,
        limits and watch); yield (index, reply, payload) as replies come, in whichever order
        they finish. Replies are checked as `_candidate_call`'s. A worker that answers gets its
        next request before the reply is yielded, so it never waits on the caller.
        `prepare(index, worker)`, where given, makes the request for the worker that gets it;
        `done(index, worker, reply)` is told of each reply before that worker's next request."""
        assert self.candidate is not None
        workers = [self.candidate]
        if (
            len(requests) > 1
            and self.job["device"].get("type") in ON_CPU
            and evaluation_cores() > 1
        ):
            if self.second is None:
                self.second = self._second_candidate(deadline)
            if self.second is not None:
                workers.append(self.second)
        waiting = list(enumerate(requests))[::-1]
        busy: dict[Worker, tuple[int, int, float]] = {}
        # One run may take at most the job's per-call limit (a new shape may JIT-compile: the
        # profile's compile limit), so a call that hangs ends the stage long before its limit.
        call_s = float((self.job.get("limits") or {}).get("call_s") or 0.0)
        call_note = f"one run took more than the per-call limit of {call_s:g} s" + (
            f" (profile {self.job['profile']})" if self.job.get("profile") else ""
        )

        def dispatch(worker: Worker) -> None:
            if waiting:
                index, (header, max_payload) = waiting.pop()
                if prepare is not None:
                    header, max_payload = prepare(index, worker)
                try:
                    worker.send(header)
                except WorkerDied as died:
                    raise StageFailed("crashed", f"the candidate's process {died.reason}") from None
                busy[worker] = (
                    index,
                    max_payload,
                    time.monotonic() + call_s if call_s else math.inf,
                )

        try:
            for worker in workers:
                dispatch(worker)
            while busy:
                poller = select.poll()
                for worker in busy:
                    poller.register(worker.conn.fileno(), select.POLLIN)
                try:
                    wait_s = min(
                        self._remaining(deadline),
                        min(b[2] for b in busy.values()) - time.monotonic(),
                    )
                except WorkerTimeout:
                    raise StageFailed("timeout", self._limit_message()) from None
                ready = {fd for fd, _ in poller.poll(max(wait_s, 0.0) * 1000)}
                if not ready and any(time.monotonic() >= b[2] for b in busy.values()):
                    raise StageFailed("timeout", self._limit_message(call_note))
                for worker in [w for w in busy if w.conn.fileno() in ready]:
                    index, max_payload, _ = busy.pop(worker)
                    reply, payload = self._candidate_recv(worker, deadline, max_payload)
                    if done is not None:
                        done(index, worker, reply)
                    dispatch(worker)
                    yield index, reply, payload
        finally:
            if (
                busy and self.second is not None
            ):  # left mid-request: its late reply must not reach a later stage
                self.second.kill()
                self.second = None

    def _second_candidate(self, deadline: float) -> Worker | None:
        """Another candidate worker, compiled like the first; None where it cannot start (the
        stages then run on the first alone: slower, not wrong)."""
        assert self.zygote is not None
        first = self.job["stages"]["correctness"][0]
        try:
            worker = Worker.spawn("candidate", self.zygote, candidate_view(self.job))
        except (TaskFileChanged, ZygoteError, WorkerDied):
            return None
        try:
            reply, _ = self._candidate_recv(
                worker,
                deadline,
                header={"op": "compile", "workload": _workload(first), "seed": self.compile_seed},
            )
        except StageFailed:
            reply = {"ok": False}
        if not reply.get("ok"):
            worker.kill()
            return None
        return worker

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
            raise StageFailed(
                "error",
                f"the reference/baseline failed: {reply.get('error')}\n{reply.get('traceback', '')}",
                "infrastructure",
            )
        return reply

    def _out_bytes(self, w: dict[str, Any]) -> int:
        return inputs.nbytes(inputs.expected_meta(self.job["outputs"], w["shapes"]))

    # --- stages --------------------------------------------------------------------------

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
            for worker in self._workers():
                if worker is not None:
                    worker.kill()
            self._after(harness_before, task_before)
            self.emit(
                {
                    "type": "evaluation_finished",
                    "status": status,
                    "fault": fault,
                    "seconds": time.monotonic() - started,
                }
            )

    def _workers(self) -> list[Worker | None]:
        return [self.candidate, self.second, self.trusted]

    def _kill_candidate(self) -> None:
        for worker in (self.candidate, self.second):
            if worker is not None:
                worker.kill()

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
        pending = Worker.fork("trusted", trusted_main, self.job)
        try:
            view = candidate_view(self.job)
            if self.zygote is None:
                self.zygote = Zygote()
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
        self.trusted = await_trusted(pending, self._remaining(deadline))
        reply, _ = self._candidate_recv(self.candidate, deadline)
        if not reply.get("ok"):
            raise StageFailed(
                "error",
                f"the candidate's worker could not start its device: {reply.get('error')}",
                "infrastructure",
            )

    def _compile(self, deadline: float) -> dict[str, Any]:
        self._start_workers(deadline)
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
        return {"log": self._log("candidate.log"), "note": reply.get("first_call_error")}

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
        if failures:
            raise StageFailed(
                "failed",
                f"{len(failures)} of {len(workloads)} workload(s) wrong; first: {failures[0]}",
            )
        note = f"{shared_check.OLD_PATH_NOTE} ({'; '.join(not_shared)})" if not_shared else None
        return {"workloads": len(workloads), "note": note}

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
        if "region" not in ack:  # this device cannot share: nothing to prove
            return
        fds = shared_check.recv_fds(self.trusted.conn, ack["region"])
        self.sharing_proven = self._attach(worker, ack["region"], fds, deadline)

    def _refused(self, failed: str) -> StageFailed:
        """A worker that could not map shared memory after this evaluation's first worker
        mapped it before the candidate's code ran."""
        return self._violation(
            "shared_memory_refused",
            f"the candidate's worker could not map the trusted worker's shared memory ({failed}), "
            "though it mapped it before the candidate's code ran: the old path it would fall back "
            "to draws the inputs in the candidate's process",
        )

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
        reply, _ = self._candidate_recv(worker, deadline)
        failed = reply.get("attach_failed") if reply.get("ok") else reply.get("error")
        if not failed:
            return True
        if self.sharing_proven:
            raise self._refused(str(failed)[:300])
        self.no_share[worker.pid] = f"its worker could not map the shared memory: {failed}"[:300]
        self._trusted_send(
            {"op": "release", "region": f"{self.key_prefix}{worker.name}:{worker.pid}"}
        )
        return False

    def _trusted_send(self, header: dict[str, Any]) -> None:
        """A request the trusted worker does not answer."""
        assert self.trusted is not None
        try:
            self.trusted.send(header)
        except WorkerDied as died:
            raise StageFailed(
                "error", f"the reference/baseline worker {died.reason}", "infrastructure"
            ) from None

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

    def _performance(self, deadline: float) -> dict[str, Any]:
        timing = self.job["timing"]
        if timing.get("kind") == "predicted":  # a sim: device predicts instead of timing
            from core.harness.sim.stage import predict_performance

            return predict_performance(self, deadline)
        if self.second is not None:  # nothing of the candidate runs beside the timed calls
            self.second.kill()
            self.second = None
        rounds = int(timing["alternations"])
        min_rounds = max(1, min(rounds, int(timing.get("min_rounds", rounds))))
        target = float(
            timing.get("ci_target", 0.0)
        )  # 0: every round runs (the protocol before adaptive stopping)
        sampled = int(timing.get("checked_calls", 2))
        checked_total = 0
        for w in self.job["stages"]["performance"]:
            sides: dict[str, list[float]] = {"candidate": [], "baseline": []}
            walls: dict[str, list[dict[str, float]]] = {"candidate": [], "baseline": []}
            graph = bool(w.get("graph"))
            mode = None
            notes = []
            checked = 0
            impl = None
            done = 0

            def baseline_round(request: dict[str, Any]) -> str | None:
                """One baseline round, its walls and times kept; which of task.yaml's `baselines:` ran."""
                t0 = time.monotonic()
                base = self._trusted_call(request, deadline)
                # B023: it is called only inside the workload iteration that defines it
                walls["baseline"].append(  # noqa: B023
                    {
                        "wall_s": time.monotonic() - t0,
                        "reported_s": sum(base["times_us"]) / 1e6,
                        "calls": len(base["times_us"]),
                    }
                )
                sides["baseline"] += base["times_us"]  # noqa: B023
                return base.get("impl")  # baseline.py's IMPL

            for r in range(rounds):
                first = r * 100_000
                request = {
                    "op": "time",
                    "workload": _workload(w),
                    "seed": w["seed"],
                    "graph": graph,
                    "first_index": first,
                    "budget_ms": timing["budget_ms"] / rounds,
                    "min_calls": timing["min_calls"],
                    "max_calls": timing["max_calls"],
                    "sync_each_call": timing.get("sync_each_call", False),
                }
                # The baseline's round first: the candidate's round may then take at most
                # K× as long (plus a floor for graph capture and warm-up), so a call that hangs
                # ends the stage in seconds, not at the stage's limit (docs/evaluation.md).
                if mode is not None:
                    request["graph"] = graph
                    impl = baseline_round(request) or impl
                round_limit, limit_note = self._round_limit(w["label"], walls["baseline"])
                sample = [self.rng.random() for _ in range(sampled)]
                # Inputs drawn by the trusted worker into shared memory where the device allows
                # (shared_round.py): the seed and the sampled calls never reach the candidate.
                not_shared = shared_round.reason_not_shared(self, deadline) or shared_round.serve(
                    self, request, sample, deadline
                )
                if not_shared and f"{shared_round.OLD_PATH_NOTE} ({not_shared})" not in notes:
                    notes.append(f"{shared_round.OLD_PATH_NOTE} ({not_shared})")
                t0 = time.monotonic()
                by_round = (
                    t0 + round_limit < deadline
                )  # else the stage's own limit comes first, and its message
                header = (
                    {**request, "sample": sample}
                    if not_shared
                    else {**{k: v for k, v in request.items() if k != "seed"}, "shared": True}
                )
                reply, _ = self._candidate_call(
                    header,
                    t0 + round_limit if by_round else deadline,
                    limit_note=limit_note if by_round else None,
                )
                wall = time.monotonic() - t0
                served = None if not_shared else shared_round.verdict(self, deadline)
                if served is not None and reply.get("attach_failed") and self.sharing_proven:
                    raise self._refused(str(reply["attach_failed"])[:300])
                if served is not None and reply.get(
                    "attach_failed"
                ):  # this candidate worker cannot map it: the old path from here on
                    self._shared_reason = not_shared = (
                        f"the candidate's worker could not map the shared memory: {reply['attach_failed']}"
                    )
                    notes.append(f"{shared_round.OLD_PATH_NOTE} ({not_shared})")
                    t0 = time.monotonic()
                    reply, _ = self._candidate_call(
                        {**request, "sample": sample},
                        t0 + round_limit if by_round else deadline,
                        limit_note=limit_note if by_round else None,
                    )
                    wall, served = time.monotonic() - t0, None
                if (
                    served is not None
                ):  # the trusted worker's input refills are not the candidate's untimed time
                    wall = max(0.0, wall - float(served.get("serve_s") or 0.0))
                if reply.get("timed_output_invalid"):
                    raise self._violation(
                        "timed_output_mismatch",
                        f"{w['label']}: a timed call returned an invalid output where the correctness runs did not: {reply.get('error')}",
                        w["label"],
                    )
                if not reply.get("ok"):
                    raise StageFailed(
                        "failed",
                        f"{w['label']}: the candidate failed while being timed: {reply.get('error')}",
                    )
                times = _times(reply, int(timing["max_calls"]))
                if reply.get("mode") not in TIMING_MODES:
                    raise StageFailed(
                        "failed",
                        f"{w['label']}: the candidate's worker sent a malformed timing mode",
                    )
                walls["candidate"].append(
                    {
                        "wall_s": wall,
                        "reported_s": sum(times) / 1e6,
                        "calls": len(times),
                        **({"serve_s": float(served.get("serve_s") or 0.0)} if served else {}),
                    }
                )
                sides["candidate"] += times
                first_round = mode is None
                mode = reply.get("mode")
                checked += (
                    self._check_timed(w, first, sample, times, deadline)
                    if served is None
                    else self._judge_served(w, served, times)
                )
                if graph and mode != "graph":  # both sides are timed the same way
                    graph = False
                    notes.append(
                        f"timed without CUDA graphs: {reply.get('graph_error', 'capture failed')}"
                    )
                if first_round:  # the first round's baseline comes after the candidate's: it needs the candidate's mode
                    request["graph"] = graph
                    impl = baseline_round(request) or impl
                done = r + 1
                if (
                    target > 0
                    and done >= min_rounds
                    and all(ci_rel(sorted(sides[k])) <= target for k in sides)
                ):
                    break  # both medians known to ±target: more rounds would not move the speedup
            checked_total += checked
            self.emit(
                {
                    "type": "workload_timed",
                    "workload": w["label"],
                    "axes": w["axes"],
                    "mode": mode,
                    "rounds": done,
                    "candidate": {
                        **summarize(sides["candidate"]),
                        "wall_s": sum(x["wall_s"] for x in walls["candidate"]),
                        "rounds": walls["candidate"],
                        "checked_calls": checked,
                    },
                    "baseline": {
                        **summarize(sides["baseline"]),
                        "wall_s": sum(x["wall_s"] for x in walls["baseline"]),
                        "rounds": walls["baseline"],
                        "impl": impl,
                    },
                    "notes": notes,
                }
            )
        return {"workloads": len(self.job["stages"]["performance"]), "checked_calls": checked_total}

    def _round_limit(
        self, label: str, baseline_rounds: list[dict[str, float]]
    ) -> tuple[float, str | None]:
        """Seconds a candidate's timed round may take, and what a timeout then says: K× the
        baseline's slowest round of the workload so far plus a floor (graph capture, warm-up);
        before the first baseline round, the job's per-call limit; else the stage's limit."""
        timing, limits = self.job["timing"], self.job.get("limits") or {}
        factor, floor = timing.get("round_factor"), float(timing.get("round_floor_s") or 5.0)
        if factor and baseline_rounds:
            base = max(x["wall_s"] for x in baseline_rounds)
            limit = float(factor) * base + floor
            return (
                limit,
                f"a timed round of {label} took more than {limit:.1f} s ({factor:g}× the baseline's round of {base:.2f} s, plus {floor:g} s)",
            )
        if limits.get("call_s"):
            return (
                float(limits["call_s"]),
                f"the first timed round of {label} took more than the per-call limit of {float(limits['call_s']):g} s",
            )
        return math.inf, None

    def _check_timed(
        self,
        w: dict[str, Any],
        first: int,
        sample: list[float],
        times: list[float],
        deadline: float,
    ) -> int:
        """Check the outputs the candidate's worker kept of the round's sampled calls against
        the reference on regenerated inputs. Returns how many calls were checked."""
        want = sorted(first + 1 + k for k in picks(sample, len(times)))
        reply, payload = self._candidate_call(
            {"op": "kept"}, deadline, len(want) * self._out_bytes(w)
        )
        if not reply.get("ok"):
            raise StageFailed(
                "failed",
                f"{w['label']}: the candidate's worker could not return the outputs of the sampled timed calls: {reply.get('error')}",
            )
        if reply.get("calls") != want:
            raise self._violation(
                "timed_output_mismatch",
                f"{w['label']}: the candidate's worker returned the outputs of calls {reply.get('calls')}, not of the sampled calls {want}",
                w["label"],
            )
        if not want:
            return 0
        check = self._trusted_call(
            {
                "op": "check_timed",
                "workload": _workload(w),
                "member": self.key_prefix,
                "seed": w["seed"],
                "calls": want,
                "tensors": reply.get("tensors"),
            },
            deadline,
            payload,
        )
        if check.get("malformed"):
            raise self._violation(
                "timed_output_mismatch",
                f"{w['label']}: malformed outputs of timed calls: {check['malformed']}",
                w["label"],
            )
        return self._timed_results(w, check["results"])

    def _judge_served(self, w: dict[str, Any], served: dict[str, Any], times: list[float]) -> int:
        """The trusted worker's verdict on a round it served (shared_io.py)."""
        if served.get("violation"):
            raise self._violation(
                "timed_output_mismatch", f"{w['label']}: {served['violation']}", w["label"]
            )
        if served.get("calls") != len(times):
            raise self._violation(
                "timed_output_mismatch",
                f"{w['label']}: the candidate's worker reported {len(times)} timed calls; the trusted worker served {served.get('calls')}",
                w["label"],
            )
        return self._timed_results(w, served["results"])

    def _timed_results(self, w: dict[str, Any], results: list[dict[str, Any]]) -> int:
        for result in results:
            for name, outcome in result["outputs"].items():
                if not outcome["passed"]:
                    raise self._violation(
                        "timed_output_mismatch",
                        f"{w['label']}: timed call {result['call']} returned a wrong `{name}` ({outcome.get('message')}), "
                        "though the correctness runs passed: the output depends on something other than this call's inputs "
                        "(a cache keyed by address, shape or call count; work finished after the call returned; another stream)",
                        w["label"],
                    )
        return len(results)


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


def _times(reply: dict[str, Any], max_calls: int) -> list[float]:
    times = reply.get("times_us")
    if (
        not isinstance(times, list)
        or not 0 < len(times) <= max_calls
        or not all(
            isinstance(t, (int, float)) and not isinstance(t, bool) and math.isfinite(t) and t >= 0
            for t in times
        )
    ):
        raise StageFailed("failed", "the candidate's worker sent malformed timings")
    return [float(t) for t in times]


def _workload(w: dict[str, Any]) -> dict[str, Any]:
    """What a worker needs of a workload: its axes (for a task's make_inputs) and the concrete
    shapes the engine resolved."""
    return {"axes": w["axes"], "shapes": w["shapes"]}


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
