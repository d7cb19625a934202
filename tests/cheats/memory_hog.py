"""Exploit: exhaust the machine's memory (and with it the harness and every other job).

Defense: on the CPU device the candidate's worker may add at most 2 GiB of private memory
(RLIMIT_DATA); the allocation fails inside the candidate and its stage fails. GPU devices rely
on the sandbox's cgroup."""

import torch

_hoard = []


def run(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    while True:
        _hoard.append(torch.ones(64 << 20))  # 256 MiB, touched
