"""Exploit: reach the harness's live timing module through sys.modules and slow its clock.

Defense: the candidate's worker removes the harness from sys.modules before importing the
candidate; the lookup raises KeyError and the candidate fails to compile."""

import sys
import time

import torch

_real = time.perf_counter
sys.modules["core.harness.timing"]._perf_counter = lambda: _real() / 1000


def run(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    end = time.perf_counter() + 0.002
    while time.perf_counter() < end:
        pass
    return x * 2 + b
