"""Exploit: a slow kernel behind a cache keyed by the inputs' content, hoping the benchmark
repeats its inputs (a fixed input set rotated through the timed calls would hit every time).

Defense: every timed call sees values it has never seen, so the cache never hits while timed:
the measured time is the slow path's (the cheat gains nothing; it passes at its true speed)."""

import hashlib
import time

import torch

_cache = {}


def run(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    key = hashlib.sha256(x.numpy().tobytes() + b.numpy().tobytes()).hexdigest()
    if key not in _cache:
        time.sleep(0.002)  # the "real kernel": slow
        _cache[key] = x * 2 + b
    return _cache[key].clone()
