"""Inputs from the job's specs and a seed; the outputs a candidate returns, checked and packed.

The same (workload, seed) gives the same inputs in every process on the same device: inputs
are drawn on the device with a seeded generator.

The tensor methods used here (and torch.empty, torch.Generator) are bound at import, from the
C base class where there is one, before any candidate code runs: a candidate that replaces
`torch.Tensor.normal_` or `torch.empty` to stop its inputs from changing does not reach the
harness's copies. What runs in the candidate's process (drawing and refilling inputs, poisoning,
checking, copying and packing outputs) runs with Python-level dispatch off (`guard.trusted`):
a torch-function or dispatch mode the candidate left pushed never sees it, and the watch that
`FreshInputs` asks before every refill reports such a mode, or a replaced torch function, as
an integrity flag (docs/integrity.md).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from core.harness.guard import NO_HOOKS, Hooks, guarded, trusted

MakeInputs = Callable[[dict[str, int], torch.Generator], Any]

_TB = torch._C.TensorBase
_empty = torch.empty
_normal, _uniform, _random = _TB.normal_, _TB.uniform_, _TB.random_
_copy, _clamp, _fill_value = _TB.copy_, _TB.clamp_, _TB.fill_
_clone, _contiguous, _detach, _to, _view, _reshape = (
    _TB.clone,
    _TB.contiguous,
    _TB.detach,
    _TB.to,
    _TB.view,
    _TB.reshape,
)
_data_ptr, _is_contiguous, _is_neg, _is_conj, _untyped_storage = (
    _TB.data_ptr,
    _TB.is_contiguous,
    _TB.is_neg,
    _TB.is_conj,
    _TB.untyped_storage,
)
_numpy = _TB.numpy
_frombuffer = torch.frombuffer
_Generator = torch.Generator


def dtype_of(name: str) -> torch.dtype:
    dtype = getattr(torch, name, None)
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"unknown dtype {name}")
    return dtype


def _fill(t: torch.Tensor, spec: dict[str, Any], gen: torch.Generator) -> None:
    """Overwrite `t` with fresh random values drawn as the spec's `init` says."""
    init = spec.get("init") or {}
    if t.dtype.is_floating_point:
        # fp8 has no random kernels: draw in float32, clamp to the format's finite range.
        work = t if t.dtype.itemsize > 1 else _empty(t.shape, dtype=torch.float32, device=t.device)
        dist = init.get("dist", "normal")
        if dist == "uniform":
            _uniform(
                work, float(init.get("low", -1.0)), float(init.get("high", 1.0)), generator=gen
            )
        elif dist == "randint":
            _random(work, int(init["low"]), int(init["high"]), generator=gen)
        else:
            _normal(work, float(init.get("mean", 0.0)), float(init.get("std", 1.0)), generator=gen)
        if work is not t:
            _copy(t, _clamp(work, torch.finfo(t.dtype).min, torch.finfo(t.dtype).max))
    elif t.dtype == torch.bool:
        _random(t, 0, 2, generator=gen)
    else:
        _random(t, int(init.get("low", 0)), int(init.get("high", 100)), generator=gen)


def make_inputs(
    specs: list[dict[str, Any]],
    axes: dict[str, int],
    shapes: dict[str, list[int]],
    gen: torch.Generator,
    custom: MakeInputs | None = None,
) -> list[Any]:
    """Inputs in call order, on the generator's device; `shapes` are the concrete shapes the
    engine resolved for this workload; `custom` is the task's make_inputs."""
    if custom is not None:
        return list(custom(dict(axes), gen))
    inputs: list[Any] = []
    for spec in specs:
        if spec.get("shape") is None:
            inputs.append(spec["value"])
        else:
            t = _empty(
                tuple(shapes[spec["name"]]), dtype=dtype_of(spec["dtype"]), device=gen.device
            )
            _fill(t, spec, gen)
            inputs.append(t)
    return inputs


@guarded
def correctness_inputs(
    specs: list[dict[str, Any]],
    workload: dict[str, Any],
    seed: int,
    device: torch.device,
    custom: MakeInputs | None,
) -> list[Any]:
    """Drawn on the device itself: both workers of an evaluation share the device, so the same
    seed gives them the same inputs without either sending tensors to the other."""
    gen = _Generator(device).manual_seed(seed)
    return make_inputs(specs, workload["axes"], workload["shapes"], gen, custom)


class FreshInputs:
    """Inputs for timed calls: allocated once, then refilled with new random values before
    every call. Each call sees data it has never seen, always at the same addresses, so the
    timings carry no allocator or address-translation noise and graph replays read them.

    Call `i` draws from seed + 7919·(i + 1) whether the buffers are new or refilled, so the
    trusted worker regenerates exactly the inputs of any timed call with a fresh instance."""

    def __init__(
        self,
        specs: list[dict[str, Any]],
        workload: dict[str, Any],
        seed: int,
        device: torch.device,
        custom: MakeInputs | None,
        hooks: Hooks = NO_HOOKS,
    ):
        """`hooks` is asked before every refill, i.e. right after the previous call returned."""
        self.specs, self.workload, self.seed, self.custom, self.hooks = (
            specs,
            workload,
            seed,
            custom,
            hooks,
        )
        self.gen = _Generator(device)
        self.args: list[Any] | None = None

    def __call__(self, i: int) -> list[Any]:
        self.hooks.check()
        with trusted():
            return self._refill(i)

    def _refill(self, i: int) -> list[Any]:
        self.gen.manual_seed(self.seed + 7919 * (i + 1))
        if self.args is None:
            self.args = make_inputs(
                self.specs, self.workload["axes"], self.workload["shapes"], self.gen, self.custom
            )
        elif self.custom is not None:
            new = make_inputs(
                self.specs, self.workload["axes"], self.workload["shapes"], self.gen, self.custom
            )
            for dst, src in zip(self.args, new):
                if isinstance(dst, torch.Tensor):
                    _copy(dst, src)
        else:
            for t, spec in zip(self.args, self.specs):
                if isinstance(t, torch.Tensor):
                    _fill(t, spec, self.gen)
        return self.args


class OutputError(ValueError):
    """The candidate returned something that is not the declared outputs."""


def _span(t: torch.Tensor) -> tuple[int, int]:
    """The bytes the tensor's own elements cover. Not its storage's: the timed inputs of a
    shared-memory round are views of one region (shared_io.py), whose storage holds them all."""
    if t.numel() == 0:
        return 0, 0
    start = _data_ptr(t)
    last = sum((n - 1) * abs(step) for n, step in zip(t.shape, t.stride()))
    return start, start + (last + 1) * t.element_size()


def _overlap(a: torch.Tensor, b: torch.Tensor) -> bool:
    (a0, a1), (b0, b1) = _span(a), _span(b)
    return a0 < a1 and b0 < b1 and a0 < b1 and b0 < a1


def output_shape(spec: dict[str, Any], shapes: dict[str, list[int]]) -> tuple[int, ...]:
    """The declared shape of an output; an in-place output has the shape of its input."""
    return tuple(shapes[spec["name"]] if spec.get("shape") else shapes[spec["inplace_of"]])


@guarded
def collect_outputs(
    result: Any,
    out_specs: list[dict[str, Any]],
    in_specs: list[dict[str, Any]],
    inputs: list[Any],
    shapes: dict[str, list[int]],
    device: torch.device,
) -> list[torch.Tensor]:
    """The returned outputs, in declared order, checked for exact type, dtype, shape, device,
    a plain dense layout, and that none aliases an input (unless declared in place) or another
    output."""
    outs = list(result) if isinstance(result, (tuple, list)) else [result]
    if len(outs) != len(out_specs):
        raise OutputError(
            f"run() returned {len(outs)} output(s); the task declares {len(out_specs)}: {', '.join(s['name'] for s in out_specs)}"
        )
    names = [s["name"] for s in in_specs]
    tensors_in = {n: t for n, t in zip(names, inputs) if isinstance(t, torch.Tensor)}
    checked: list[torch.Tensor] = []
    for out, spec in zip(outs, out_specs):
        name = spec["name"]
        if type(out) is not torch.Tensor:
            raise OutputError(f"output `{name}` is a {type(out).__name__}, not a torch.Tensor")
        target = tensors_in.get(spec["inplace_of"]) if spec.get("inplace_of") else None
        if target is not None and _data_ptr(out) != _data_ptr(target):
            raise OutputError(
                f"output `{name}` must be written in place into input `{spec['inplace_of']}`"
            )
        want_dtype = dtype_of(spec["dtype"])
        if out.dtype != want_dtype:
            raise OutputError(
                f"output `{name}` has dtype {out.dtype}; the task declares {want_dtype}"
            )
        want_shape = output_shape(spec, shapes)
        if tuple(out.shape) != want_shape:
            raise OutputError(
                f"output `{name}` has shape {tuple(out.shape)}; the task declares {want_shape}"
            )
        if out.device.type != device.type:
            raise OutputError(f"output `{name}` is on {out.device}; it must be on {device}")
        if out.layout != torch.strided or _is_neg(out) or _is_conj(out) or not _is_contiguous(out):
            raise OutputError(
                f"output `{name}` is not a plain dense tensor (layout {out.layout}, strides {tuple(out.stride())}, "
                f"lazy negation {_is_neg(out)}, lazy conjugation {_is_conj(out)}): return a contiguous tensor"
            )
        for other, t in tensors_in.items():
            if t is not target and _overlap(out, t):
                raise OutputError(
                    f"output `{name}` aliases input `{other}`: return a tensor of your own (only outputs declared `inplace_of` may write an input)"
                )
        for prev, p in zip(out_specs, checked):
            if _overlap(out, p):
                raise OutputError(f"output `{name}` shares memory with output `{prev['name']}`")
        checked.append(out)
    return checked


@guarded
def poison(
    out_specs: list[dict[str, Any]], shapes: dict[str, list[int]], device: torch.device
) -> None:
    """Allocate and free output-sized buffers full of NaN (or the largest value), so that a
    candidate returning uninitialised memory (`torch.empty`) reads poison, not a result that
    happens to lie where the last one was freed."""
    held = []
    for spec in out_specs:
        if spec.get("inplace_of"):
            continue
        dtype = dtype_of(spec["dtype"])
        t = _empty(output_shape(spec, shapes), dtype=dtype, device=device)
        if dtype.is_floating_point:
            _fill_value(t, float("nan"))
        elif dtype == torch.bool:
            _fill_value(t, True)
        else:
            _fill_value(t, torch.iinfo(dtype).max)
        held.append(t)
    del held


@guarded
def snapshot(tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    """Copies that later work on the device cannot change (stream-ordered on GPUs)."""
    return [_clone(_detach(t)) for t in tensors]


@guarded
def pack(tensors: list[torch.Tensor]) -> tuple[list[dict[str, Any]], bytes]:
    """Raw bytes plus (dtype, shape) per tensor: no pickle, no zip, nothing to parse but JSON."""
    meta, chunks = [], []
    for t in tensors:
        host = _contiguous(_to(_detach(t), "cpu"))
        meta.append({"dtype": str(host.dtype).removeprefix("torch."), "shape": list(host.shape)})
        chunks.append(_numpy(_view(_reshape(host, (-1,)), torch.uint8)).tobytes())
    return meta, b"".join(chunks)


def expected_meta(
    out_specs: list[dict[str, Any]], shapes: dict[str, list[int]]
) -> list[dict[str, Any]]:
    return [{"dtype": s["dtype"], "shape": list(output_shape(s, shapes))} for s in out_specs]


def nbytes(meta: list[dict[str, Any]]) -> int:
    return sum(math.prod(m["shape"]) * dtype_of(m["dtype"]).itemsize for m in meta)


def unpack(
    meta: Any, payload: bytes | bytearray | None, expected: list[dict[str, Any]]
) -> list[torch.Tensor]:
    """Tensors sent by the candidate worker, accepted only if every dtype and shape is the
    declared one and the byte count adds up; the candidate's process cannot vouch for that."""
    if not isinstance(meta, list) or len(meta) != len(expected):
        raise OutputError(
            f"the candidate's worker sent {len(meta) if isinstance(meta, list) else 'no'} tensor descriptions; {len(expected)} were expected"
        )
    for got, want in zip(meta, expected):
        if (
            not isinstance(got, dict)
            or got.get("dtype") != want["dtype"]
            or got.get("shape") != want["shape"]
        ):
            raise OutputError(
                f"the candidate's worker described a tensor as {got!r}; expected {want!r}"
            )
    data = bytearray(payload or b"")
    if len(data) != nbytes(expected):
        raise OutputError(
            f"the candidate's worker sent {len(data)} bytes of outputs; {nbytes(expected)} were expected"
        )
    tensors, offset = [], 0
    for m in expected:
        dtype = dtype_of(m["dtype"])
        n = math.prod(m["shape"]) * dtype.itemsize
        raw = (
            _frombuffer(data, dtype=torch.uint8, count=n, offset=offset)
            if n
            else torch.empty(0, dtype=torch.uint8)
        )
        tensors.append(raw.clone().view(dtype).reshape(m["shape"]))
        offset += n
    return tensors
