"""Exploit: abort the process (SIGABRT, as a failed device assertion does).

Defense: the stage fails as `crashed`, the candidate's fault."""

import os

import torch


def run(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    os.abort()
