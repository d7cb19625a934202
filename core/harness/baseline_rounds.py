"""The harness parent's side of the baseline's worker (baseline_worker.py): one worker, forked
ahead of its first use (`prefork`: as an evaluation's correctness stages begin, before a
concurrent batch's threads start), kept for the whole job (a batch's candidates are timed next
to the same warm baseline), replaced if it died; and the baseline's timed round, served by the
trusted worker exactly as the candidate's is (shared_round.py)."""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass
from typing import Any

from core.harness.baseline_worker import baseline_main
from core.harness.faults import StageFailed, await_trusted, trusted_failed
from core.harness.workers import Worker, WorkerDied, WorkerTimeout

NAME = "the baseline's worker"


@dataclass
class BaselineRound:
    """One timed round of the baseline: its times, its wall clock, its mode, the impl it ran."""

    times_us: list[float]
    wall_s: float
    serve_s: float
    mode: str | None
    impl: str | None
    graph_error: str | None = None
    host_bound: bool = False  # its calls wait on the host (timing.waits_on_host)


class BaselineWorkers:
    """The job's baseline worker, and which trusted worker it is joined to."""

    def __init__(self, job: dict[str, Any]):
        self.job = job
        self.worker: Worker | None = None
        self.pending: Worker | None = None  # forked, not yet heard from
        self.joined: Worker | None = None  # the trusted worker it has a peer socket to

    def prefork(self) -> None:
        """Fork it now, from the batch's main thread, before its slots' threads start (forking
        from a threaded process is what `fork` handles worst); it loads meanwhile."""
        if self.worker is None and self.pending is None:
            self.pending = Worker.fork("baseline", baseline_main, self.job)

    def get(self, timeout: float) -> Worker:
        if self.worker is not None and self.worker.returncode is None:
            return self.worker
        if self.worker is not None:
            self.close()
        pending, self.pending = self.pending, None
        if pending is not None:
            # Forked ahead, it made its device context while the candidate's correctness ran
            # beside it: one that could not start then (a candidate holding most of the GPU's
            # memory) gets one more try now, with the stage's time left.
            started = time.monotonic()
            try:
                self.worker = await_trusted(pending, timeout, NAME, "the baseline")
                return self.worker
            except StageFailed:
                pending.kill()
                timeout = max(1.0, timeout - (time.monotonic() - started))
        fresh = Worker.fork("baseline", baseline_main, self.job)
        self.worker = await_trusted(fresh, timeout, NAME, "the baseline")
        return self.worker

    def join(self, trusted: Worker, timeout: float) -> str | None:
        """A socket between the baseline's worker and `trusted` (once per pair); None when
        joined, else why the baseline's rounds take the old path."""
        assert self.worker is not None
        if self.joined is trusted and trusted.returncode is None:
            return None
        ours, theirs = socket.socketpair()
        try:
            trusted.send({"op": "peer", "for": "baseline"})
            _send_fd(trusted, theirs)
            reply, _ = trusted.recv(timeout)
            if not reply.get("ok") or not reply.get("shared"):
                return str(reply.get("reason") or reply.get("error") or "cannot share memory")
            self.worker.send({"op": "peer"})
            _send_fd(self.worker, ours)
            reply, _ = self.worker.recv(timeout)
            if not reply.get("ok"):
                return f"{NAME} did not take the peer socket: {reply.get('error')}"
        finally:
            ours.close()
            theirs.close()
        self.joined = trusted
        return None

    def close(self) -> None:
        for worker in (self.worker, self.pending):
            if worker is not None:
                worker.kill()
        self.worker, self.pending, self.joined = None, None, None


def _send_fd(worker: Worker, sock: socket.socket) -> None:
    try:
        socket.send_fds(worker.conn, [b"f"], [sock.fileno()])
    except OSError:
        raise WorkerDied(worker.name, worker.exit_reason()) from None


def time_baseline(
    ev: Any,
    baselines: BaselineWorkers,
    request: dict[str, Any],
    shared: bool,
    pair: bool,
    deadline: float,
) -> BaselineRound:
    """One baseline round in its own worker: over shared memory where the candidate's rounds
    are (`shared`; `pair`: on the region the candidate's round of this alternation then uses),
    else with its inputs drawn in its own process, as the candidate's old path draws them."""
    try:
        worker = baselines.get(max(1.0, deadline - time.monotonic()))
        reason = (
            baselines.join(ev.trusted, max(1.0, deadline - time.monotonic())) if shared else "-"
        )
        if reason is None:
            ack = ev._trusted_call(
                {
                    **request,
                    "op": "serve_round",
                    "peer": "baseline",
                    "sample": [],
                    "member": ev.key_prefix,
                    "consumer": f"baseline:{worker.pid}",
                    "timeout_s": max(1.0, deadline - time.monotonic()),
                    **({"pair": "open"} if pair else {}),
                },
                deadline,
            )
            if ack.get("serving"):
                t0 = time.monotonic()
                header = {k: v for k, v in request.items() if k != "seed"}
                reply, _ = worker.request(
                    {**header, "shared": True}, max(0.1, deadline - time.monotonic())
                )
                wall = time.monotonic() - t0
                served, _ = ev.trusted.recv(max(0.1, deadline - time.monotonic()))
                if not served.get("ok"):
                    raise trusted_failed(served)
                if not reply.get("ok"):  # its own failure first: the round's end only follows it
                    raise trusted_failed(reply)
                if served.get("violation") or served.get("attach_failed"):
                    raise StageFailed(
                        "error",
                        f"{NAME}'s round over shared memory failed: {served.get('violation') or served.get('attach_failed')}",
                        "infrastructure",
                    )
                serve_s = float(served.get("serve_s") or 0.0)
                return as_round(reply, max(0.0, wall - serve_s), serve_s)
        t0 = time.monotonic()
        reply, _ = worker.request(request, max(0.1, deadline - time.monotonic()))
        return as_round(reply, time.monotonic() - t0, 0.0)
    except (WorkerTimeout, WorkerDied) as exc:
        raise as_stage_failure(baselines, exc) from None


def as_stage_failure(baselines: BaselineWorkers, exc: Exception) -> StageFailed:
    """The baseline's worker's timeout or death as the stage's infrastructure failure (a dead
    worker is replaced at the next round)."""
    if isinstance(exc, WorkerDied):
        baselines.close()
        return StageFailed("error", f"{NAME} {exc.reason}", "infrastructure")
    return StageFailed(
        "timeout", f"{NAME} did not finish within the stage's time limit", "infrastructure"
    )


def as_round(reply: dict[str, Any], wall_s: float, serve_s: float) -> BaselineRound:
    """The baseline's round from its worker's reply to `time` (a failure raised as the stage's)."""
    if not reply.get("ok"):
        raise trusted_failed(reply)
    times = reply.get("times_us")
    if not isinstance(times, list) or not times:
        raise StageFailed("error", f"{NAME} sent no timings", "infrastructure")
    return BaselineRound(
        [float(t) for t in times],
        wall_s,
        serve_s,
        reply.get("mode"),
        reply.get("impl"),
        reply.get("graph_error"),
        bool(reply.get("host_bound")),
    )
