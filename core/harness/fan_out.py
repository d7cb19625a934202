"""Independent runs spread over two candidate workers where the evaluation has two cores: a
CPU or simulated device runs one worker's work slower than two (a GPU does not, so it keeps
one). The second worker is forked and compiled as the first; the replies are checked as every
candidate reply is (calls.py)."""

from __future__ import annotations

import math
import os
import select
import time
from collections.abc import Callable, Iterator
from typing import Any

from core.harness.calls import CandidateCalls, _workload
from core.harness.faults import StageFailed
from core.harness.workers import (
    TaskFileChanged,
    Worker,
    WorkerDied,
    WorkerTimeout,
    candidate_view,
)
from core.harness.zygote import ZygoteError

# devices whose candidate runs on the CPU: a GPU runs one worker's work faster than two CPU cores
ON_CPU = ("cpu", "sim")
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


class FanOut(CandidateCalls):
    """`_fan_out` and the second worker it may fork (`self.second`)."""

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
            and self.job.get("fan_out", True)  # False: a concurrent batch's slots share the cores
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
                self._end_worker(self.second)
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
