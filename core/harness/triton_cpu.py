"""Run Triton kernels on CPU tensors through Triton's interpreter, with correct bf16 arithmetic.

Triton 3.6.0's interpreter keeps bf16 values as raw uint16 bit patterns in numpy and then runs
numpy arithmetic on those integers, so bf16 `+`, `*`, `tl.sum` and `tl.dot` return garbage
(triton-lang/triton#11584, #11604), and its fp32 -> bf16 cast truncates where the GPU rounds to
nearest even. We patch the interpreter at its numpy layer: whenever an operation that computes
meets a bf16 operand, it runs on float32 (bits << 16) and the result is rounded back to bf16 bits
with round-to-nearest-even. Operations that only move bits (load, store, select, reshape, ...)
stay untouched, since the uint16 patterns are exactly what is in memory.

Written against Triton 3.6.0; on another version every patch whose target exists is applied.
Imports only the standard library, numpy, torch and triton: this file is shipped alone.
"""

from __future__ import annotations

import functools
import os
import re
import time
import types
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

_TESTED_TRITON = "3.6."
_MARK = "_triton_cpu_patched"
SIM_HOOKED = "_sim_count_patched"  # core/harness/sim/hooks.py's mark on the builder it counts
_SHAPE = "_triton_cpu_shape"  # a block type's dims as constexprs, their tuple type, its numel


def enable_interpreter() -> None:
    """Make @triton.jit kernels defined AFTER this call run in Triton's interpreter on CPU tensors,
    with bf16 arithmetic computed correctly (widen to fp32, compute, round back to bf16 with
    round-to-nearest-even). Idempotent. Must be called before the candidate module is imported."""
    os.environ["TRITON_INTERPRET"] = "1"
    import triton

    # triton.knobs re-reads the env var on every access, unless someone assigned the knob: then
    # the assignment wins, so assign it too.
    runtime = _runtime_knobs()
    if runtime is not None:
        runtime.interpret = True
    tested = triton.__version__.startswith(_TESTED_TRITON)
    for patch in (
        _route_jit_functions_to_interpreter,
        _bench_autotune_without_driver,
        _fast_half_dot,
        _fix_bf16,
        _fix_fp8_casts,
        _patch_language_once_per_launch,
        _table_np_dtypes,
        _float_arguments_as_fp32,
        _interned_block_types,
        _same_shapes_not_broadcast,
        triton_libdevice._libdevice_on_numpy,
        _skip_dead_overflow_checks,
    ):
        try:
            patch()
        except (ImportError, AttributeError) as exc:
            if tested:
                raise
            warnings.warn(
                f"triton_cpu: {patch.__name__} skipped on Triton {triton.__version__}: {exc!r}",
                stacklevel=2,
            )


def _runtime_knobs():
    import triton

    return getattr(getattr(triton, "knobs", None), "runtime", None)


def _interpreting() -> bool:
    runtime = _runtime_knobs()
    if runtime is not None:
        return bool(runtime.interpret)
    return os.environ.get("TRITON_INTERPRET", "0").lower() in ("1", "true", "on", "yes")


def _route_jit_functions_to_interpreter() -> None:
    # @triton.jit picks JITFunction or InterpretedFunction at decoration time. Triton's own helpers
    # (tl.sum, tl.max, tl.cdiv, ...) were decorated when the warm parent imported triton, before
    # interpretation was on, and a JITFunction refuses to be called from an interpreted kernel.
    from triton.runtime import interpreter, jit

    cls = jit.JITFunction
    if getattr(cls.__call__, _MARK, False):
        return

    def interpreted(fn):
        if "_triton_cpu_interpreted" not in fn.__dict__:
            fn._triton_cpu_interpreted = interpreter.InterpretedFunction(fn.fn)
        return fn._triton_cpu_interpreted

    def interpreting(method):
        @functools.wraps(method)
        def wrapper(self, *args, **kwargs):
            if _interpreting():
                return getattr(interpreted(self), method.__name__)(*args, **kwargs)
            return method(self, *args, **kwargs)

        setattr(wrapper, _MARK, True)
        return wrapper

    cls.__call__ = interpreting(cls.__call__)  # a device function called from a kernel
    cls.run = interpreting(cls.run)  # a launch: kernel[grid](...), autotuners, heuristics


def _patch_language_once_per_launch() -> None:
    # The interpreter patches triton.language (every builtin of tl, tl.math and tl.tensor, found
    # by inspect.getmembers) at each launch, and again at each device-function call inside the
    # kernel, where the launch has already done it: 2-3 ms per call, a fifth of an interpreted
    # program that calls a helper in its loop (attention, rope). A launch now patches both
    # language modules, triton.language and triton.language.core (which Triton's own helpers,
    # tl.sum, tl.zeros, tl.max, see), whichever the kernel names, and the calls inside it skip
    # patching: 140 such calls were half of the sampling starter's interpreted time. Anything
    # else is patched as before, and the launch's scope restores both modules.
    import triton.language as tl
    from triton.runtime import interpreter

    original = interpreter._patch_lang
    if getattr(original, _MARK, False):
        return
    launches: list[frozenset[int]] = []  # the language modules of the launch running now
    both = frozenset((id(tl), id(tl.core)))

    def languages(fn) -> frozenset[int]:
        return frozenset(id(v) for v in fn.__globals__.values() if v is tl or v is tl.core)

    def seeing_both(fn):
        # Triton's _patch_lang reads only fn.__globals__: a stand-in that sees both modules
        return types.FunctionType(
            fn.__code__, {**fn.__globals__, "_triton_cpu_tl": tl, "_triton_cpu_core": tl.core}
        )

    @functools.wraps(original)
    def patch_lang(fn):
        if launches:  # a device-function call inside a kernel
            return _UNPATCHED if languages(fn) <= launches[-1] else original(fn)
        scope = original(seeing_both(fn))
        launches.append(both)
        restore = scope.restore

        def restore_and_end() -> None:
            try:
                restore()
            finally:
                launches.clear()

        scope.restore = restore_and_end
        return scope

    setattr(patch_lang, _MARK, True)
    interpreter._patch_lang = patch_lang


_TRITONS = object()  # a shortcut's answer: "ask Triton's own method"


def _shortcut(name: str, shortcut: Callable[..., object]) -> None:
    """Put `shortcut(self, *args)` in front of Triton's `TritonSemantic.<name>`: its answer
    where it has one, Triton's where it returns _TRITONS."""
    from triton.language import semantic

    cls = semantic.TritonSemantic
    original = getattr(cls, name)
    if getattr(original, _MARK, False):
        return

    @functools.wraps(original)
    def wrapper(self, *args):
        answer = shortcut(self, *args)
        return original(self, *args) if answer is _TRITONS else answer

    setattr(wrapper, _MARK, True)
    setattr(cls, name, wrapper)


def _skip_dead_overflow_checks() -> None:
    # The interpreter's options ask for integer-overflow checks (sanitize_overflow), but their
    # assert is a no-op without `debug` (TritonSemantic.device_assert returns at once), so each
    # int32 `+`, `-` and `*` also computed the result again in int64, two compares and an `and`
    # for nothing: a quarter of an elementwise starter's interpreted time. The compiler drops
    # the same dead code on a GPU. With `debug` on (a kernel's own, or TRITON_DEBUG) the checks
    # run and assert as before; so they do in a `sim:` device's process once it hooks the
    # interpreter to count its operations (core/harness/sim/hooks.py): its stored anchors were
    # counted with them.
    from triton.runtime import interpreter

    def checked_only_in_debug(self, lhs, rhs, binary_op):
        counted = getattr(interpreter.InterpreterBuilder.create_masked_load, SIM_HOOKED, False)
        if not (self.builder.options.debug or counted) and _interpreting():
            return None
        return _TRITONS

    _shortcut("binary_op_sanitize_overflow_impl", checked_only_in_debug)


def _same_shapes_not_broadcast() -> None:
    # Every binary operation asks whether its operands' shapes must be broadcast; for two blocks
    # of one shape (most of them) Triton's answer walks both shapes and returns them unchanged,
    # a seventh of an elementwise starter's interpreted time after the patches above.
    def same_shapes(self, lhs, rhs):
        left, right = lhs.type, rhs.type
        if left is right or (
            left.is_block()
            and right.is_block()
            # a `tl.tuple` of ints on Triton 3.6 (compared by its list: its own == is slower)
            and getattr(left.shape, "values", left.shape) == getattr(right.shape, "values", 0)
        ):
            return lhs, rhs
        return _TRITONS

    _shortcut("broadcast_impl_value", same_shapes)


def _interned_block_types() -> None:
    # Every interpreted operation builds its result's type, `tl.block_type(element, shape)`, and
    # the tensor's shape as a `tl.tuple` of constexprs with its own tuple type: each validates
    # the shape and formats a name again, the same few types for every program of a grid (half
    # of an elementwise starter's interpreted time, after the checks above). Types are values
    # (compared by element type and shape), so one object per (element type, shape) serves them
    # all, and a tensor's shape reuses its type's constexprs and tuple type (its `tl.tuple`, whose
    # values list a caller could change, is still its own).
    import math

    import triton.language.core as core
    from triton.runtime import interpreter

    block_type, tensor = core.block_type, core.tensor
    if getattr(tensor.__init__, _MARK, False):
        return
    interned_types: dict[tuple, Any] = {}

    def interned(element_ty, shape):
        try:
            dims = tuple(d.value if type(d) is core.constexpr else d for d in shape)
            key = (
                type(element_ty),
                element_ty.name,
                getattr(element_ty, "address_space", None),
                dims,
            )
            found = interned_types.get(key)
        except TypeError:  # an unhashable dimension: Triton's own path says what is wrong
            return block_type(element_ty, shape)
        if found is None:
            found = interned_types[key] = block_type(element_ty, shape)
        return found

    def tensor_init(self, handle, ty):
        self.handle = handle
        self.type = ty
        self.dtype = ty.scalar
        if not ty.is_block():
            self.shape, self.numel = core.tuple(()), core.constexpr(1)
            return
        known = ty.__dict__.get(_SHAPE)  # kept on the type: it lives as long as the type does
        if known is None:
            dims = [core.constexpr(d) for d in ty.shape]
            known = (dims, core.tuple(dims).type, core.constexpr(math.prod(ty.shape)))
            setattr(ty, _SHAPE, known)
        self.shape = core.tuple(known[0], known[1])
        self.numel = known[2]

    setattr(tensor_init, _MARK, True)
    block_type.with_element_ty = lambda self, scalar_ty: interned(scalar_ty, self.shape)
    interpreter.InterpreterBuilder.get_block_ty = lambda self, dtype, shape: interned(dtype, shape)
    tensor.__init__ = tensor_init


def _fast_half_dot() -> None:
    # tl.dot of fp16 (or fp8, which the interpreter widens to fp16) into an fp32 accumulator is
    # np.matmul(a, b, dtype=float32): numpy's own cast-and-loop path, 50x slower than BLAS
    # (15 ms for a 64x128x64 tile, most of an fp8 GEMM's CPU correctness time). Widening both
    # operands to fp32 first is exact (fp16 and fp8 values are fp32 values) and takes BLAS; the
    # sum is still fp32, in BLAS's order.
    import triton.language as tl
    from triton.runtime import interpreter as itp

    builder = itp.InterpreterBuilder
    original = builder.create_dot
    if getattr(original, "_triton_cpu_fast_dot", False):
        return

    def widened(h):
        if h.dtype.is_floating() and h.dtype.primitive_bitwidth == 8:
            return itp.TensorHandle(
                itp._convert_float(h.data, h.dtype, tl.float16, None)
                .view(np.float16)
                .astype(np.float32),
                tl.float32,
            )
        if h.dtype == tl.float16:
            return itp.TensorHandle(h.data.astype(np.float32), tl.float32)
        return h

    @functools.wraps(original)
    def create_dot(self, a, b, d, *args, **kwargs):
        if d.data.dtype == np.float32:
            a, b = widened(a), widened(b)
        return original(self, a, b, d, *args, **kwargs)

    create_dot._triton_cpu_fast_dot = True
    builder.create_dot = create_dot


def _table_np_dtypes() -> None:
    # The interpreter's _get_np_dtype builds a dict of 19 Triton dtypes on every call, and every
    # operation calls it: 40 us a time, 5% of an interpreted program. The answers, looked up.
    import triton.language as tl
    from triton.runtime import interpreter

    original = interpreter._get_np_dtype
    if getattr(original, _MARK, False):
        return
    table = {}
    for value in vars(tl).values():
        if isinstance(value, tl.dtype) and not isinstance(value, (tl.pointer_type, tl.block_type)):
            try:
                table[value] = original(value)
            except (
                KeyError
            ):  # a dtype the interpreter has no numpy type for: asked each time, as before
                pass
    pointer = np.dtype(np.uint64)

    @functools.wraps(original)
    def get_np_dtype(tt_dtype):
        if isinstance(tt_dtype, tl.block_type):
            tt_dtype = tt_dtype.element_ty
        if isinstance(tt_dtype, tl.pointer_type):
            return pointer
        found = table.get(tt_dtype)
        return found if found is not None else original(tt_dtype)

    setattr(get_np_dtype, _MARK, True)
    interpreter._get_np_dtype = get_np_dtype


class _Unpatched:
    """The scope of a device-function call that patched nothing: nothing to restore."""

    def restore(self) -> None:
        pass


_UNPATCHED = _Unpatched()


def _bench_autotune_without_driver() -> None:
    # Autotuner's benchmarker comes from the active GPU driver (or, given warmup=/rep=, from
    # triton.testing.do_bench, which asks the driver too): none on a CPU-only host. While
    # interpreting, every autotuner benchmarks with `benchmark_config`, whatever it was given.
    from triton.runtime import autotuner

    cls = autotuner.Autotuner
    original = cls.__dict__.get("do_bench")
    if (
        original is None
        or getattr(original, _MARK, False)
        or getattr(getattr(original, "fget", None), _MARK, False)
    ):
        return

    def do_bench(self):
        if _interpreting():
            return benchmark_config
        if isinstance(original, property):
            return original.fget(self)
        return (
            original.func(self) if hasattr(original, "func") else original.__get__(self, type(self))
        )

    setattr(do_bench, _MARK, True)
    cls.do_bench = property(do_bench)


class AutotuneTrials:
    """How an autotuner's trial of one config is judged while interpreting. By default the
    config runs once and its interpreter time is returned: that says nothing of a GPU, but a
    broken config still fails as it would there. A `sim:` device's counting installs its own
    judge (sim_count), which predicts the trial's GPU time and bills none of it."""

    judge: Callable[[Callable[[], None]], float] | None = None


def benchmark_config(kernel_call, quantiles=None, **_settings):
    judge = AutotuneTrials.judge
    if judge is not None:
        ms = judge(kernel_call)
    else:
        start = time.perf_counter()
        kernel_call()
        ms = (time.perf_counter() - start) * 1e3
    return [ms] * len(quantiles) if quantiles else ms


_time_once = benchmark_config  # the name this module used before


class NotOnThisDevice(NotImplementedError):
    """A construct Triton's interpreter cannot run on the CPU (the kernel may be correct: it is
    evaluated as 'cannot evaluate on this device', never as a wrong answer)."""


_UNSUPPORTED_MARKERS = (
    "not supported in interpreter mode",
    "0 active drivers",
    "block pointers are not supported",
    "make_block_ptr",
)


# torch's own words where code asks for a CUDA GPU that this process does not have (a CPU
# build, or no driver): a kernel written for a GPU, not a wrong one.
_NEEDS_A_GPU = (
    "Torch not compiled with CUDA enabled",
    "Found no NVIDIA driver",
    "No CUDA GPUs are available",
)


def unsupported_reason(exc: BaseException) -> str | None:
    """Why `exc` (or anything in its cause chain) says the interpreter cannot run the kernel on
    this device, or None where it is the kernel's own failure."""
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and all(current is not c for c in chain):
        chain.append(current)
        current = current.__cause__ or current.__context__
    for e in (
        chain
    ):  # our own verdict first: it names the construct (by name: the harness may be loaded twice)
        if type(e).__name__ == NotOnThisDevice.__name__:
            return str(e)
        found = re.search(
            r"NotOnThisDevice\((['\"])(.*?)\1\)", str(e)
        )  # the interpreter re-raises it as text
        if found:
            return found.group(2)
    for e in chain:
        text = str(e)
        if any(marker in text for marker in _NEEDS_A_GPU):
            return (
                f"the candidate asks torch for a CUDA GPU, which this device does not have "
                f"({text.splitlines()[0][:200]}): evaluate it on a GPU (a `sim:` device answers "
                "torch.cuda's questions about its GPU's figures, such as get_device_properties, "
                "and no others)"
            )
        if (isinstance(e, NotImplementedError) and "interpret" in text.lower()) or any(
            marker in text for marker in _UNSUPPORTED_MARKERS
        ):
            return (
                f"Triton's interpreter: {text.splitlines()[0][:300] if text else type(e).__name__}"
            )
    return None


def _float_arguments_as_fp32() -> None:
    # A Python float passed to a kernel is an fp32 scalar on the GPU (`eps.to(tl.float32)`,
    # `eps * x` in fp32), but the interpreter hands it to the kernel as a Python float, which has
    # no `.to()` (Liger's RMSNorm) and computes in float64.
    import triton.language as tl
    from triton.runtime import interpreter

    original = interpreter._implicit_cvt
    if getattr(original, _MARK, False):
        return

    @functools.wraps(original)
    def implicit_cvt(arg):
        if isinstance(arg, float):
            return tl.tensor(
                interpreter.TensorHandle(np.array([arg], dtype=np.float32), tl.float32), tl.float32
            )
        return original(arg)

    setattr(implicit_cvt, _MARK, True)
    interpreter._implicit_cvt = implicit_cvt


# Bound at import (a module imported after the candidate's worker hides the harness would be a
# fresh copy); triton_libdevice reads this module's names at call time.
from core.harness import triton_libdevice  # noqa: E402
from core.harness.triton_bf16 import _fix_bf16  # noqa: E402
from core.harness.triton_fp8 import _fix_fp8_casts  # noqa: E402
