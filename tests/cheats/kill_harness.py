"""Exploit: kill the process that forked it (the zygote), hoping the evaluation ends as an
infrastructure fault: retried, and never scored as the candidate's failure.

Defense: the worker dies with the zygote (PR_SET_PDEATHSIG), and a dead worker is the
candidate's fault (`crashed`); the warm harness starts a fresh zygote before its next job."""

import os
import signal
import time

import torch

os.kill(os.getppid(), signal.SIGKILL)
time.sleep(5)


def run(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return x * 2 + b
