"""Inputs from the job's specs and a seed; the outputs a candidate returns, checked and packed.

The same (workload, seed) gives the same inputs in every process on the same device: inputs
are drawn on the device with a seeded generator.
"""

from __future__ import annotations

import io
from typing import Any, Callable

import torch

MakeInputs = Callable[[dict[str, int], torch.Generator], Any]


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
        work = t if t.dtype.itemsize > 1 else torch.empty(t.shape, dtype=torch.float32, device=t.device)
        dist = init.get("dist", "normal")
        if dist == "uniform":
            work.uniform_(float(init.get("low", -1.0)), float(init.get("high", 1.0)), generator=gen)
        elif dist == "randint":
            work.random_(int(init["low"]), int(init["high"]), generator=gen)
        else:
            work.normal_(float(init.get("mean", 0.0)), float(init.get("std", 1.0)), generator=gen)
        if work is not t:
            t.copy_(work.clamp_(torch.finfo(t.dtype).min, torch.finfo(t.dtype).max))
    elif t.dtype == torch.bool:
        t.random_(0, 2, generator=gen)
    else:
        t.random_(int(init.get("low", 0)), int(init.get("high", 100)), generator=gen)


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
            t = torch.empty(tuple(shapes[spec["name"]]), dtype=dtype_of(spec["dtype"]), device=gen.device)
            _fill(t, spec, gen)
            inputs.append(t)
    return inputs


def correctness_inputs(
    specs: list[dict[str, Any]], workload: dict[str, Any], seed: int, device: torch.device, custom: MakeInputs | None
) -> list[Any]:
    """Drawn on the device itself: both workers of an evaluation share the device, so the same
    seed gives them the same inputs without either sending tensors to the other."""
    gen = torch.Generator(device).manual_seed(seed)
    return make_inputs(specs, workload["axes"], workload["shapes"], gen, custom)


class FreshInputs:
    """Inputs for timed calls: allocated once, then refilled with new random values before
    every call. Each call sees data it has never seen, always at the same addresses, so the
    timings carry no allocator or address-translation noise and graph replays read them."""

    def __init__(self, specs: list[dict[str, Any]], workload: dict[str, Any], seed: int, device: torch.device, custom: MakeInputs | None):
        self.specs, self.workload, self.seed, self.custom = specs, workload, seed, custom
        self.gen = torch.Generator(device)
        self.args: list[Any] | None = None

    def __call__(self, i: int) -> list[Any]:
        self.gen.manual_seed(self.seed + 7919 * (i + 1))
        if self.args is None:
            self.args = make_inputs(self.specs, self.workload["axes"], self.workload["shapes"], self.gen, self.custom)
        elif self.custom is not None:
            new = make_inputs(self.specs, self.workload["axes"], self.workload["shapes"], self.gen, self.custom)
            for dst, src in zip(self.args, new):
                if isinstance(dst, torch.Tensor):
                    dst.copy_(src)
        else:
            for t, spec in zip(self.args, self.specs):
                if isinstance(t, torch.Tensor):
                    _fill(t, spec, self.gen)
        return self.args


class OutputError(ValueError):
    """The candidate returned something that is not the declared outputs."""


def collect_outputs(
    result: Any, out_specs: list[dict[str, Any]], in_specs: list[dict[str, Any]], inputs: list[Any], shapes: dict[str, list[int]], device: torch.device
) -> list[torch.Tensor]:
    """The returned outputs, in declared order, checked for exact type, dtype, shape and device."""
    outs = list(result) if isinstance(result, (tuple, list)) else [result]
    if len(outs) != len(out_specs):
        raise OutputError(f"run() returned {len(outs)} output(s); the task declares {len(out_specs)}: {', '.join(s['name'] for s in out_specs)}")
    names = [s["name"] for s in in_specs]
    checked = []
    for out, spec in zip(outs, out_specs):
        if type(out) is not torch.Tensor:  # noqa: E721 - subclasses may compute on access
            raise OutputError(f"output `{spec['name']}` is a {type(out).__name__}, not a torch.Tensor")
        target = inputs[names.index(spec["inplace_of"])] if spec.get("inplace_of") else None
        if target is not None and out.data_ptr() != target.data_ptr():
            raise OutputError(f"output `{spec['name']}` must be written in place into input `{spec['inplace_of']}`")
        want_shape = tuple(shapes[spec["name"]]) if spec.get("shape") else tuple(target.shape)  # type: ignore[union-attr]
        want_dtype = dtype_of(spec["dtype"])
        if out.dtype != want_dtype:
            raise OutputError(f"output `{spec['name']}` has dtype {out.dtype}; the task declares {want_dtype}")
        if tuple(out.shape) != want_shape:
            raise OutputError(f"output `{spec['name']}` has shape {tuple(out.shape)}; the task declares {want_shape}")
        if out.device.type != device.type:
            raise OutputError(f"output `{spec['name']}` is on {out.device}; it must be on {device}")
        checked.append(out)
    return checked


def pack(tensors: list[torch.Tensor]) -> bytes:
    buf = io.BytesIO()
    torch.save([t.detach().to("cpu").contiguous().clone() for t in tensors], buf)
    return buf.getvalue()


def unpack(payload: bytes) -> list[torch.Tensor]:
    """Tensors sent by the candidate worker; weights_only so no code can ride along."""
    tensors = torch.load(io.BytesIO(payload), weights_only=True)
    if not isinstance(tensors, list) or not all(type(t) is torch.Tensor for t in tensors):  # noqa: E721
        raise OutputError("the candidate worker sent something that is not a list of tensors")
    return tensors
