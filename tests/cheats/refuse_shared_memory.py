"""Exploit (a downgrade): make the worker unable to map the trusted worker's shared memory, so
that the harness falls back to the old path, where the candidate's own process draws each
run's inputs from its seed and is told which timed calls are checked. At import it lowers the
process's limit on open files to what is open now: the descriptor of every later region cannot
arrive (the old path needs none). The kernel itself is honest.

Defense: the harness maps a small region into the worker before any candidate code runs
(core/harness/correctness.py, _prove_sharing). It worked, so this environment can share memory, and a
later failure to map is the candidate's doing: `shared_memory_refused`, the stage fails."""

import os
import resource

import torch

_open = len(os.listdir("/proc/self/fd"))
resource.setrlimit(resource.RLIMIT_NOFILE, (_open, _open))


def run(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return x * 2.0 + b
