"""Exploit: cache outputs keyed by the input tensors' id() (the timing loop passes the same
tensor objects every call). Replays after ten calls with the same objects.

Defense: fresh input values for every timed call plus checks of sampled timed calls
(timed_output_mismatch)."""

import torch

_last = None
_streak = 0
_cache = {}


def run(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    global _last, _streak
    key = (id(x), id(b), tuple(x.shape))
    _streak = _streak + 1 if key == _last else 0
    _last = key
    if _streak >= 10 and key in _cache:
        return _cache[key]
    y = x * 2 + b
    _cache[key] = y
    return y
