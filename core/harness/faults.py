"""How a stage fails and whose fault it is: `StageFailed` (status, message, fault), and the
failures of starting the workers and of the trusted worker's replies, which are the harness's
(`infrastructure`), not the candidate's."""

from __future__ import annotations

from typing import Any

from core.harness import jit_cache
from core.harness.workers import TaskFileChanged, Worker, WorkerDied, WorkerTimeout, candidate_view
from core.harness.zygote import Zygote, ZygoteError


class StageFailed(Exception):
    """A stage ended: its status (failed, timeout, crashed, error), what to tell the user, and
    whose fault it is (the candidate's, or the harness's: `infrastructure`)."""

    def __init__(self, status: str, message: str, fault: str = "candidate"):
        self.status, self.message, self.fault = status, message, fault
        super().__init__(message)


def trusted_failed(
    reply: dict[str, Any], what: str = "the reference/baseline failed"
) -> StageFailed:
    """A trusted worker's (or the checker's) reply that says it failed: `what`, its error and
    traceback, as the harness's fault."""
    return StageFailed(
        "error", f"{what}: {reply.get('error')}\n{reply.get('traceback', '')}", "infrastructure"
    )


def await_trusted(
    worker: Worker,
    timeout: float,
    name: str = "the reference/baseline worker",
    loads: str = "the reference/baseline",
) -> Worker:
    """`worker` (a trusted worker just forked: `name`) once it says it has loaded `loads`
    (hash-checked); its failure to start or to load is the harness's, not the candidate's."""
    try:
        ready, _ = worker.recv(timeout)
    except (WorkerTimeout, WorkerDied) as exc:
        raise StageFailed("error", f"{name} did not start: {exc}", "infrastructure") from None
    if not ready.get("ok"):
        raise trusted_failed(ready, f"{loads} could not be loaded")
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


def spawn_candidate(zygote: Zygote | None, job: dict[str, Any]) -> Worker:
    """A candidate's worker forked by `zygote` for `job`; one that cannot start is the
    harness's failure."""
    # Its own Triton cache folder, seeded with what it may share (jit_cache.py)
    jit_cache.STORE.seed(job["workdir"], jit_cache.source_key(job["candidate"]))
    try:
        return Worker.spawn("candidate", zygote, candidate_view(job))
    except (TaskFileChanged, ZygoteError, WorkerDied) as exc:
        raise StageFailed(
            "error", f"could not start the candidate's worker: {exc}", "infrastructure"
        ) from None
