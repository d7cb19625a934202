"""Exploit: submit the baseline itself, found in the task folder (scores 1x with no work, and
"wins" whenever timing noise favours it).

Defense: the sandbox masks the task folders; without it the static scan notes it."""

import importlib.util
from pathlib import Path

import torch

_base = None


def _find():
    here = Path(__file__).resolve()
    for up in here.parents[:4]:
        for path in up.glob("**/elementwise/axpy/baseline.py"):
            spec = importlib.util.spec_from_file_location("stolen_baseline", path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return module.run
    return None


def run(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    global _base
    _base = _base or _find()
    return _base(x, b) if _base is not None else torch.zeros_like(x)
