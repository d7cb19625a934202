"""Correct bf16 arithmetic in Triton's interpreter (docs: triton_cpu's module docstring): a
computing operation meeting a bf16 operand runs on float32 and rounds back to nearest even.
Enabled by triton_cpu.enable_interpreter. Imports only numpy and triton: the harness is shipped
alone."""

from __future__ import annotations

import functools

import numpy as np

_MARK = "_triton_cpu_patched"


# bf16 <-> float32 on bit patterns


def _bf16_to_f32(bits: np.ndarray) -> np.ndarray:
    return (np.asarray(bits).astype(np.uint32) << 16).view(np.float32)


def _f32_to_bf16(values) -> np.ndarray:
    """Round float32 (or anything numpy can make float32) to bf16 bits, to nearest even."""
    x = np.asarray(values).astype(np.float32)  # float64 input is rounded twice: rare, accepted
    bits = x.view(np.uint32)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    quiet_nan = ((bits >> 16) | 0x0040).astype(
        np.uint16
    )  # the rounding carry could turn NaN into inf
    return np.where(np.isnan(x), quiet_nan, rounded)


def _fix_bf16() -> None:
    import triton.language as tl
    from triton.runtime import interpreter as itp

    bf16, f32 = tl.bfloat16, tl.float32
    if itp._get_np_dtype(bf16) != np.uint16:
        return  # the interpreter no longer keeps bf16 as bit patterns: nothing of this applies
    handle = itp.TensorHandle

    def is_bf16(h) -> bool:
        return isinstance(h, handle) and h.dtype == bf16

    def widen(h):
        return handle(_bf16_to_f32(h.data), f32) if is_bf16(h) else h

    def patch(owner, name, make):
        original = getattr(owner, name, None)
        if original is None or getattr(original, _MARK, False):
            return
        replacement = functools.wraps(original)(make(original))
        setattr(replacement, _MARK, True)
        setattr(owner, name, replacement)

    # Builder ops that compute: the result has the dtype of the argument at `result_arg`.
    def in_fp32(result_arg):
        def make(method):
            def wrapper(self, *args, **kwargs):
                if not any(is_bf16(a) for a in args):
                    return method(self, *args, **kwargs)
                out = method(self, *map(widen, args), **kwargs)
                # Comparisons come back as bool and tl.dot into an fp32 accumulator stays fp32.
                if is_bf16(args[result_arg]) and out.data.dtype == np.float32:
                    return handle(_f32_to_bf16(out.data), bf16)
                return out

            return wrapper

        return make

    builder = itp.InterpreterBuilder
    patch(builder, "binary_op", in_fp32(0))  # fadd, fmul, fdiv, frem, fsub, min/max, fcmp*
    patch(builder, "unary_op", in_fp32(0))  # exp, exp2, log, log2, sqrt, sin, cos, floor, ceil
    patch(builder, "create_erf", in_fp32(0))
    patch(builder, "create_rsqrt", in_fp32(0))
    patch(builder, "create_clampf", in_fp32(0))
    patch(builder, "create_fma", in_fp32(2))
    patch(builder, "create_dot", in_fp32(2))

    # Every fp/int <-> bf16 conversion goes through cast_impl; the stock one truncates fp32 -> bf16
    # and reinterprets the bits for the others (bf16 -> fp16/int, fp64/int -> bf16).
    def make_cast(cast_impl):
        def wrapper(self, src, dst_type):
            src = widen(src)
            if dst_type.scalar == bf16:
                return handle(_f32_to_bf16(cast_impl(self, src, f32).data), bf16)
            return cast_impl(self, src, dst_type)

        return wrapper

    patch(builder, "cast_impl", make_cast)

    # tl.full(..., value, tl.bfloat16) asks the builder for get_bf16, which the interpreter lacks.
    if not hasattr(builder, "get_bf16"):
        builder.get_bf16 = lambda self, value: handle(_f32_to_bf16(np.array([value])), bf16)

    # Reductions and scans bypass the builder: they call numpy on the handle's data directly.
    def narrow(t):
        if isinstance(t, (list, tuple)):
            return type(t)(narrow(x) for x in t)
        if not (isinstance(t, tl.tensor) and t.dtype == f32):
            return t
        return tl.tensor(handle(_f32_to_bf16(t.handle.data), bf16), t.type.with_element_ty(bf16))

    def make_reduction(method):
        def wrapper(self, input, *args, **kwargs):
            if not (isinstance(input, tl.tensor) and input.dtype == bf16):
                return method(self, input, *args, **kwargs)
            wide = tl.tensor(widen(input.handle), input.type.with_element_ty(f32))
            return narrow(method(self, wide, *args, **kwargs))

        return wrapper

    patch(itp.ReduceOps, "sum", make_reduction)
    patch(itp.ReduceOps, "min_max", make_reduction)
    patch(itp.ScanOps, "cumsum", make_reduction)
    patch(itp.ScanOps, "cumprod", make_reduction)
