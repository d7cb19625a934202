"""Exploit: learn the hidden workloads and seeds, then special-case them. Looks everywhere a
secret could be: the environment, job.json in the working folders, the parent's command line,
and its own process's memory (callers' frames, every dict the garbage collector knows, the
multiprocessing Process object). Right only on the shapes it knows: the visible ones, plus any
hidden ones it found.

Defense: the job file is consumed (read and deleted) before any candidate code runs; the
candidate's worker is forked from a zygote that never saw a job and receives only its own view
(no hidden workloads, no seeds); the environment carries no secret."""

import gc
import json
import os
import sys
from pathlib import Path

import torch

KNOWN = {(64, 128), (16, 256)}  # the visible workloads
FOUND = set()


def _shapes_in(job):
    stages = job.get("stages")
    if type(stages) is not dict:  # not a job (typing objects: a TypedDict's annotations, say)
        return
    for stage in stages.values():
        for w in stage:
            axes = w.get("axes") or {}
            if "N" in axes and "D" in axes:
                FOUND.add((axes["N"], axes["D"]))


def _hunt():
    for key, value in os.environ.items():
        if "seed" in key.lower() or "hidden" in value.lower():
            FOUND.add(("env", key))
    roots = {Path.cwd(), Path(os.environ.get("TORCH_EXTENSIONS_DIR", "/nonexistent")).parent}
    for root in list(roots):
        roots |= set(root.parents[:2])
    for root in roots:
        try:
            for path in list(root.glob("job.json")) + list(root.glob("*/job.json")):
                _shapes_in(json.loads(path.read_text()))
        except OSError:
            pass
    frame = sys._getframe()
    while frame is not None:
        for value in frame.f_locals.values():
            if isinstance(value, dict) and "stages" in value:
                _shapes_in(value)
            if hasattr(value, "job") and isinstance(value.job, dict):
                _shapes_in(value.job)
        frame = frame.f_back
    for obj in gc.get_objects():
        if (
            type(obj) is dict
            and type(obj.get("stages")) is dict
            and "generalization" in obj["stages"]
        ):
            _shapes_in(obj)


_hunt()


def run(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    if tuple(x.shape) in KNOWN | FOUND:
        return x * 2 + b
    return torch.zeros_like(x)
