"""The harness parent's side of timed rounds over shared memory (shared_io.py).

The parent joins the candidate's worker and the trusted worker with a socketpair (one end to
each, SCM_RIGHTS), once per candidate worker. For each round it asks the trusted worker to
serve it (the seed and the sampled calls go there, never to the candidate), then has the
candidate's worker time it, then reads the trusted worker's verdict on the sampled calls.
A job whose `timing.shared_io` is false keeps the old path (`Timing(shared_io=False)`: for
measurements and for tests that show what the old path let through).
"""

from __future__ import annotations

import socket
import time
from typing import Any

from core.harness.faults import StageFailed, trusted_failed
from core.harness.workers import WorkerDied, WorkerTimeout

OLD_PATH_NOTE = "inputs drawn in the candidate's process, outputs sent over its socket"


def reason_not_shared(ev: Any, deadline: float) -> str | None:
    """None when the evaluation's current candidate worker is joined to the trusted worker;
    else why its rounds keep the old path (said in the workload's notes)."""
    if getattr(ev, "_shared_of", None) is ev.candidate:
        return ev._shared_reason
    reason = (
        "the job's timing.shared_io is off"
        if ev.job["timing"].get("shared_io") is False
        else _join(ev, deadline)
    )
    ev._shared_of, ev._shared_reason = ev.candidate, reason
    return reason


def _join(ev: Any, deadline: float) -> str | None:
    ours, theirs = socket.socketpair()
    try:
        ev.trusted.send({"op": "peer"})
        _send_fd(ev.trusted, theirs)
        reply, _ = ev.trusted.recv(60.0)
        if not reply.get("ok") or not reply.get("shared"):
            return str(
                reply.get("reason")
                or reply.get("error")
                or "the trusted worker cannot share memory"
            )
        ev.candidate.send({"op": "peer"})
        _send_fd(ev.candidate, ours)
        reply, _ = ev._candidate_recv(ev.candidate, deadline)
        if not reply.get("ok"):
            return f"the candidate's worker did not take the peer socket: {reply.get('error')}"
        return None
    finally:
        ours.close()
        theirs.close()


def _send_fd(worker: Any, sock: socket.socket) -> None:
    try:
        socket.send_fds(worker.conn, [b"f"], [sock.fileno()])
    except OSError:
        raise WorkerDied(worker.name, worker.exit_reason()) from None


def serve(
    ev: Any,
    request: dict[str, Any],
    sample: list[float],
    deadline: float,
    pair: str | None = None,
) -> str | None:
    """Ask the trusted worker to serve the candidate's round (it draws the inputs, knows the
    sampled calls); None when it does, else why not (the round then takes the old path).
    `pair`: `close` runs it on the region of the alternation's baseline round (shared_io.py)."""
    consumer = ev._region_key(ev.candidate)
    ev.mapped[ev.candidate.pid] = consumer  # freed by its key once the worker is dead
    ack = ev._trusted_call(
        {
            **request,
            "op": "serve_round",
            "sample": sample,
            "member": ev.key_prefix,
            "consumer": consumer,
            "timeout_s": max(1.0, deadline - time.monotonic()),
            **({"pair": pair} if pair else {}),
        },
        deadline,
    )
    return None if ack.get("serving") else str(ack.get("reason"))


def verdict(ev: Any, deadline: float) -> dict[str, Any]:
    """The trusted worker's answer once the round ended: the sampled calls' results, the number
    of calls it served, or the protocol violation it saw."""
    try:
        reply, _ = ev.trusted.recv(max(0.1, deadline - time.monotonic()))
    except (WorkerDied, WorkerTimeout) as exc:
        raise StageFailed(
            "error",
            f"the reference/baseline worker failed while serving a timed round: {exc}",
            "infrastructure",
        ) from None
    if not reply.get("ok"):
        raise trusted_failed(reply)
    return reply
