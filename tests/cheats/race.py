"""Exploit (or bug): a race that bites one call in three: right on the first call with given
inputs, wrong on the next call with the same inputs.

Defense: the first seed of every workload runs twice on the same inputs; both must pass, and
the message says the candidate is not deterministic."""

import torch

_calls = 0


def run(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    global _calls
    _calls += 1
    y = x * 2 + b
    if _calls % 3 == 0:
        y[: y.shape[0] // 2] = 0  # the half another thread had not written yet
    return y
