"""Triton's language as its compiler needs it, while an AOT compile runs inside a worker whose
interpreter has patched it (core/harness/sim/aot.py): the pristine objects are kept before the
interpreter is switched on and swapped back for the compile. Imports only torch and triton:
the harness is shipped alone."""

from __future__ import annotations

import os
from typing import Any


class _compiled_helpers:
    """While compiling: the interpreter is off (Triton's code generator reads the knob), and the
    kernel's module sees compilable JITFunctions where the interpreter put InterpretedFunctions
    (helpers decorated after the interpreter was switched on)."""

    def __init__(self, fn: Any):
        self.globals = getattr(fn, "__globals__", {})
        self.saved: dict[str, Any] = {}
        self.knob: Any = None
        self.env: str | None = None

    def __enter__(self) -> None:
        import triton
        from triton.runtime.interpreter import InterpretedFunction
        from triton.runtime.jit import JITFunction

        runtime = getattr(getattr(triton, "knobs", None), "runtime", None)
        self.env = os.environ.get("TRITON_INTERPRET")
        os.environ["TRITON_INTERPRET"] = "0"
        if runtime is not None:
            self.knob = runtime.interpret
            runtime.interpret = False
        for name, value in list(self.globals.items()):
            if isinstance(value, InterpretedFunction):
                self.saved[name] = value
                self.globals[name] = JITFunction(value.fn)

    def __exit__(self, *exc: object) -> None:
        import triton

        self.globals.update(self.saved)
        runtime = getattr(getattr(triton, "knobs", None), "runtime", None)
        if runtime is not None and self.knob is not None:
            runtime.interpret = self.knob
        if self.env is None:
            os.environ.pop("TRITON_INTERPRET", None)
        else:
            os.environ["TRITON_INTERPRET"] = self.env


class PristineLanguage:
    """Triton's language modules as the compiler needs them.

    The interpreter patches `triton.language` (its builtins, `tensor` methods, `range`, ...)
    around each launch, but a device-function call (`InterpretedFunction.__call__`, e.g. the
    combine function of `tl.sum`) patches it and never restores it (Triton 3.6.0). The code
    generator then meets interpreter builtins and fails ("'ir.value' object has no attribute
    'dtype'"). `keep()` records the modules' attributes before any interpretation; `restored()`
    puts them back around a compile and the interpreter's versions after."""

    saved: list[tuple[Any, dict[str, Any]]] | None = None

    @classmethod
    def _owners(cls) -> list[Any]:
        import triton.language as tl

        owners = [
            tl,
            tl.core,
            tl.math,
            tl.tensor,
            tl.dtype,
            getattr(tl.core, "tensor_descriptor_base", None),
            getattr(tl, "standard", None),
        ]
        return [o for o in owners if o is not None]

    @classmethod
    def keep(cls) -> None:
        if cls.saved is None:
            cls.saved = [(o, dict(vars(o))) for o in cls._owners()]
        # The code generator copies `min`, `max` and `print` out of triton.language.core into a
        # class-level namespace when it is first imported: imported under the interpreter's
        # patches, it would keep the interpreter's builtins for good. Import it now, unpatched.
        import triton.compiler.code_generator  # noqa: F401

    @classmethod
    def restored(cls) -> _Swap:
        return _Swap(cls.saved or [])


def _pristine_codegen_builtins() -> None:
    """Point the code generator's `min`/`max`/`print` at the language's own builtins, whatever
    was patched when it was imported (a kernel using Python's min or max must compile
    regardless of import order)."""
    import triton.language as tl
    from triton.compiler import code_generator

    names = code_generator.CodeGenerator.builtin_namespace
    saved = dict(
        next((want for owner, want in (PristineLanguage.saved or []) if owner is tl.core), {})
    )
    for name, attr in (("min", "builtin_min"), ("max", "builtin_max"), ("print", "device_print")):
        value = saved.get(attr) or getattr(tl.core, attr, None)
        if value is not None and not getattr(value, "__module__", "").startswith("triton.runtime"):
            names[name] = value


class _Swap:
    def __init__(self, saved: list[tuple[Any, dict[str, Any]]]):
        self.saved, self.now = saved, [(o, dict(vars(o))) for o, _ in saved]

    @staticmethod
    def _apply(owner: Any, want: dict[str, Any]) -> None:
        for name, value in want.items():
            if (
                name in ("__dict__", "__weakref__", "__doc__")
                or vars(owner).get(name, _MISSING) is value
            ):
                continue
            try:
                setattr(owner, name, value)
            except (AttributeError, TypeError):
                pass
        for name in [n for n in vars(owner) if n not in want]:
            try:
                delattr(owner, name)
            except (AttributeError, TypeError):
                pass

    def __enter__(self) -> None:
        for owner, want in self.saved:
            self._apply(owner, want)

    def __exit__(self, *exc: object) -> None:
        for owner, want in self.now:
            self._apply(owner, want)


_MISSING = object()
