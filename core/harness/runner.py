"""One evaluation, stage by stage, each stage gating the next:
compile → correctness (visible workloads) → generalization (hidden) → performance.

Runs in the harness parent. It never touches the GPU itself: the workers do, so the parent can
keep forking fresh workers for later evaluations.
"""

from __future__ import annotations

import platform
import time
from pathlib import Path
from typing import Any, Callable

from .timing import summarize
from .workers import Worker, WorkerDied, WorkerTimeout, candidate_main, trusted_main

Emit = Callable[[dict[str, Any]], None]
LOG_LIMIT = 64 * 1024


class StageFailed(Exception):
    def __init__(self, status: str, message: str, fault: str = "candidate"):
        self.status, self.message, self.fault = status, message, fault
        super().__init__(message)


def versions() -> dict[str, Any]:
    import numpy
    import torch

    found: dict[str, Any] = {"python": platform.python_version(), "torch": torch.__version__, "numpy": numpy.__version__}
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


class Evaluation:
    def __init__(self, job: dict[str, Any], emit: Emit, close_fds: tuple[int, ...]):
        self.job, self.emit, self.close_fds = job, emit, close_fds
        self.workdir = Path(job["workdir"])
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.candidate: Worker | None = None
        self.trusted: Worker | None = None

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

    def _candidate_call(self, header: dict[str, Any], deadline: float) -> tuple[dict[str, Any], bytes | None]:
        assert self.candidate is not None
        try:
            return self.candidate.request(header, self._remaining(deadline))
        except WorkerTimeout:
            raise StageFailed("timeout", "the candidate did not finish within the stage's time limit") from None
        except WorkerDied as died:
            raise StageFailed("crashed", f"the candidate's process {died.reason}") from None

    def _trusted_call(self, header: dict[str, Any], deadline: float, payload: bytes | None = None) -> dict[str, Any]:
        assert self.trusted is not None
        try:
            reply, _ = self.trusted.request(header, self._remaining(deadline), payload)
        except WorkerTimeout:
            raise StageFailed("timeout", "the reference/baseline worker did not finish within the stage's time limit", "infrastructure") from None
        except WorkerDied as died:
            raise StageFailed("error", f"the reference/baseline worker {died.reason}", "infrastructure") from None
        if not reply.get("ok"):
            raise StageFailed("error", f"the reference/baseline failed: {reply.get('error')}\n{reply.get('traceback', '')}", "infrastructure")
        return reply

    # --- stages --------------------------------------------------------------------------

    def run(self) -> None:
        started = time.monotonic()
        self.emit({"type": "evaluation_started", "task_id": self.job["task_id"], "device": self.job["device"], "versions": versions()})
        status, fault = "passed", None
        try:
            for stage in ("compile", "correctness", "generalization", "performance"):
                ok, fault = self._stage(stage)
                if not ok:
                    status = "failed"
                    break
        finally:
            for worker in (self.candidate, self.trusted):
                if worker is not None:
                    worker.kill()
            self.emit({"type": "evaluation_finished", "status": status, "fault": fault, "seconds": time.monotonic() - started})

    def _stage(self, stage: str) -> tuple[bool, str | None]:
        limit = self.job["limits"][f"{'correctness' if stage == 'generalization' else stage}_s"]
        deadline = time.monotonic() + limit
        self.emit({"type": "stage_started", "stage": stage})
        t0 = time.monotonic()
        try:
            details = getattr(self, f"_{stage}")(deadline)
        except StageFailed as failed:
            if failed.fault == "candidate" and failed.status in ("timeout", "crashed") and self.candidate is not None:
                self.candidate.kill()  # nothing it started outlives the stage
            self.emit({
                "type": "stage_finished", "stage": stage, "status": failed.status, "message": failed.message,
                "fault": failed.fault, "seconds": time.monotonic() - t0, "log": self._log("candidate.log") if stage == "compile" else "",
            })
            return False, failed.fault
        self.emit({"type": "stage_finished", "stage": stage, "status": "passed", "seconds": time.monotonic() - t0, **details})
        return True, None

    def _compile(self, deadline: float) -> dict[str, Any]:
        self.candidate = Worker("candidate", candidate_main, self.job, self.close_fds)
        first = self.job["stages"]["correctness"][0]
        reply, _ = self._candidate_call({"op": "compile", "workload": _workload(first), "seed": first["seeds"][0]}, deadline)
        if not reply.get("ok"):
            raise StageFailed("failed", f"{reply.get('error')}\n{reply.get('traceback', '')}".strip())
        return {"log": self._log("candidate.log"), "note": reply.get("first_call_error")}

    def _correctness(self, deadline: float) -> dict[str, Any]:
        return self._check("correctness", self.job["stages"]["correctness"], deadline)

    def _generalization(self, deadline: float) -> dict[str, Any]:
        return self._check("generalization", self.job["stages"]["generalization"], deadline)

    def _check(self, stage: str, workloads: list[dict[str, Any]], deadline: float) -> dict[str, Any]:
        if self.trusted is None:
            self.trusted = Worker("trusted", trusted_main, self.job, self.close_fds)
        failures = []
        for w in workloads:
            worst: dict[str, Any] | None = None
            message = None
            for seed in w["seeds"]:
                key = f"{w['label']}#{seed}"
                assert self.trusted is not None
                self.trusted.send({"op": "expect", "key": key, "workload": _workload(w), "seed": seed})
                reply, payload = self._candidate_call({"op": "run", "workload": _workload(w), "seed": seed}, deadline)
                try:
                    expect_reply, _ = self.trusted.recv(self._remaining(deadline))
                except (WorkerTimeout, WorkerDied) as exc:
                    raise StageFailed("error", f"the reference worker failed: {exc}", "infrastructure") from None
                if not expect_reply.get("ok"):
                    raise StageFailed("error", f"the reference failed: {expect_reply.get('error')}", "infrastructure")
                if not reply.get("ok"):
                    message = f"seed {seed}: {reply.get('error')}"
                    worst = {"error": reply.get("error"), "traceback": reply.get("traceback")}
                    break
                check = self._trusted_call({"op": "check", "key": key}, deadline, payload)
                for name, result in check["outputs"].items():
                    if worst is None or result.get("max_abs_err", float("inf")) > worst.get("max_abs_err", -1.0) or not result["passed"]:
                        worst = {"output": name, "seed": seed, **result}
                    if not result["passed"] and message is None:
                        message = f"output `{name}`, seed {seed}: {result.get('message')}"
                if message:
                    break
            passed = message is None
            self.emit({"type": "workload_checked", "stage": stage, "workload": w["label"], "axes": w["axes"], "passed": passed, "message": message, "worst": worst})
            if not passed:
                failures.append(f"{w['label']}: {message}")
        if failures:
            raise StageFailed("failed", f"{len(failures)} of {len(workloads)} workload(s) wrong; first: {failures[0]}")
        return {"workloads": len(workloads)}

    def _performance(self, deadline: float) -> dict[str, Any]:
        timing = self.job["timing"]
        rounds = int(timing["alternations"])
        for w in self.job["stages"]["performance"]:
            sides: dict[str, list[float]] = {"candidate": [], "baseline": []}
            wall: dict[str, float] = {"candidate": 0.0, "baseline": 0.0}
            graph = bool(w.get("graph"))
            mode = None
            notes = []
            for r in range(rounds):
                request = {
                    "op": "time", "workload": _workload(w), "seed": w["seed"], "graph": graph, "first_index": r * 100_000,
                    "budget_ms": timing["budget_ms"] / rounds, "min_calls": timing["min_calls"], "max_calls": timing["max_calls"],
                    "sync_each_call": timing.get("sync_each_call", False),
                }
                t0 = time.monotonic()
                reply, _ = self._candidate_call(request, deadline)
                wall["candidate"] += time.monotonic() - t0
                if not reply.get("ok"):
                    raise StageFailed("failed", f"{w['label']}: the candidate failed while being timed: {reply.get('error')}")
                sides["candidate"] += reply["times_us"]
                mode = reply["mode"]
                if graph and mode != "graph":  # both sides are timed the same way
                    graph = False
                    notes.append(f"timed without CUDA graphs: {reply.get('graph_error', 'capture failed')}")
                request["graph"] = graph
                t0 = time.monotonic()
                base = self._trusted_call(request, deadline)
                wall["baseline"] += time.monotonic() - t0
                sides["baseline"] += base["times_us"]
            self.emit({
                "type": "workload_timed", "workload": w["label"], "axes": w["axes"], "mode": mode, "rounds": rounds,
                "candidate": {**summarize(sides["candidate"]), "wall_s": wall["candidate"]},
                "baseline": {**summarize(sides["baseline"]), "wall_s": wall["baseline"]},
                "notes": notes,
            })
        return {"workloads": len(self.job["stages"]["performance"])}


def _workload(w: dict[str, Any]) -> dict[str, Any]:
    """What a worker needs of a workload: its axes (for a task's make_inputs) and the concrete
    shapes the engine resolved."""
    return {"axes": w["axes"], "shapes": w["shapes"]}


def run_job(job: dict[str, Any], emit: Emit, close_fds: tuple[int, ...] = ()) -> None:
    Evaluation(job, emit, close_fds).run()
