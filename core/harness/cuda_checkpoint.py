"""The CUDA driver's checkpoint API, through ctypes: the only driver calls quiesce.py needs.

Its own module, importing only the standard library, because two processes load it: the
harness's checkpoint helper (unsandboxed, quiesce.helper_main) and the engine's host locker
(sandboxed, core/evaluation/locker.py), which must start in a moment and never import torch.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable
from typing import Any

from core.harness import channel

RUNNING, LOCKED = 0, 1  # CUprocessState
CALL_LIMIT_S = 10.0  # a driver call that takes longer is taken as hung: its caller is dropped
Call = Callable[[str, int, int], dict[str, Any]]  # (op, pid, timeout_ms) -> {"rc", "state"}


class _LockArgs(ctypes.Structure):  # CUcheckpointLockArgs
    _fields_ = [
        ("timeoutMs", ctypes.c_uint),
        ("reserved0", ctypes.c_uint),
        ("reserved1", ctypes.c_uint64 * 7),
    ]


def load_driver() -> Call:
    """The checkpoint API of this process's libcuda, initialised; OSError says why not."""
    lib = ctypes.CDLL("libcuda.so.1")
    rc = lib.cuInit(0)
    if rc != 0:
        raise OSError(f"cuInit returned {rc}")
    if not hasattr(lib, "cuCheckpointProcessLock"):
        raise OSError("the driver has no checkpoint API (cuCheckpointProcessLock)")

    def call(op: str, pid: int, timeout_ms: int) -> dict[str, Any]:
        if op == "lock":
            return {"rc": lib.cuCheckpointProcessLock(pid, ctypes.byref(_LockArgs(timeout_ms)))}
        if op == "unlock":
            return {"rc": lib.cuCheckpointProcessUnlock(pid, None)}
        state = ctypes.c_int(-1)
        rc = lib.cuCheckpointProcessGetState(pid, ctypes.byref(state))
        return {"rc": rc, "state": state.value if rc == 0 else None}

    return call


def bounded(call: Call, op: str, pid: int, timeout_ms: int) -> dict[str, Any]:
    """One driver call in a thread (ctypes drops the GIL), waited on for its timeout plus
    CALL_LIMIT_S: {"rc": "hung"} past that, and the caller makes no further call."""
    box: list[dict[str, Any]] = []
    worker = threading.Thread(target=lambda: box.append(call(op, pid, timeout_ms)), daemon=True)
    worker.start()
    worker.join(timeout_ms / 1000 + CALL_LIMIT_S)
    return box[0] if box else {"rc": "hung"}


Answer = Callable[[Call, dict[str, Any]], dict[str, Any]]


def serve(conn: Any, load: Callable[[], Call], answer: Answer) -> None:
    """A driver-calling process's loop (the harness's helper, the engine's host locker):
    {"ready": bool, "reason"} once `load` gave the driver's calls, then `answer(call, request)`
    for each request until the other end closes or a call hangs (the driver's state in this
    process is unknown then: no further calls)."""
    try:
        call = load()
    except OSError as exc:
        channel.send(conn, {"ready": False, "reason": str(exc)})
        return
    channel.send(conn, {"ready": True})
    while True:
        try:
            msg, _ = channel.recv(conn)
        except (channel.ChannelClosed, OSError):
            return
        reply = answer(call, msg)
        channel.send(conn, reply)
        if reply.get("rc") == "hung":
            return
