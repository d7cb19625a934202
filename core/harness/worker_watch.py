"""What a candidate's process is watched for, and the harness hidden from it.

Before a candidate's module is imported, the harness's own modules are taken out of
`sys.modules` (`hide_harness`: a candidate that imports `core.harness.timing` gets a fresh copy
the worker does not use), and a snapshot of time's and builtins' functions is taken (`watch`),
so that replacing one at run time is reported on the next reply (`replaced`: a review note).
torch's namespaces and classes are guard.Watch's (`watch_hooks`), checked at the end of every
request (`report_hooks`): its findings are integrity flags.
"""

from __future__ import annotations

import builtins
import sys
import time
import types
from collections.abc import Callable
from typing import Any

from core.harness import guard

# Replacing one of these is a review note (the timer bound what it needs at import); torch's
# namespaces and classes are guard.Watch's, whose findings are integrity flags.
_WATCHED: dict[str, Callable[[], Any]] = {
    "time": lambda: time,
    "builtins": lambda: builtins,
}


def watch() -> list[tuple[str, Any, str, Any]]:
    """The functions and classes of the watched namespaces: (qualified name, namespace, key, object)."""
    snap = []
    for prefix, get in _WATCHED.items():
        namespace = vars(get())
        for key, value in list(namespace.items()):
            if key.startswith("__") or isinstance(value, types.ModuleType) or not callable(value):
                continue
            snap.append((f"{prefix}.{key}", namespace, key, value))
    return snap


def replaced(snap: list[tuple[str, Any, str, Any]]) -> list[str]:
    """Names in `snap` whose object is no longer the one snapshotted."""
    return [
        qualname
        for qualname, namespace, key, value in snap
        if namespace.get(key, value) is not value
    ]


def hide_harness() -> None:
    """Take the harness out of the candidate's easy reach: `sys.modules['core.harness.timing']`
    raises KeyError, `import core.harness.timing` makes a fresh copy that nothing uses, and the
    parent's `__main__` is replaced by an empty module."""
    for name in list(sys.modules):
        if name == "core" or name.startswith(("core.", "arena_")):
            del sys.modules[name]
    sys.modules["__main__"] = types.ModuleType("__main__")


def watch_hooks(custom_inputs: bool, between_calls: tuple[str, ...] = ()) -> guard.Hooks:
    """The watch on torch's namespaces, taken before any candidate code runs. Between two timed
    calls the mode stacks are always checked, and what harness code run there can reach: a
    task's inputs.py (`custom_inputs`) and `between_calls`."""
    return guard.Hooks(
        guard.Watch(between_calls=(guard.INPUTS_REACH if custom_inputs else ()) + between_calls)
    )


def report_hooks(reply: dict[str, Any], hooks: guard.Hooks) -> None:
    """Everything watched, checked at the end of a request: its findings go into the reply
    (`hooked`), where the parent makes each an integrity flag."""
    hooks.finish()
    found = hooks.take()
    if found:
        reply["hooked"] = found
