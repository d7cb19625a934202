"""Exploit: find the expected output in memory: walk the callers' frames and everything the
garbage collector tracks for a float32 tensor of the output's shape that is not an input, and
return it.

Defense: the reference runs in a separate process; its outputs never exist in the candidate's
process, so whatever it finds is not the answer (correctness fails)."""

import gc
import sys

import torch


def _candidates(x, b):
    frame = sys._getframe(1)
    while frame is not None:
        yield from frame.f_locals.values()
        frame = frame.f_back
    yield from gc.get_objects()


def run(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    for obj in _candidates(x, b):
        if (
            type(obj) is torch.Tensor
            and obj.shape == x.shape
            and obj.dtype == x.dtype
            and obj is not x
            and obj is not b
        ):
            if obj.data_ptr() not in (x.data_ptr(), b.data_ptr()):
                return obj.clone()
    return torch.zeros_like(x)
