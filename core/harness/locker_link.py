"""The sandboxed harness's end of the host locker (core/evaluation/locker.py).

Inside the sandbox the harness cannot make the CUDA checkpoint calls that keep a candidate's
worker for its timing (quiesce.py): it is an unprivileged uid in its own user and PID
namespaces and its workers are non-dumpable, so the driver answers 304. The engine starts a
small trusted locker on the host beside the harness, which has the rights the sandbox lacks,
and hands the harness one end of a socket pair: its descriptor number is in `ARENA_LOCKER_FD`
(read and removed by `attach_from_env`, in `python -m core.harness` before anything forks).

Only the harness parent holds the socket: its zygote, the trusted worker and the checkpoint
helper close every inherited descriptor when they start (`workers.close_inherited`), so no
candidate worker, forked by a zygote, ever has it; the socket is a pair, with no name to
connect to. The harness asks about pids as it sees them; the locker maps each to the host's
pid itself, among the processes of this sandbox only.

The protocol is the harness's channel (JSON headers): the locker first sends
{"ready": bool, "reason"}; then each {"op": lock|unlock|state, "pid", "timeout_ms"} is
answered with {"rc", "state"} as the in-harness helper answers, or {"refused": why} for a
pid that is not a process of this sandbox. A link that times out, closes or says `hung` is
broken for good (a late reply would answer the next question): every later hold falls back.
"""

from __future__ import annotations

import os
import socket
import threading
from typing import Any

from core.harness import channel

ENV = "ARENA_LOCKER_FD"
READY_TIMEOUT_S = 30.0
REPLY_SLACK_S = 15.0  # beyond the call's own timeout: the locker's limit (10 s) and transit

_link: LockerLink | None = None


class LockerLink:
    """One per harness: the socket to the host locker, shared by every batch in turn."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.reason: str | None = None  # why it cannot be used (None: ready, or not asked yet)
        self._ready = False
        self._lock = threading.Lock()

    def ready(self, timeout: float = READY_TIMEOUT_S) -> str | None:
        """None once the locker has loaded the driver, else why it cannot serve."""
        with self._lock:
            if not self._ready and self.reason is None:
                try:
                    reply, _ = channel.recv(self.sock, timeout)
                except channel.ChannelTimeout:
                    reply = {"reason": f"it sent no word within {timeout:.0f} s"}
                except channel.ChannelClosed as exc:
                    reply = {"reason": f"it is gone ({exc})"}
                if reply.get("ready"):
                    self._ready = True
                else:
                    self.reason = f"the host locker is not ready: {reply.get('reason')}"
            return self.reason

    def call(self, op: str, pid: int, timeout_ms: int) -> dict[str, Any]:
        """The driver's answer about the harness's `pid`, or {"rc": why not} (a string)."""
        with self._lock:
            if self.reason is not None or not self._ready:
                return {"rc": f"was not made: {self.reason or 'the host locker is not ready'}"}
            try:
                channel.send(self.sock, {"op": op, "pid": pid, "timeout_ms": timeout_ms})
                reply, _ = channel.recv(self.sock, timeout_ms / 1000 + REPLY_SLACK_S)
            except (channel.ChannelTimeout, channel.ChannelClosed, OSError) as exc:
                self.reason = f"the host locker stopped answering ({type(exc).__name__}: {exc})"
                return {"rc": f"was not answered: {self.reason}"}
            if "refused" in reply:
                # one pid not found (a worker that died): the batch's other holds go on
                return {
                    "rc": f"was refused by the host locker: {reply['refused']}",
                    "refused": True,
                }
            if reply.get("rc") == "hung":
                self.reason = "a driver call hung in the host locker"
            return reply


def attach_from_env() -> LockerLink | None:
    """The link the engine handed this harness (`ARENA_LOCKER_FD`), removed from the
    environment so that nothing the harness starts sees its number; None without one."""
    global _link
    text = os.environ.pop(ENV, "")
    if text.isdigit():
        try:
            sock = socket.socket(fileno=int(text))
        except OSError:
            return None
        sock.set_inheritable(False)  # a program the harness runs (a compiler) never gets it
        _link = LockerLink(sock)
    return _link


def current() -> LockerLink | None:
    return _link
