"""Modules that moved, kept importable where earlier releases' docs taught them (`from core.env
import KernelEnv`, `core.adapters.trl.kernel_reward`): each old module is a stand-in that warns
once (DeprecationWarning, naming the new home) and hands every attribute to the new module, so a
trainer's script keeps working while it is updated."""

from __future__ import annotations

import importlib
import sys
import warnings
from collections.abc import Callable
from typing import Any


def stand_in(old: str, new: str) -> Callable[[str], Any]:
    """Warn that `old` moved to `new`; return the `__getattr__` the old module exports."""
    warnings.warn(
        f"{old} moved to {new}: import from {new} (or from core.rl, which stays put); "
        f"{old} will be removed in a later release",
        DeprecationWarning,
        stacklevel=3,
    )
    target = importlib.import_module(new)
    module = sys.modules[old]
    names = getattr(target, "__all__", [n for n in vars(target) if not n.startswith("_")])
    setattr(module, "__all__", list(names))  # noqa: B010 - a module object, typed without it

    def __getattr__(name: str) -> Any:
        try:
            return getattr(target, name)
        except AttributeError:
            raise AttributeError(
                f"module {old!r} (moved to {new}) has no attribute {name!r}"
            ) from None

    return __getattr__
