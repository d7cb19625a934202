"""Count the torch work of a call, op by op, for the `sim:` devices: FLOPs from torch's own FLOP
counter (its registry of formulas per aten op) and bytes from the tensors each op reads and
writes. What is counted is the unfused traffic the vendor library moves: each kernel reads its
inputs and writes its outputs once.

Every aten op is billed (docs/integrity.md, "Simulated devices"): an allow-list of free ops
(views, metadata, allocation, an op that returns its own input unchanged) moves nothing; an op
with a FLOP formula (torch's registry, plus the grouped and integer matrix products it lacks) is
billed its FLOPs and bytes; every other op its bytes and a launch, `_foreach_*` included. An op
that does a matrix product, a convolution, attention or linear algebra without a formula here is
one whose cost the model does not know: it is recorded (`TorchWork.unknown`) and fails the stage
(`sim_unknown_op`), never billed as free. Scaled dot-product attention on the CPU dispatches to
an op the FLOP registry lacks; its FLOPs are 4·B·H·Sq·Sk·D, halved for a causal mask. Run under
a `FakeTensorMode`, counting a GPU-sized call costs no memory and no time; code that needs real
values (data-dependent shapes, `.item()`) raises there, and the caller falls back.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes

from core.harness.sim import known as sim_known
from core.harness.sim import written as sim_written

_FREE = {
    "empty",
    "empty_like",
    "empty_strided",
    "new_empty",
    "new_empty_strided",
    "detach",
    "alias",
    "lift_fresh",
    "set_",
    "is_same_size",
    "sym_size",
    "sym_stride",
    "sym_numel",
    "sym_storage_offset",
    "dim",
    "size",
    "stride",
    "is_contiguous",
    "_has_compatible_shallow_copy_type",
}
_SDPA = {
    "_scaled_dot_product_flash_attention_for_cpu",
    "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_efficient_attention",
    "_scaled_dot_product_cudnn_attention",
    "_scaled_dot_product_attention_math",
}
_GATHERS = {
    "index",
    "index_select",
    "gather",
    "embedding",
    "take",
    "take_along_dim",
    "_embedding_bag",
}
_SCATTERS = {
    "index_put_",
    "_index_put_impl_",
    "scatter_",
    "scatter_add_",
    "scatter_reduce_",
    "index_copy_",
    "index_add_",
    "index_fill_",
    "masked_scatter_",
}
# Work whose cost is its FLOPs: without a formula (torch's registry, `_EXTRA_FLOPS`) the model
# cannot bill it, and a candidate could hide a matrix product there.
_COMPUTE = (
    "mm",
    "conv",
    "attention",
    "matmul",
    "linear",
    "fft",
    "linalg",
    "cholesky",
    "svd",
    "eig",
    "solve",
    "lstsq",
    "inverse",
    "det",
    "dist",
    "euclidean",
    "tensordot",
    "einsum",
    "dot",
    "addmv",
    "ger",
    "kron",
)
_DTYPE = {
    torch.bfloat16: "bf16",
    torch.float16: "fp16",
    torch.float32: "fp32",
    torch.float64: "fp64",
}


def storages(tensors: list[torch.Tensor]) -> list[tuple[int, int]]:
    """The byte ranges of the real (not fake) CPU storages of `tensors`."""
    found = []
    for t in tensors:
        if t.device.type != "cpu" or type(t).__name__ == "FakeTensor":
            continue
        try:
            storage = t.untyped_storage()
            lo = int(storage.data_ptr())
            found.append((lo, lo + int(storage.nbytes())))
        except (RuntimeError, NotImplementedError):
            pass
    return found


def _returns_input(func: Any, ins: list[torch.Tensor], outs: list[torch.Tensor]) -> bool:
    """An op that changes nothing and returns one of its inputs (resolve_conj without a
    conjugate bit): nothing ran. An in-place op also returns its input, having written it."""
    if getattr(func._schema, "is_mutable", True):
        return False
    return bool(outs) and all(any(o is i for i in ins) for o in outs)


def _tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _tensors(v)]
    return []


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def _dtype_name(tensors: list[torch.Tensor]) -> str:
    for t in tensors:
        if t.dtype.is_floating_point:
            return _DTYPE.get(t.dtype, "fp8e4nv" if t.element_size() == 1 else "fp32")
    return "fp32"


def _sdpa_flops(args: tuple[Any, ...], kwargs: dict[str, Any]) -> float:
    q, k = args[0], args[1]
    b, h, sq, d = q.shape[0], q.shape[1], q.shape[-2], q.shape[-1]
    sk = k.shape[-2]
    causal = bool(
        kwargs.get("is_causal", args[4] if len(args) > 4 and isinstance(args[4], bool) else False)
    )
    flops = 4.0 * b * h * sq * sk * d
    return flops / 2 if causal else flops


class TorchWork(TorchDispatchMode):
    """While active, every aten op that does work is recorded as {name, flops, bytes, dtype}."""

    def __init__(self, known: sim_known.KnownInts | None = None) -> None:
        super().__init__()
        # the values of the fake pass's integer tensors (sim_known); a real run's are its own
        self.known = known if known is not None else sim_known.KnownInts()
        self.ops: list[dict[str, Any]] = []
        self.written: list[
            sim_written.Span
        ] = []  # what each op wrote: the counted call's outputs must be (sim_written)
        self.events: list[sim_written.TorchEvent] = []  # real-memory ops, for sim_values
        self.storages: list[tuple[int, int]] = []  # every real storage an op returned (sim_values)
        self.unknown: list[str] = []  # ops whose cost the model does not know (sim_stage)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        self.known.after(func, args, kwargs, out)
        name = func.overloadpacket.__name__
        ins, outs = _tensors(args) + _tensors(kwargs), _tensors(out)
        self.storages += storages(outs)
        if (
            name in _FREE
            or getattr(func, "is_view", False)
            or getattr(func, "namespace", "") == "prim"  # metadata (device, layout)
            or _returns_input(func, ins, outs)
        ):
            return out
        if cost_unknown(func, name) and name not in self.unknown:
            self.unknown.append(name)
        sim_written.note(self.written, outs)
        event = sim_written.torch_event(func, name, ins, outs)
        if event is not None:
            self.events.append(event)
        if name in _GATHERS:
            # A gather reads what it returns, not the whole table (an index into a 64 MB cos/sin
            # table at T=1 touches a few rows), plus its indices.
            nbytes = 2 * sum(_nbytes(t) for t in outs) + sum(
                _nbytes(t) for t in ins if not t.dtype.is_floating_point
            )
        elif name in _SCATTERS:
            # An in-place scatter reads its values and indices and writes (reads, for add) that much of the target.
            values = [t.dtype.is_floating_point or t.dtype == ins[0].dtype for t in ins[1:]]
            nbytes = sum((2 if v else 1) * _nbytes(t) for t, v in zip(ins[1:], values))
        else:
            nbytes = sum(_nbytes(t) for t in ins) + sum(
                _nbytes(t) for t in outs
            )  # in place: read, then written back
            nbytes -= unused_group_bytes(func, name, args, kwargs, self.known)
        flops = _flops(func, name, args, kwargs, out)
        self.ops.append(
            {"name": name, "flops": flops, "bytes": float(nbytes), "dtype": _dtype_name(ins)}
        )
        return out


def _grouped_flops(args: tuple[Any, ...], out: Any) -> float:
    """2·M·N·K of a grouped product: a 2-D × 2-D one groups its K (the output [G, M, N] holds G
    partial products of the same rows); otherwise every output element sums over K."""
    a, b = args[0], args[1]
    if a.dim() == 2 and b.dim() == 2:
        return 2.0 * a.shape[0] * a.shape[1] * b.shape[-1]
    return 2.0 * out.numel() * a.shape[-1]


def unused_group_bytes(
    func: Any, name: str, args: tuple[Any, ...], kwargs: dict[str, Any], known: sim_known.KnownInts
) -> int:
    """The bytes a grouped matrix product (`_grouped_mm`, `_scaled_grouped_mm`) does not read:
    of its 3-D operand (the experts' weights of a 2-D × 3-D product, or the 3-D side of a 3-D ×
    2-D one) and that operand's scales, the groups its `offs` gives no row (offs[g] = offs[g-1],
    offs[-1] taken as 0); a GPU kernel (CUTLASS's grouped GEMM) never loads them. 0 where the
    values of `offs` are not known (a fake tensor no known op made: sim_known): the full bill."""
    if "grouped_mm" not in name:
        return 0
    bound = _bound(func, args, kwargs)
    a, b, offs = bound.get("self"), bound.get("mat2"), known.of(bound.get("offs"))
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)) or offs is None:
        return 0
    if a.dim() == 2 and b.dim() == 3:
        grouped, scale = b, bound.get("scale_b")
    elif a.dim() == 3 and b.dim() == 2:
        grouped, scale = a, bound.get("scale_a")
    else:  # 2-D × 2-D groups the reduction (every operand is read); 3-D × 3-D is batched
        return 0
    groups = offs.numel()
    if offs.dim() != 1 or groups != grouped.shape[0] or groups == 0:
        return 0
    with _disable_current_modes():  # real values, read outside the fake mode
        ends = [int(v) for v in offs.tolist()]
    unused = sum(end <= start for start, end in zip([0, *ends], ends))
    read = _nbytes(grouped) + (_nbytes(scale) if isinstance(scale, torch.Tensor) else 0)
    return read * unused // groups


def _bound(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """An op's arguments by their schema's names."""
    found = dict(kwargs)
    for arg, value in zip(func._schema.arguments, args):
        found[arg.name] = value
    return found


_EXTRA_FLOPS = {  # matrix products torch's FLOP registry lacks
    "_grouped_mm": _grouped_flops,
    "_scaled_grouped_mm": _grouped_flops,
    "_int_mm": lambda args, out: 2.0 * out.numel() * args[0].shape[-1],
    "_weight_int8pack_mm": lambda args, out: 2.0 * out.numel() * args[0].shape[-1],
}


def has_formula(func: Any, name: str) -> bool:
    from torch.utils.flop_counter import flop_registry

    return name in _SDPA or name in _EXTRA_FLOPS or func.overloadpacket in flop_registry


def cost_unknown(func: Any, name: str) -> bool:
    """An op that computes (a product, a convolution, attention, linear algebra) and has no
    formula: its cost is not its bytes, and the model has no other."""
    tags = {str(t).rsplit(".", 1)[-1] for t in getattr(func, "tags", ())}
    if "pointwise" in tags or "reduction" in tags or name.startswith("_foreach_"):
        return False
    return any(word in name for word in _COMPUTE) and not has_formula(func, name)


def _flops(func: Any, name: str, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> float:
    if name in _SDPA:
        return _sdpa_flops(args, kwargs)
    if name in _EXTRA_FLOPS:
        try:
            return float(_EXTRA_FLOPS[name](args, out))
        except Exception:  # noqa: BLE001 - unexpected arguments: the op is unknown, said elsewhere
            return 0.0
    from torch.utils.flop_counter import flop_registry

    formula = flop_registry.get(func.overloadpacket)
    if formula is None:
        return 0.0
    try:
        return float(formula(*args, **kwargs, out_val=out))
    except Exception:  # noqa: BLE001 - a formula that does not take these arguments counts nothing
        return 0.0


class TorchCalls:
    """While active, the torch work a candidate does outside Triton, billed the way a GPU runs it:
    one kernel per torch call it makes (`F.rms_norm` is one launch on the GPU, however many ops
    the CPU decomposes it into), each moving the smaller of its own inputs and outputs and what
    its ops touch (gathers by the rows they read); calls that do no work (views, reshapes,
    metadata) are free. Each entry is {name, flops, bytes, dtype, glue: True}: the model bills
    a launch per entry at the measured launch cost (sim_model.glue_time)."""

    def __init__(self, known: sim_known.KnownInts | None = None) -> None:
        from torch.overrides import TorchFunctionMode

        calls = self

        class _Calls(TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
                kwargs = kwargs or {}
                start = len(calls.work.ops)
                out = func(*args, **kwargs)
                group = calls.work.ops[start:]
                del calls.work.ops[start:]
                if group:
                    calls.ops.append(
                        _call_entry(
                            getattr(func, "__name__", str(func)),
                            group,
                            _tensors(list(args)) + _tensors(kwargs),
                            _tensors(out),
                        )
                    )
                return out

        self.ops: list[dict[str, Any]] = []
        self.work = TorchWork(known)
        self.calls = _Calls()

    active: TorchCalls | None = None  # the one counting now (an autotune trial unbills its ops)

    def __enter__(self) -> TorchCalls:
        self.work.__enter__()
        self.calls.__enter__()
        TorchCalls.active = self
        return self

    def __exit__(self, *exc: object) -> None:
        TorchCalls.active = None
        self.calls.__exit__(*exc)
        self.work.__exit__(*exc)
        # aten ops reached without a torch call (C++ paths): a launch each
        self.ops += [{**op, "glue": True} for op in self.work.ops]
        self.work.ops = []


# What an autotuner does around each trial on its own (`restore_value`: a clone before, a copy
# back after; `reset_to_zero`: a zero_), which a GPU runs only while it tunes
TUNING_OPS = frozenset({"clone", "copy_", "zero_"})


def unbilled() -> Callable[[], None]:
    """Mark the counting's torch ops so far; the function returned takes the autotuner's own
    ops recorded since (TUNING_OPS) off the bill: an autotune trial's, which never run in the
    call that is timed. Anything else a trial runs (a hook of the candidate's that computes)
    stays billed, and what every op wrote stays recorded."""
    calls = TorchCalls.active
    if calls is None:
        return lambda: None
    marks = len(calls.ops), len(calls.work.ops)

    def drop() -> None:
        for ops, mark in ((calls.ops, marks[0]), (calls.work.ops, marks[1])):
            ops[mark:] = [op for op in ops[mark:] if op["name"] not in TUNING_OPS]

    return drop


def _call_entry(
    name: str, group: list[dict[str, Any]], ins: list[torch.Tensor], outs: list[torch.Tensor]
) -> dict[str, Any]:
    seen: set[int] = set()
    unique_ins = [t for t in ins if not (id(t) in seen or seen.add(id(t)))]  # type: ignore[func-returns-value]
    io = sum(_nbytes(t) for t in unique_ins) + sum(_nbytes(t) for t in outs)
    return {
        "name": name[:80],
        "flops": sum(o["flops"] for o in group),
        "bytes": float(min(io, sum(o["bytes"] for o in group))),
        "dtype": group[0]["dtype"],
        "glue": True,
        "ops": len(group),
    }


def count_fake(
    fn: Any,
    make_args: Any,
    written: list[Any] | None = None,
    sizes: list[Any] | None = None,
    found: dict[str, Any] | None = None,
    real_args: Any = None,
) -> list[dict[str, Any]]:
    """A candidate's torch calls of `fn(*make_args())` (TorchCalls), both run on fake tensors (no
    memory, no time). Raises what the fake run raises (data-dependent code). `written`, where
    given, receives the share of each returned tensor that the ops wrote (sim_written.shares);
    `found["unknown"]` the ops whose cost the model does not know. `real_args`, where given,
    makes the same inputs for real (sim_gpu_inputs): the values of the integer ones are known
    to the count (sim_known), never to `fn`."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    known = sim_known.KnownInts()
    with FakeTensorMode(allow_non_fake_inputs=True):
        args = make_args()
        if real_args is not None and any(
            isinstance(t, torch.Tensor) and sim_known.integral(t) for t in args
        ):
            with _disable_current_modes():
                known.seed(list(args), list(real_args()))
        calls = TorchCalls(known)
        with calls, torch.no_grad():
            result = fn(*args)
            spans = list(calls.work.written)
        if written is not None:
            written[:] = sim_written.shares(result, list(args), spans)
        if sizes is not None:  # bytes written per output (the in-place ones: sim_reference)
            sizes[:] = [done for done, _ in sim_written.written_bytes(result, list(args), spans)]
    if found is not None:
        found["unknown"] = list(calls.work.unknown)
    return calls.ops


def count_call_fake(fn: Any, make_args: Any) -> dict[str, Any]:
    """One vendor-library call as a whole, on fake tensors: FLOPs summed over its ops, bytes of
    the call's own inputs and outputs (what a fused library kernel moves: the CPU decomposes
    `rms_norm` into six ops whose intermediates a GPU kernel never writes), and the number of
    ops that did work. Raises what the fake run raises."""
    ops, args, out = _run_fake(fn, make_args)
    flops = sum(o["flops"] for o in ops)
    ins, outs = _tensors(list(args)), _tensors(out)
    in_ids = {id(t) for t in ins}
    nbytes = sum(_nbytes(t) for t in ins) + sum(_nbytes(t) for t in outs if id(t) not in in_ids)
    return {
        "name": "call",
        "flops": flops,
        "bytes": float(nbytes),
        "dtype": _dtype_name(ins),
        "ops": len(ops),
    }


def _run_fake(fn: Any, make_args: Any) -> tuple[list[dict[str, Any]], Any, Any]:
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode(allow_non_fake_inputs=True):
        args = make_args()
        with TorchWork() as work, torch.no_grad():
            out = fn(*args)
    return work.ops, args, out


def total(ops: list[dict[str, Any]]) -> tuple[float, float]:
    return sum(o["flops"] for o in ops), sum(o["bytes"] for o in ops)


def math_isfinite(ops: list[dict[str, Any]]) -> bool:
    return all(math.isfinite(o["flops"]) and math.isfinite(o["bytes"]) for o in ops)
