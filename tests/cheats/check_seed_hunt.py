"""Exploit (the probe of the trusted-process input path for correctness runs): at every call,
search the callers' frames and everything the garbage collector tracks for the seed of the
correctness or generalization run it is in (a `run` request carrying `seed`, a harness frame's
`seed`). Where it finds one it returns a wrong output from then on (a cheat would regenerate
the run's inputs, or look its outputs up in a table built offline; wrong outputs make a find
unmissable).

Defense: the trusted worker draws every correctness run's inputs into shared memory
(core/harness/shared_check.py); the candidate's process gets a layout, no seed, so it finds
nothing and passes. On the old path (`timing.shared_io: false`) it finds the seed."""

import gc
import sys

import torch

_found = []


def _secret(obj) -> bool:
    return isinstance(obj, dict) and obj.get("op") == "run" and isinstance(obj.get("seed"), int)


def _look() -> None:
    frame = sys._getframe(2)
    while frame is not None:
        names = frame.f_locals
        if any(_secret(v) for v in names.values()) or isinstance(names.get("seed"), int):
            _found.append(frame.f_code.co_name)
            return
        frame = frame.f_back
    for obj in gc.get_objects():
        try:
            if _secret(obj):
                _found.append(type(obj).__name__)
                return
        except Exception:  # noqa: BLE001 - objects whose attributes raise
            continue


def run(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    if not _found:
        _look()
    return x * 3 + b if _found else x * 2 + b
