"""`triton.language.extra.libdevice` in Triton's interpreter, computed on numpy (about 100
functions: rsqrt, tanh, erf, pow, exp, ...), with the counting hook a `sim:` device uses
(LibdeviceCount). Enabled by triton_cpu.enable_interpreter. Imports only the standard library,
numpy and triton: the harness is shipped alone."""

from __future__ import annotations

import functools
import inspect
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from core.harness import triton_cpu  # its names are read at call time (they import each other)
from core.harness.triton_bf16 import _bf16_to_f32, _f32_to_bf16

_MARK = "_triton_cpu_patched"


def _erf(x):
    import torch

    return torch.from_numpy(np.ascontiguousarray(x)).erf().numpy()


def _lgamma(x):
    import torch

    return torch.from_numpy(np.ascontiguousarray(x)).lgamma().numpy()


def _round_half_away(x):
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


# libdevice functions the interpreter can run: numpy (or torch) on fp32 (fp64 for fp64 inputs),
# with the GPU's rounding variants (_rn, _rz, ...) all computed round-to-nearest: a last-bit
# difference the checks' tolerances absorb. A special-function flag feeds sim_count's counts.
_LIBDEVICE: dict[str, tuple[Callable[..., Any], bool]] = {
    "rsqrt": (lambda x: 1 / np.sqrt(x), True),
    "rsqrt_rn": (lambda x: 1 / np.sqrt(x), True),
    "sqrt": (np.sqrt, True),
    "cbrt": (np.cbrt, True),
    "rcbrt": (lambda x: 1 / np.cbrt(x), True),
    "exp": (np.exp, True),
    "exp2": (np.exp2, True),
    "exp10": (lambda x: np.power(10, x), True),
    "expm1": (np.expm1, True),
    "fast_expf": (np.exp, True),
    "fast_exp10f": (lambda x: np.power(10, x), True),
    "log": (np.log, True),
    "log2": (np.log2, True),
    "log10": (np.log10, True),
    "log1p": (np.log1p, True),
    "fast_logf": (np.log, True),
    "fast_log2f": (np.log2, True),
    "fast_log10f": (np.log10, True),
    "sin": (np.sin, True),
    "cos": (np.cos, True),
    "tan": (np.tan, True),
    "fast_sinf": (np.sin, True),
    "fast_cosf": (np.cos, True),
    "fast_tanf": (np.tan, True),
    "sinpi": (lambda x: np.sin(np.pi * x), True),
    "cospi": (lambda x: np.cos(np.pi * x), True),
    "asin": (np.arcsin, True),
    "acos": (np.arccos, True),
    "atan": (np.arctan, True),
    "atan2": (np.arctan2, True),
    "sinh": (np.sinh, True),
    "cosh": (np.cosh, True),
    "tanh": (np.tanh, True),
    "fast_tanhf": (np.tanh, True),
    "asinh": (np.arcsinh, True),
    "acosh": (np.arccosh, True),
    "atanh": (np.arctanh, True),
    "erf": (_erf, True),
    "erfc": (lambda x: 1 - _erf(x), True),
    "lgamma": (_lgamma, True),
    "normcdf": (lambda x: 0.5 * (1 + _erf(x / np.sqrt(2))), True),
    "pow": (np.power, True),
    "fast_powf": (np.power, True),
    "hypot": (np.hypot, False),
    "div_rn": (np.divide, False),
    "div_rz": (np.divide, False),
    "div_rd": (np.divide, False),
    "div_ru": (np.divide, False),
    "fast_dividef": (np.divide, False),
    "rcp_rn": (lambda x: 1 / x, False),
    "rcp_rz": (lambda x: 1 / x, False),
    "rcp_rd": (lambda x: 1 / x, False),
    "rcp_ru": (lambda x: 1 / x, False),
    "add_rn": (np.add, False),
    "add_rz": (np.add, False),
    "add_rd": (np.add, False),
    "add_ru": (np.add, False),
    "sub_rn": (np.subtract, False),
    "sub_rz": (np.subtract, False),
    "sub_rd": (np.subtract, False),
    "sub_ru": (np.subtract, False),
    "mul_rn": (np.multiply, False),
    "mul_rz": (np.multiply, False),
    "mul_rd": (np.multiply, False),
    "mul_ru": (np.multiply, False),
    "fma": (lambda a, b, c: a * b + c, False),
    "fma_rn": (lambda a, b, c: a * b + c, False),
    "fma_rz": (lambda a, b, c: a * b + c, False),
    "fma_rd": (lambda a, b, c: a * b + c, False),
    "fma_ru": (lambda a, b, c: a * b + c, False),
    "sqrt_rn": (np.sqrt, True),
    "sqrt_rz": (np.sqrt, True),
    "sqrt_rd": (np.sqrt, True),
    "sqrt_ru": (np.sqrt, True),
    "floor": (np.floor, False),
    "ceil": (np.ceil, False),
    "trunc": (np.trunc, False),
    "rint": (np.rint, False),
    "nearbyint": (np.rint, False),
    "round": (_round_half_away, False),
    "abs": (np.abs, False),
    "fmod": (np.fmod, False),
    "remainder": (np.remainder, False),
    "copysign": (np.copysign, False),
    "fdim": (lambda a, b: np.maximum(a - b, 0), False),
    "saturatef": (lambda x: np.clip(x, 0, 1), False),
    "nextafter": (np.nextafter, False),
    "isnan": (np.isnan, False),
    "isinf": (np.isinf, False),
    "isfinited": (np.isfinite, False),
    "finitef": (np.isfinite, False),
    "signbit": (np.signbit, False),
}
_LIBDEVICE_PREDICATES = {"isnan", "isinf", "isfinited", "finitef", "signbit"}


class LibdeviceCount:
    """sim_count's hook for the libdevice calls a counted program makes (elements, special)."""

    hook: Callable[[int, bool], None] | None = None


def _libdevice_on_numpy() -> None:
    # `from triton.language.extra import libdevice` names a module of stubs that the compiler
    # swaps for the target's library; the interpreter never does, so every call returned None
    # (Liger's `libdevice.rsqrt`, `libdevice.tanh`). While interpreting, each stub computes its
    # function on numpy; one with no CPU implementation says so (NotOnThisDevice). The compiler
    # never sees these: it resolves libdevice names on the target's own module by name.
    import triton.language as tl
    from triton.language.extra import libdevice
    from triton.runtime import interpreter as itp

    if getattr(libdevice, _MARK, False):
        return
    patched: dict[int, Callable[..., Any]] = {}
    for name, stub in list(vars(libdevice).items()):
        if not (inspect.isfunction(stub) and stub.__module__ == libdevice.__name__):
            continue
        patched[id(stub)] = _libdevice_function(name, stub, tl, itp)
        setattr(libdevice, name, patched[id(stub)])
    setattr(libdevice, _MARK, True)
    _rebind_imported(patched)


def _rebind_imported(patched: dict[int, Callable[..., Any]]) -> None:
    """A module imported before the interpreter was switched on bound the stubs themselves
    (`from triton.language.extra.libdevice import rsqrt`, as Liger does), and its kernels read
    them from its globals: a task library the harness preloads into every worker
    (preload.py) is imported so. Each such name is pointed at the patched function."""
    for module in list(sys.modules.values()):
        names = getattr(module, "__dict__", None)
        if not isinstance(names, dict):
            continue
        for key, value in list(names.items()):
            if id(value) in patched and inspect.isfunction(value):
                names[key] = patched[id(value)]


def _libdevice_function(
    name: str, stub: Callable[..., Any], tl: Any, itp: Any
) -> Callable[..., Any]:
    found = _LIBDEVICE.get(name)

    @functools.wraps(stub)
    def call(*args, _semantic=None, **kwargs):
        if not triton_cpu._interpreting():  # never the compiler's path (it resolves the name on the target's module): the stub as it was
            return stub(*args, **kwargs)
        if found is None:
            raise triton_cpu.NotOnThisDevice(
                f"triton.language.extra.libdevice.{name} has no CPU implementation in the interpreter"
            )
        fn, special = found
        tensors = [a for a in args if isinstance(a, tl.tensor)]
        ref = tensors[0].dtype if tensors else tl.float32
        wide = np.float64 if ref == tl.float64 else np.float32
        values = [_as_numpy(a, tl, wide) for a in args]
        with np.errstate(all="ignore"):
            out = np.asarray(fn(*values))
        if LibdeviceCount.hook is not None:
            LibdeviceCount.hook(int(out.size), special)
        if name in _LIBDEVICE_PREDICATES:
            dtype, data = tl.int1, out.astype(bool)
        elif ref == tl.bfloat16:
            dtype, data = ref, _f32_to_bf16(out)
        elif ref.is_floating():
            dtype, data = ref, out.astype(itp._get_np_dtype(ref))
        else:
            dtype, data = tl.float32, out.astype(np.float32)
        shape = list(np.shape(data))
        kind = (
            tl.block_type(dtype, shape)
            if shape and any(isinstance(getattr(t, "type", None), tl.block_type) for t in tensors)
            else dtype
        )
        return tl.tensor(itp.TensorHandle(np.asarray(data), dtype), kind)

    return call


def _as_numpy(value: Any, tl: Any, wide: Any) -> Any:
    if isinstance(value, tl.constexpr):
        value = value.value
    if isinstance(value, tl.tensor):
        data = value.handle.data
        if value.dtype == tl.bfloat16:
            return _bf16_to_f32(data)
        return data.astype(wide) if value.dtype.is_floating() or value.dtype.is_int() else data
    return np.asarray(value, dtype=wide)
