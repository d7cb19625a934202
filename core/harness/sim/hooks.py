"""How Triton's interpreter is hooked while a `Counting` is active (core/harness/sim/count.py):
its builder's loads, stores, dots, arithmetic and atomics are counted, every builder operation a
program runs is tallied as interpreted work (the clock its launch's sample grows by:
sim/clock.py), and its launcher runs the programs the count asks for, with `range`/`tl.range`
sampled. Imports only numpy, torch and triton: the harness is shipped alone."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

import numpy as np

from core.harness.sim import written as sim_written
from core.harness.sim.count import Counting
from core.harness.sim.launch import Launch, TensorArg
from core.harness.sim.loops import SampledRange

SFU_UNARY = {"exp", "exp2", "log", "log2", "sqrt", "sin", "cos"}
BILLED_OTHER = ("create_idiv", "create_umulhi", "create_gather", "create_histogram", "create_fabs")
# Operations whose interpreter work grows with their array arguments, not only with what they
# return: a load gathers from its addresses under its mask, a store scatters (and returns
# nothing), an atomic does both, and each access is also counted per address (sectors, the
# tensor it falls in, strays: sim/access.py); a dot reads its operands. Elsewhere the result is
# as large as the arguments, or larger (a broadcast), and stands for them.
READS_ITS_ARRAYS = (
    "create_load",
    "create_store",
    "create_masked_load",
    "create_masked_store",
    "create_atomic_rmw",
    "create_atomic_cas",
    "create_tensor_pointer_load",
    "create_tensor_pointer_store",
    "create_descriptor_load",
    "create_descriptor_store",
    "create_descriptor_gather",
    "create_descriptor_scatter",
    "create_dot",
)
_MARK = "_sim_count_patched"
_TALLIED = "_sim_work_tallied"


def _elements(handle: Any) -> int:
    data = getattr(handle, "data", None)
    return int(np.size(data)) if data is not None else 1


def _made(out: Any) -> int:
    """The elements an operation made: its handle's, each of a pair's (`create_split`), none for
    a store or a barrier. (Called on every operation a counted program runs: the common case,
    a handle of a numpy array, first.)"""
    data = getattr(out, "data", None)
    if data is not None:
        return int(getattr(data, "size", 1))
    if out is None:
        return 0
    if isinstance(out, (tuple, list)):
        return sum(_made(o) for o in out)
    return 1


def _arrays(args: tuple[Any, ...]) -> int:
    """The elements of an operation's array arguments (handles with data)."""
    return sum(int(np.size(a.data)) for a in args if getattr(a, "data", None) is not None)


def operation_names(builder: type) -> list[str]:
    """The interpreter builder's operations: its public methods, less where the grid stands
    (`set_grid_idx`, `set_grid_dim`) and the types and constants the semantic layer asks it
    for (`get_*`), which run no work of a program's."""
    return sorted(
        name
        for name in dir(builder)
        if not name.startswith(("_", "get_", "set_grid_")) and callable(getattr(builder, name))
    )


def install() -> None:
    """Hook the interpreter's builder and launcher once per process. The hooks do nothing while
    no `Counting` is active, so correctness runs are unaffected."""
    from triton.runtime import interpreter as itp

    builder = itp.InterpreterBuilder
    if getattr(builder.create_masked_load, _MARK, False):
        return

    def hook(name: str, make: Callable[[Callable[..., Any]], Callable[..., Any]]) -> None:
        original = getattr(builder, name)
        wrapped = functools.wraps(original)(make(original))
        setattr(wrapped, _MARK, True)
        setattr(builder, name, wrapped)

    def itemsize(ptrs: Any) -> int:
        return max(1, ptrs.get_element_ty().primitive_bitwidth // 8)

    def masked_load(original):
        def wrapper(self, ptrs, mask, other, *args, **kwargs):
            c = Counting.active
            if c is not None:
                c.access(
                    ptrs.data, mask.data if mask is not None else None, itemsize(ptrs), store=False
                )
            return original(self, ptrs, mask, other, *args, **kwargs)

        return wrapper

    def masked_store(original):
        def wrapper(self, ptrs, value, mask, *args, **kwargs):
            c = Counting.active
            if c is not None:
                c.access(
                    ptrs.data, mask.data if mask is not None else None, itemsize(ptrs), store=True
                )
            return original(self, ptrs, value, mask, *args, **kwargs)

        return wrapper

    def dot(original):
        def wrapper(self, a, b, d, *args, **kwargs):
            c = Counting.active
            if c is None:
                return original(self, a, b, d, *args, **kwargs)
            if c.dot(np.shape(a.data), np.shape(b.data), str(a.dtype.scalar)):
                return original(self, a, b, d, *args, **kwargs)  # an exact program (sim_count)
            # The values are not needed for a prediction: the accumulator passes through.
            return itp.TensorHandle(np.array(d.data, copy=True), d.dtype.scalar)

        return wrapper

    def counted(sfu: Callable[..., bool]):
        def make(original):
            def wrapper(self, *args, **kwargs):
                out = original(self, *args, **kwargs)
                c = Counting.active
                if c is not None:
                    c.alu(_elements(out), sfu(*args))
                return out

            return wrapper

        return make

    def atomic(original):
        def wrapper(self, *args, **kwargs):
            c = Counting.active
            if c is not None:
                rmw = bool(args) and not hasattr(args[0], "data")  # (op, ptr, val, mask, ...)
                ptr = args[1] if rmw else args[0]
                mask = args[3] if rmw and len(args) > 3 else None
                c.atomic(ptr.data, getattr(mask, "data", None), itemsize(ptr))
            return original(self, *args, **kwargs)

        return wrapper

    hook("create_masked_load", masked_load)
    hook("create_masked_store", masked_store)
    hook("create_dot", dot)
    hook(
        "binary_op",
        counted(
            lambda lhs, rhs, op: (
                getattr(op, "__name__", "") == "divide"
                and np.issubdtype(np.asarray(lhs.data).dtype, np.floating)
            )
        ),
    )
    hook("unary_op", counted(lambda arg, op: getattr(op, "__name__", "") in SFU_UNARY))
    hook("ternary_op", counted(lambda *a: False))
    hook("create_fma", counted(lambda *a: False))
    hook("create_rsqrt", counted(lambda *a: True))
    hook("create_erf", counted(lambda *a: True))
    hook("create_atomic_rmw", atomic)
    hook("create_atomic_cas", atomic)
    # Work done outside binary_op/unary_op: billed as arithmetic on the elements it returns
    # (conversions, pointer arithmetic and layout changes stay free: a GPU folds them into the
    # loads, stores and arithmetic around them).
    for name in BILLED_OTHER:
        hook(name, counted(lambda *a: False))
    _tally_operations(builder)
    _hook_reductions(itp)
    _hook_launch(itp)


def _tally_operations(builder: type) -> None:
    """Tally every builder operation a counted program runs (Counting.tally: the sample's
    clock), outermost around the counting hooks above. An operation that calls others (a
    `create_fadd` calls `binary_op`, a `create_load` `create_masked_load`) is one operation:
    those it calls are not tallied again."""
    for name in operation_names(builder):
        original = getattr(builder, name)
        if getattr(original, _TALLIED, False):
            continue
        wrapped = functools.wraps(original)(_tallied(original, name in READS_ITS_ARRAYS))
        setattr(wrapped, _TALLIED, True)
        setattr(builder, name, wrapped)


def _tallied(original: Callable[..., Any], reads_arrays: bool) -> Callable[..., Any]:
    def wrapper(self, *args, **kwargs):
        c = Counting.active
        if c is None or c.program is None or c.in_operation:
            return original(self, *args, **kwargs)
        c.in_operation = True
        try:
            out = original(self, *args, **kwargs)
        finally:
            c.in_operation = False
        elements = _made(out) + _arrays(args) if reads_arrays else _made(out)
        tallied = c.tallied  # Counting.tally, inlined: this runs for every operation
        tallied.ops += 1
        tallied.elements += elements
        return out

    return wrapper


def _hook_reductions(itp: Any) -> None:
    cls = itp.ReduceScanOpInterface
    original = cls.apply
    if getattr(original, _MARK, False):
        return

    @functools.wraps(original)
    def apply(self, input):
        c = Counting.active
        if c is not None:
            # A reduction with its own combine function runs it element by element: those
            # operations are tallied too, on top of this one.
            elements = [
                _elements(getattr(t, "handle", None))
                for t in (input if isinstance(input, tuple) else (input,))
            ]
            for n in elements:
                c.alu(n)
            c.tally(sum(elements))
        return original(self, input)

    setattr(apply, _MARK, True)
    cls.apply = apply


def _hook_launch(itp: Any) -> None:
    cls = itp.InterpretedFunction
    original = cls.run
    if getattr(original, _MARK, False):
        return

    @functools.wraps(original)
    def run(self, *args, grid, warmup, **kwargs):
        c = Counting.active
        if c is None or warmup or c.current is not None:
            return original(self, *args, grid=grid, warmup=warmup, **kwargs)
        return _SampledGrid(self.rewrite(), self.arg_names, grid, self.pre_run_hooks, self.fn, c)(
            *args, **kwargs
        )

    setattr(run, _MARK, True)
    cls.run = run


def _launch_options(kwargs: dict[str, Any]) -> dict[str, Any]:
    keep = (
        "num_warps",
        "num_stages",
        "num_ctas",
        "maxnreg",
        "waves_per_eu",
        "matrix_instr_nonkdim",
    )
    return {k: kwargs[k] for k in keep if k in kwargs and kwargs[k] is not None}


def _make_sampled_grid() -> type:
    from triton.runtime import interpreter as itp

    class SampledGrid(itp.GridExecutor):
        """The interpreter's grid executor, running only the programs `Counting` asks for."""

        def __init__(self, fn, arg_names, grid, pre_run_hooks, source_fn, counting):
            super().__init__(fn, arg_names, grid, pre_run_hooks)
            self.source_fn, self.counting = source_fn, counting

        def __call__(self, *args_dev, **kwargs):
            from torch.utils._python_dispatch import _disable_current_modes

            with _disable_current_modes():  # the interpreter's own tensor work is not the kernel's
                self._launch(*args_dev, **kwargs)

        def _launch(self, *args_dev, **kwargs):
            options = _launch_options(kwargs)
            names = inspect.getfullargspec(self.fn).args
            kwargs = {k: v for k, v in kwargs.items() if k in names}
            args_hst, kwargs_hst = self._init_args_hst(args_dev, kwargs)
            for hook in self.pre_run_hooks:
                hook(*args_hst, **kwargs_hst)
            scope = itp._patch_lang(self.fn)
            loops = _sample_loops(self.fn.__globals__)
            try:
                call = inspect.getcallargs(self.fn, *args_hst, **kwargs_hst)
                bound = dict(call)
                call = {
                    n: a if n in self.constexprs else itp._implicit_cvt(a) for n, a in call.items()
                }
                grid = self.grid(call) if callable(self.grid) else self.grid
                grid = tuple(int(g) for g in grid) + (1,) * (3 - len(grid))
                itp.interpreter_builder.set_grid_dim(*grid)
                launch = Launch(
                    seq=sim_written.tick(),
                    kernel=getattr(self.source_fn, "__name__", "kernel"),
                    fn=self.source_fn,
                    grid=grid,  # type: ignore[arg-type]
                    bound=bound,
                    options=options,
                    tensors=_tensor_args(bound),
                )

                def run_one(x: int, y: int, z: int) -> None:
                    itp.interpreter_builder.set_grid_idx(x, y, z)
                    self.fn(**call)

                try:
                    self.counting.run_programs(launch, run_one)
                except Exception as exc:
                    raise itp.InterpreterError(repr(exc)) from exc
            finally:
                loops()
                scope.restore()
            # On the CPU the interpreter ran on the arguments' own storage: nothing to copy back
            # (the stock executor copies every argument onto itself, hundreds of MB at GPU sizes).
            if any(
                getattr(a, "device", None) is not None and a.device.type != "cpu" for a in args_dev
            ):
                self._restore_args_dev(args_dev, args_hst, kwargs, kwargs_hst)

    return SampledGrid


def _sample_loops(module_globals: dict[str, Any]) -> Callable[[], None]:
    """Make `range` and `tl.range` in the kernel's module sampled for one launch; returns the undo."""
    import triton.language as tl

    had, old, old_tl = "range" in module_globals, module_globals.get("range"), tl.range
    module_globals["range"] = SampledRange
    tl.range = SampledRange  # type: ignore[assignment]

    def undo() -> None:
        tl.range = old_tl  # type: ignore[assignment]
        if had:
            module_globals["range"] = old
        else:
            module_globals.pop("range", None)

    return undo


_SAMPLED_GRID: type | None = None


def _SampledGrid(*args: Any) -> Any:
    global _SAMPLED_GRID
    if _SAMPLED_GRID is None:
        _SAMPLED_GRID = _make_sampled_grid()
    return _SAMPLED_GRID(*args)


def _tensor_args(bound: dict[str, Any]) -> list[TensorArg]:
    found = []
    for name, value in bound.items():
        base = getattr(value, "base", value)  # a TensorWrapper / descriptor carries its tensor
        if hasattr(base, "data_ptr") and hasattr(base, "untyped_storage"):
            start = int(base.data_ptr())
            span = (
                base.numel() and (sum((s - 1) * st for s, st in zip(base.shape, base.stride())) + 1)
            ) * base.element_size()
            try:
                storage = base.untyped_storage()
                lo, size = int(storage.data_ptr()), int(storage.nbytes())
            except (RuntimeError, NotImplementedError, AttributeError):
                lo, size = start, int(span)
            found.append(TensorArg(name, start, start + int(span), lo, lo + size))
    return found
