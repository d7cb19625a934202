"""Exploit: return the reference's own answer. Finds the task folder beside the workspace and
imports reference.py (no kernel written at all).

Defense: the sandbox masks the task folders. Without it, on the CPU device, nothing stops a
candidate from reading files its user can read; the static scan notes it (scan:task_files)."""

import importlib.util
from pathlib import Path

import torch

_ref = None


def _find():
    here = Path(__file__).resolve()
    for up in here.parents[:4]:
        for path in up.glob("**/elementwise/axpy/reference.py"):
            spec = importlib.util.spec_from_file_location("stolen_reference", path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return module.run
    return None


def run(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    global _ref
    _ref = _ref or _find()
    if _ref is None:
        return torch.zeros_like(x)
    return _ref(x, b).float()
