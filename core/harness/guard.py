"""The harness's own tensor work, out of the candidate's hooks, and proof of hooks left behind.

The candidate's process also runs the harness's refills, output copies and output checks. Two
kinds of hook could see that work and do the candidate's computation there, untimed, or fill an
output only when the harness reads it:

- a Python dispatch mode left pushed (`TorchFunctionMode`, `TorchDispatchMode`): it sees every
  torch call, even of functions the harness bound at import, even C methods of TensorBase;
- a torch function or method replaced (`torch.Tensor.copy_ = ...`: an inherited C method is not
  a key of `torch.Tensor`'s own dict until the candidate shadows it), which a task's inputs.py,
  run in the candidate's process, would call.

`trusted()` runs a block with all Python-level dispatch off (torch functions: modes and
subclasses; dispatch: modes and subclasses), so no mode sees it. `Watch` proves the rest: a
mode found on the stack between calls, or any change to torch's namespaces and classes (every
attribute a class resolves through its MRO, not only its own dict), is an integrity flag
(docs/integrity.md, class 1). The check between calls is an identity comparison of the watched
dicts' values (tens of microseconds); only when that differs are names resolved one by one.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import operator
import select
import socket
import struct
import sys
import types
import warnings
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import torch

_DisableTorchFunction = torch._C.DisableTorchFunction
_DisableTorchDispatch = getattr(torch._C, "_DisableTorchDispatch", None)
_len_function_stack = getattr(torch._C, "_len_torch_function_stack", None)
_len_dispatch_stack = getattr(torch._C, "_len_torch_dispatch_stack", None)
_is_not = operator.is_not
HOOKED, PATCHED = "harness_hooked", "torch_patched"  # the integrity flags (docs/integrity.md)
# What harness code run between two timed calls can reach: a task's inputs.py (torch's
# functions, Tensor methods, torch.nn.functional); a rank's barrier (the channel's modules).
INPUTS_REACH = ("torch", "torch.Tensor", "torch.nn.functional")
CHANNEL_REACH = (
    "json",
    "json.encoder",
    "json.decoder",
    "socket",
    "socket.socket",
    "select",
    "struct",
)


def _disable_dispatch() -> contextlib.AbstractContextManager[Any]:
    if _DisableTorchDispatch is not None:
        return _DisableTorchDispatch()
    from torch.utils._python_dispatch import _disable_current_modes  # older torch: pop the modes

    return _disable_current_modes()


@contextlib.contextmanager
def trusted() -> Iterator[None]:
    """No torch-function or dispatch mode, and no tensor subclass, sees what runs inside."""
    with _DisableTorchFunction(), _disable_dispatch():
        yield


def modes_left() -> list[str]:
    """The Python dispatch modes on this thread's stacks (torch's own default-device mode
    excepted: `torch.set_default_device` pushes it, and the harness passes devices explicitly)."""
    found = []
    try:
        from torch.overrides import _get_current_function_mode_stack
        from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

        stacks = (
            ("torch function mode", _get_current_function_mode_stack()),
            ("dispatch mode", _get_current_dispatch_mode_stack()),
        )
    except ImportError:  # pragma: no cover - every supported torch has both
        stacks = ()
    for kind, stack in stacks:
        for mode in stack:
            if (
                type(mode).__module__ == "torch.utils._device"
                and type(mode).__name__ == "DeviceContext"
            ):
                continue
            found.append(
                f"a {kind} ({type(mode).__module__}.{type(mode).__qualname__}) was left pushed"
            )
    return found


def _stack_depth() -> int:
    if _len_function_stack is None or _len_dispatch_stack is None:
        return -1  # unknown: ask modes_left
    return _len_function_stack() + _len_dispatch_stack()


def _flagged_namespaces() -> dict[str, Any]:
    """What the harness relies on between the candidate's calls: torch's namespaces and
    classes, and the modules its channel uses (a rank's barrier goes through them)."""
    spaces: dict[str, Any] = {
        "torch": torch,
        "torch.Tensor": torch.Tensor,
        "torch._C": torch._C,
        "torch.nn.functional": torch.nn.functional,
        "torch.cuda": torch.cuda,
        "torch.cuda.Event": torch.cuda.Event,
        "torch.Generator": torch.Generator,
        "json": json,
        "json.encoder": sys.modules.get("json.encoder"),
        "json.decoder": sys.modules.get("json.decoder"),
        "socket": socket,
        "socket.socket": socket.socket,
        "select": select,
        "struct": struct,
    }
    variable_functions = getattr(torch._C, "_VariableFunctions", None)
    if variable_functions is not None:  # torch.add and the other factories' home (an instance)
        spaces["torch._C._VariableFunctions"] = type(variable_functions)
    dist = sys.modules.get("torch.distributed")
    if (
        dist is not None and getattr(dist, "is_available", lambda: False)()
    ):  # watched where a rank imported it
        spaces["torch.distributed"] = dist
        c10d = sys.modules.get("torch.distributed.distributed_c10d")
        if c10d is not None:
            spaces["torch.distributed.distributed_c10d"] = c10d
        for name in ("ProcessGroup", "Work", "Store", "FileStore"):
            cls = getattr(dist, name, None)
            if isinstance(cls, type):
                spaces[f"torch.distributed.{name}"] = cls
    return {name: space for name, space in spaces.items() if space is not None}


def _resolved(space: Any) -> dict[str, Any]:
    """Name -> object as an attribute lookup finds it: for a class, every name it resolves
    through its MRO (an inherited C method shadowed by an assignment shows as a change); for a
    module, its callables."""
    if isinstance(space, type):
        found = {}
        for name in dir(space):
            try:
                found[name] = inspect.getattr_static(space, name)
            except AttributeError:
                continue
        return found
    return {
        key: value
        for key, value in list(vars(space).items())
        if not key.startswith("__") and not isinstance(value, types.ModuleType) and callable(value)
    }


_IMMUTABLE = (
    1 << 8
)  # Py_TPFLAGS_IMMUTABLETYPE: attribute assignment is refused (TensorBase, Generator, ...)


def _dicts(space: Any, quick: bool = False) -> list[Mapping[str, Any]]:
    """The dicts whose change could change what `space` resolves: a class's MRO (but `object`);
    `quick` leaves out immutable C types (only a gc trick on their dict changes them: the check
    at the end of each request still sees that)."""
    if isinstance(space, type):
        return [
            vars(cls)
            for cls in space.__mro__
            if cls is not object and not (quick and cls.__flags__ & _IMMUTABLE)
        ]
    return [vars(space)]


def _torch_own_wrap(qualname: str, original: Any, now: Any) -> bool:
    """Importing torch._dynamo (torch.compile, torch.nn.attention.varlen, ...) wraps
    torch.manual_seed in its disable decorator: an honest candidate's doing, not a patch."""
    return (
        qualname == "torch.manual_seed"
        and "torch._dynamo" in sys.modules
        and getattr(now, "__wrapped__", None) is original
    )


class Watch:
    """Torch's namespaces as they were before the candidate's code ran; `findings()` says what
    changed since (and which modes were left pushed), once per finding."""

    def __init__(self, spaces: dict[str, Any] | None = None, between_calls: tuple[str, ...] = ()):
        """`between_calls`: the namespaces that harness code run between two timed calls could
        reach (a task's inputs.py: torch, torch.Tensor, torch.nn.functional; a rank's barrier:
        the channel's modules); `findings(quick=True)` compares only those, all others are
        compared at the end of every request."""
        self.spaces = spaces if spaces is not None else _flagged_namespaces()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # deprecated names of torch.distributed warn when read
            self.original = {name: _resolved(space) for name, space in self.spaces.items()}
        self.quick_spaces = [self.spaces[n] for n in between_calls if n in self.spaces]
        self._full = self._fingerprint(list(self.spaces.values()), False)
        self._quick = self._fingerprint(self.quick_spaces, True)
        self.reported: set[str] = set()

    @staticmethod
    def _fingerprint(spaces: list[Any], quick: bool) -> list[list[Any]]:
        """What `_same` compares, per dict: [dict, its callables' keys (None for a class's
        dict: any new key may shadow an inherited attribute), their objects, its length, all
        its values]."""
        found = []
        with warnings.catch_warnings():
            warnings.simplefilter(
                "ignore"
            )  # deprecated names of torch.distributed warn when touched
            for space in spaces:
                for d in _dicts(space, quick):
                    keys = None
                    if not isinstance(space, type):
                        keys = tuple(
                            k
                            for k, v in list(d.items())
                            if not k.startswith("__")
                            and not isinstance(v, types.ModuleType)
                            and callable(v)
                        )
                    found.append(
                        [
                            d,
                            keys,
                            None if keys is None else tuple(map(d.get, keys)),
                            len(d),
                            tuple(d.values()),
                        ]
                    )
        return found

    @staticmethod
    def _same(fingerprint: list[list[Any]]) -> bool:
        """Identity of every value (fast); a module whose other globals changed (its state:
        torch.distributed's groups) is compared on its callables, then remembered as it is."""
        for entry in fingerprint:
            d, keys, callables, n, values = entry
            if len(d) == n and not any(map(_is_not, d.values(), values)):
                continue
            if keys is None or any(map(_is_not, map(d.get, keys), callables)):
                return False
            entry[3], entry[4] = len(d), tuple(d.values())
        return True

    def changed(self) -> list[str]:
        """Qualified names whose object is no longer the original one (slow: resolves each)."""
        names = []
        for name, space in self.spaces.items():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                now = _resolved(space)
            for key, value in self.original[name].items():
                current = now.get(key, value)
                if current is not value and not _torch_own_wrap(f"{name}.{key}", value, current):
                    names.append(f"{name}.{key}")
        return names

    def findings(self, quick: bool = False) -> list[dict[str, str]]:
        """New findings since the last call, as {check, message}: modes left pushed
        (`harness_hooked`), names replaced (`torch_patched`). Cheap when nothing changed
        (`quick`: only the namespaces reachable between calls)."""
        found: list[dict[str, str]] = []
        if _stack_depth() != 0:
            found += [{"check": HOOKED, "message": m} for m in modes_left()]
        if not self._same(self._quick if quick else self._full):
            found += [
                {"check": PATCHED, "message": f"the candidate replaced `{name}`"}
                for name in self.changed()
            ]
            # torch's own lazy additions (a submodule imported) do not trigger the slow path again
            self._full = self._fingerprint(list(self.spaces.values()), False)
            self._quick = self._fingerprint(self.quick_spaces, True)
        new = [f for f in found if f["message"] not in self.reported]
        self.reported.update(f["message"] for f in new)
        return new


class Hooks:
    """What a candidate's worker found during one request, for its reply: the watch is asked
    before every refill and after every call (`check`), inside the harness's own code."""

    def __init__(self, watch: Watch | None):
        self.watch = watch
        self.found: list[dict[str, str]] = []

    def check(self) -> None:
        """Between two calls: the mode stacks and the namespaces reachable from here."""
        if self.watch is not None:
            self.found += self.watch.findings(quick=True)

    def finish(self) -> None:
        """At the end of a request: everything watched."""
        if self.watch is not None:
            self.found += self.watch.findings()

    def take(self) -> list[dict[str, str]]:
        found, self.found = self.found, []
        return found


NO_HOOKS = Hooks(None)


def guarded(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn` run under `trusted()`."""

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with trusted():
            return fn(*args, **kwargs)

    wrapper.__name__, wrapper.__doc__, wrapper.__wrapped__ = fn.__name__, fn.__doc__, fn  # type: ignore[attr-defined]
    return wrapper
