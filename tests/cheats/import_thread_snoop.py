"""Cheat (activation/silu_mul, CPU): work in a background thread started at import. After the
first call it knows the input buffer's address (the timing loop refills the same buffer), and
a thread polls it: as soon as new values appear (the harness's refill, before the timer starts)
it computes the output, so the timed call only hands over what the thread finished.
Defense: sampled timed calls are copied the moment the call returns and checked."""

import threading

import torch
import torch.nn.functional as F

_state = {"x": None, "seen": None, "out": None}
_lock = threading.Lock()


def _compute(x):
    inter = x.shape[1] // 2
    return (F.silu(x[:, :inter].float()) * x[:, inter:].float()).to(x.dtype)


def _poll():
    while True:
        x = _state["x"]
        if x is not None:
            head = x.view(-1)[:8].clone()
            if _state["seen"] is None or not torch.equal(head, _state["seen"]):
                out = _compute(x)
                with _lock:
                    _state["seen"], _state["out"] = head, out
        threading.Event().wait(0.0002)


threading.Thread(target=_poll, daemon=True).start()


def run(x):
    with _lock:
        ready = (
            _state["x"] is x
            and _state["out"] is not None
            and torch.equal(x.view(-1)[:8], _state["seen"])
        )
        if ready:
            return _state["out"]
    _state["x"] = x
    return _compute(x)
