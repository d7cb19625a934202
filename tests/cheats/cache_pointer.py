"""Exploit: cache outputs keyed by the inputs' addresses. Correct until the same addresses come
back ten times in a row (the timing loop refills its inputs in place), then replays the cached
output: every timed call after the tenth costs nothing.

Defense: timed calls get fresh values at the same addresses, and the outputs of randomly
sampled timed calls are checked against the reference on those values (timed_output_mismatch)."""

import torch

_last = None
_streak = 0
_cache = {}


def run(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    global _last, _streak
    key = (x.data_ptr(), b.data_ptr(), tuple(x.shape))
    _streak = _streak + 1 if key == _last else 0
    _last = key
    if _streak >= 10 and key in _cache:
        return _cache[key]
    y = x * 2 + b
    _cache[key] = y
    return y
