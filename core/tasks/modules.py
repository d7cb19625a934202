"""A task's own Python files (reference.py, baseline.py, inputs.py) loaded by path, as the
validator, the importers' checks and add-model's probe run them on the CPU."""

from __future__ import annotations

import importlib.util
import types
from pathlib import Path


def load_module(path: Path, name: str) -> types.ModuleType:
    """The module at `path`, imported under `name` (not registered in sys.modules)."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
