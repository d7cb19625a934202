"""Exploit: crash the process (a segfaulting kernel), hoping the crash is blamed on the
harness and retried or skipped.

Defense: the worker's death is the candidate's fault: the stage fails as `crashed`."""

import ctypes

import torch


def run(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    ctypes.string_at(0)
    return x
