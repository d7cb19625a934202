"""Quiescing: proof that a kept candidate worker has no GPU work queued or running.

A concurrent batch (concurrent.py) times each candidate alone. Killing every other candidate
process makes that true by construction, but then each candidate pays a fresh worker for its
timing (spawn, CUDA context, import, JIT-cache load, first call: about 1 s on the H200). This
module lets a candidate keep the worker its untimed stages ran in, by holding every waiting
worker in a state the CUDA driver vouches for:

- **hold** (when its untimed stages end): `cuCheckpointProcessLock(pid)` blocks the worker's
  further CUDA calls and completes the work it already submitted (its queue drains, or the
  lock times out), the driver's state must then read LOCKED, then SIGSTOP stops every thread
  of it (a stopped process submits nothing, not even through memory the driver mapped). Its
  other processes (children, escaped ones) are killed by its slot's zygote after that.
- **intact** (before and after each neighbour's timing): still stopped (`/proc/PID/stat`), so
  no one resumed it. No driver call on a stopped process: in the probe
  (bench/checkpoint_probe.py) the runs that did one hung.
- **resume** (its turn): intact, SIGCONT, the state still LOCKED (no one unlocked it),
  `cuCheckpointProcessUnlock`, RUNNING.

A waiting worker cannot be unlocked by a neighbour: the candidates are one unprivileged uid and
non-dumpable, and the driver refuses such a caller such a target (304, as the probe saw in
the sandbox's case), and the host locker answers only the harness parent, the one process
holding its socket (locker_link.py); a neighbour can only SIGCONT or kill it, which `intact`
sees.

Each step that is unavailable or fails (a CPU device, no libcuda or no checkpoint API, a
process the driver will not act on — a non-dumpable target of an unprivileged caller, the
sandbox's case without the host locker —, no CUDA context, a lock timeout, a hung driver call,
a locker that is not ready or refuses the pid) is a reason string,
and the caller falls back to today's path: kill, and a fresh worker for the timing.

Who calls the driver, behind one boundary (`Quiescer.call`, which the tests fake):

- **unsandboxed**: a small helper process (`helper_main`, forked by the harness parent like
  the trusted worker: the parent itself never initialises CUDA, it forks). It loads only
  libcuda through ctypes and shares the harness's PID namespace, so the pids the zygote
  reports are the ones the driver is asked about.
- **sandboxed**: the harness cannot (the 304 above), so the engine starts a trusted locker on
  the host beside it (core/evaluation/locker.py) and hands the harness a socket to it
  (locker_link.py). The harness sends its own pids; the locker maps each to the host's,
  among this sandbox's processes only, and calls the driver with the rights the sandbox lacks.
"""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
from typing import Any

from core.harness import cuda_checkpoint, locker_link
from core.harness.cuda_checkpoint import CALL_LIMIT_S, LOCKED, RUNNING, Call, bounded, load_driver
from core.harness.workers import Worker, WorkerDied, WorkerTimeout

LOCK_TIMEOUT_MS = 5000  # a worker idle after its stages drains in milliseconds
API_NAMES = {"lock": "Lock", "unlock": "Unlock", "state": "GetState"}
RESULTS = {  # CUresult codes the probe saw, in words
    3: "the worker has no CUDA context (CUDA_ERROR_NOT_INITIALIZED)",
    304: "the driver will not act on the worker (CUDA_ERROR_OPERATING_SYSTEM: in the sandbox, "
    "an unprivileged harness and non-dumpable workers)",
    600: f"the worker's submitted GPU work did not finish within {LOCK_TIMEOUT_MS} ms "
    "(CUDA_ERROR_NOT_READY)",
}
# The job's `quiesce_cpu` (ARENA_QUIESCE_CPU=1, core/evaluation/batch.py; the tests use it):
# keep workers on the CPU device too. Sound there: a CPU candidate has no work outside its own
# threads, and a stopped process runs none.


def helper_main(conn: socket.socket, job: dict[str, Any]) -> None:
    """The helper: answers {"op": lock|unlock|state, "pid", "timeout_ms"} with {"rc", "state"};
    first {"ready": bool, "reason"} once libcuda is loaded and initialised."""
    cuda_checkpoint.serve(
        conn,
        load_driver,
        lambda call, msg: bounded(call, msg["op"], int(msg["pid"]), int(msg["timeout_ms"])),
    )


def _no_queue_driver() -> Call:
    """The driver of a device without a queue: lock and unlock only move the state."""
    states: dict[int, int] = {}

    def call(op: str, pid: int, timeout_ms: int) -> dict[str, Any]:
        if op == "state":
            return {"rc": 0, "state": states.get(pid, RUNNING)}
        states[pid] = LOCKED if op == "lock" else RUNNING
        return {"rc": 0}

    return call


def proc_state(pid: int) -> str | None:
    """The process's state letter (R, S, T, Z, ...) from /proc, or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().decode(errors="replace").rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return None


class Quiescer:
    """One per concurrent batch: holds and resumes kept workers, or says why it cannot."""

    def __init__(self, job: dict[str, Any], call: Call | None = None):
        self.helper: Worker | None = None
        self.link: locker_link.LockerLink | None = None
        self.reason: str | None = None  # why nothing can be kept (None: it can be tried)
        self._lock = threading.Lock()  # the slots' threads share one helper channel
        device = job.get("device") or {}
        if call is None and job.get("quiesce_cpu") and device.get("type") == "cpu":
            call = _no_queue_driver()  # the CPU device has no device queue: a stop is the proof
        if call is None and device.get("type") != "cuda":
            self.reason = "the device is not a CUDA GPU"
        elif call is None and job.get("timing", {}).get("kind") == "predicted":
            self.reason = "a simulated device"
        elif call is None and locker_link.current() is not None:
            self.link = (
                locker_link.current()
            )  # sandboxed: the engine's host locker calls the driver
        elif call is None:
            self.helper = Worker.fork("quiesce", helper_main, {})  # from the batch's main thread
        self._call = call

    def ready(self, timeout: float = 30.0) -> bool:
        with self._lock:
            return self._ready(timeout)

    def _ready(self, timeout: float) -> bool:
        if self.reason is None and self.link is not None and self._call is None:
            why = self.link.ready(timeout)
            if why is None:
                self._call = self.link.call
            else:
                self._drop(why)
        if self.reason is None and self.helper is not None and self._call is None:
            try:
                reply, _ = self.helper.recv(timeout)
            except (WorkerTimeout, WorkerDied) as exc:
                reply = {"ready": False, "reason": f"the checkpoint helper did not start: {exc}"}
            if reply.get("ready"):
                self._call = self._ask
            else:
                self._drop(str(reply.get("reason")))
        return self.reason is None

    def _ask(self, op: str, pid: int, timeout_ms: int) -> dict[str, Any]:
        assert self.helper is not None
        try:
            reply, _ = self.helper.request(
                {"op": op, "pid": pid, "timeout_ms": timeout_ms},
                timeout_ms / 1000 + CALL_LIMIT_S + 5,
            )
        except (WorkerTimeout, WorkerDied) as exc:
            reply = {"rc": f"failed in the checkpoint helper: {exc}"}
        return reply

    def call(self, op: str, pid: int, timeout_ms: int = 0) -> dict[str, Any]:
        """The one boundary to the driver; a hung or failed helper ends every later hold."""
        with self._lock:
            if self._call is None:
                return {"rc": f"was not made: {self.reason or 'not ready'}"}
            reply = self._call(op, pid, timeout_ms)
            if not isinstance(reply.get("rc"), int) and not reply.get("refused"):
                self._drop(f"the driver's {op} call {reply.get('rc')}")
            return reply

    def _drop(self, reason: str) -> None:
        self.reason, self._call = reason, None
        if self.helper is not None:
            self.helper.kill()
            self.helper = None

    def _expect(self, op: str, pid: int, timeout_ms: int, state: int | None = None) -> str | None:
        reply = self.call(op, pid, timeout_ms)
        rc = reply.get("rc")
        if not isinstance(rc, int):  # not made, hung, refused: the words say which
            return f"cuCheckpointProcess{API_NAMES[op]} {rc}"
        if rc != 0:
            said = f": {RESULTS[rc]}" if rc in RESULTS else ""
            return f"cuCheckpointProcess{API_NAMES[op]} returned {rc}{said}"
        if state is not None and reply.get("state") != state:
            return f"the driver's state of the worker is {reply.get('state')}, not {state}"
        return None

    def hold(self, pid: int) -> str | None:
        """Lock the worker's CUDA (drain it), then stop it. None when held, else why not (the
        worker is then left running and unlocked, for the caller to kill)."""
        if not self.ready():
            return self.reason
        why = self._expect("state", pid, 0, RUNNING)
        if why is None:
            why = self._expect("lock", pid, LOCK_TIMEOUT_MS)
            if why is None:
                why = self._expect("state", pid, 0, LOCKED)
        if why is None:
            why = _signal(pid, signal.SIGSTOP, "stop")
        if why is not None:
            return why
        for _ in range(200):  # the stop is asynchronous: wait until every thread has stopped
            if proc_state(pid) in ("T", "t"):
                return None
            time.sleep(0.005)
        return "the worker did not stop within 1 s"

    @staticmethod
    def intact(pid: int) -> str | None:
        """None while the held worker is still stopped, else what happened to it."""
        state = proc_state(pid)
        if state is None or state in ("Z", "X"):
            return "its kept worker died while it waited"
        if state not in ("T", "t"):
            return f"its kept worker was resumed while it waited (state {state})"
        return None

    def resume(self, pid: int) -> str | None:
        """Its turn: still stopped, resumed, still locked, unlocked. None when it may be timed."""
        why = self.intact(pid) or _signal(pid, signal.SIGCONT, "resume")
        if why is not None:
            return why
        return (
            self._expect("state", pid, 0, LOCKED)  # no one unlocked it meanwhile
            or self._expect("unlock", pid, 0)
            or self._expect("state", pid, 0, RUNNING)
        )

    def close(self) -> None:
        if self.helper is not None:
            self.helper.kill()
            self.helper = None


def _signal(pid: int, sig: signal.Signals, verb: str) -> str | None:
    """Send `sig` to the worker; None when sent, else why not."""
    try:
        os.kill(pid, sig)
    except OSError as exc:
        return f"could not {verb} the worker: {exc}"
    return None
