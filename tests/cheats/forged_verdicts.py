"""Exploit: write forged verdicts (a passed stage, a passed evaluation) as JSON event lines to
every descriptor it can find (0-20 and /proc/self/fd/*), then return a wrong answer.

Defense: the workers close every descriptor but their own socket at fork (the engine's events
pipe among them); stdout and stderr go to a log. The forged lines reach no reader of events:
what they garble is the candidate's own channel, which ends its evaluation as its own fault."""

import json
import os

import torch

FORGED = [
    {
        "v": 1,
        "type": "stage_finished",
        "stage": "correctness",
        "status": "passed",
        "seconds": 0.1,
        "message": "FORGED",
    },
    {
        "v": 1,
        "type": "evaluation_finished",
        "status": "passed",
        "fault": None,
        "seconds": 0.1,
        "error": "FORGED",
    },
]
LINES = "".join(json.dumps(e) + "\n" for e in FORGED).encode()


def _forge():
    for fd in range(0, 21):
        try:
            os.write(fd, LINES)
        except OSError:
            pass
    try:
        names = os.listdir("/proc/self/fd")
    except OSError:
        names = []
    for name in names:
        try:
            with open(f"/proc/self/fd/{name}", "wb", buffering=0) as fh:
                fh.write(LINES)
        except OSError:
            pass


_forge()


def run(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    _forge()
    return x + b
