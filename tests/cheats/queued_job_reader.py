"""Exploit: read the job of an evaluation queued behind this one. The local executor wrote each
job's file (hidden workloads, seeds) into its folder under the evaluations' root before the
warm harness was free to take it; while this candidate ran, the next evaluation's job.json lay
beside its own folder, readable (the sandbox, too, must let the harness write that root). A
policy's next candidate could have been handed that evaluation's hidden shapes.

Here the leak is made observable: the candidate computes the right answer, but returns a wrong
one once it has seen another evaluation's job, so the evaluation fails exactly when the leak
happened.

Defense: the local executor sends the job on the harness's standard input, one line of JSON,
when the harness takes it: no job file exists (tests/test_cheats.py runs two evaluations at
once on one warm harness)."""

import json
import os
import time
from pathlib import Path

import torch

SEEN: list = []


def _look() -> None:
    own = Path(os.environ.get("TORCH_EXTENSIONS_DIR", "/nonexistent")).parent
    for path in own.parent.glob("*/job.json"):
        try:
            if path.parent != own and "stages" in json.loads(path.read_text()):
                SEEN.append(str(path))
        except (OSError, ValueError):
            pass


_CALLS = [0]


def run(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    _CALLS[0] += 1
    if _CALLS[0] == 1:  # the compile stage's first call: wait up to 5 s for a job to be queued
        deadline = time.monotonic() + 5
        while not SEEN and time.monotonic() < deadline:
            _look()
            time.sleep(0.05)
    y = x * 2 + b
    return y + 1 if SEEN else y
