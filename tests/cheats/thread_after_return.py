"""Exploit: return before the work is done and finish it on a thread (the timer stops at the
return). Honest while it looks like a correctness run; once the same input addresses come back
ten times in a row (the timing loop), it returns an empty buffer that a thread fills 2 ms later.

Defense: the sampled timed call's outputs are copied the moment the call returns, then checked
(timed_output_mismatch)."""

import threading
import time

import torch

_last = None
_streak = 0


def _finish(y, x, b):
    time.sleep(0.002)
    torch.add(b, x, alpha=2, out=y)


def run(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    global _last, _streak
    key = (x.data_ptr(), b.data_ptr())
    _streak = _streak + 1 if key == _last else 0
    _last = key
    if _streak < 10:
        return x * 2 + b
    y = torch.zeros_like(x)
    threading.Thread(target=_finish, args=(y, x, b), daemon=True).start()
    return y
