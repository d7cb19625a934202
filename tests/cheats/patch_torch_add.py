"""Exploit: slow the baseline down by replacing torch.add (the axpy baseline calls it) with a
slow wrapper, in the hope that the baseline runs in the same process.

Defense: the baseline runs in the trusted worker, which never imports the candidate: the patch
changes nothing there (the speedup stays the honest one). The runtime patch is noted."""

import time

import torch

_add = torch.add


def _slow_add(*args, **kwargs):
    time.sleep(0.002)
    return _add(*args, **kwargs)


torch.add = _slow_add


def run(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return x * 2 + b
