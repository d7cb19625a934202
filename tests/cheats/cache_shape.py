"""Exploit: compute once per shape, replay for every later call of that shape.

Defense: every correctness run draws fresh inputs from its own seed (correctness fails on the
second seed)."""

import torch

_cache = {}


def run(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    key = tuple(x.shape)
    if key not in _cache:
        _cache[key] = x * 2 + b
    return _cache[key].clone()
