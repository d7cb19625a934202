"""Exploit (GPU): return an empty output and have a thread launch the kernel a moment later,
once the call looks like part of a timing loop (the same input addresses ten times in a row).

Defense: the sampled timed call's output is copied the moment the call returns
(timed_output_mismatch); the events see an empty call (faster_than_speed_of_light)."""

import threading
import time

import torch

_last = None
_streak = 0


def _later(y, x, b, device):
    time.sleep(0.001)
    with torch.cuda.device(device):
        torch.add(b, x, alpha=2, out=y)


def run(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    global _last, _streak
    key = (x.data_ptr(), b.data_ptr())
    _streak = _streak + 1 if key == _last else 0
    _last = key
    if _streak < 10 or torch.cuda.is_current_stream_capturing():
        return x * 2 + b
    y = torch.zeros_like(x)
    threading.Thread(target=_later, args=(y, x, b, x.device), daemon=True).start()
    return y
