"""Inputs from the job's specs and a seed; the outputs a candidate returns, checked and packed.

The same (workload, seed) gives the same inputs in every process: correctness inputs are drawn
on the CPU with a seeded generator and then moved to the device.
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


def _random_tensor(spec: dict[str, Any], shape: tuple[int, ...], gen: torch.Generator) -> torch.Tensor:
    dtype = dtype_of(spec["dtype"])
    init = spec.get("init") or {}
    device = gen.device
    if dtype.is_floating_point:
        dist = init.get("dist", "normal")
        if dist == "uniform":
            low, high = float(init.get("low", -1.0)), float(init.get("high", 1.0))
            t = torch.rand(shape, generator=gen, device=device).mul_(high - low).add_(low)
        elif dist == "randint":
            t = torch.randint(int(init["low"]), int(init["high"]), shape, generator=gen, device=device).float()
        else:
            t = torch.randn(shape, generator=gen, device=device)
            t.mul_(float(init.get("std", 1.0))).add_(float(init.get("mean", 0.0)))
        if dtype.itemsize == 1:  # fp8: keep inside the format's finite range
            t.clamp_(torch.finfo(dtype).min, torch.finfo(dtype).max)
        return t.to(dtype)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=gen, device=device).bool()
    low, high = int(init.get("low", 0)), int(init.get("high", 100))
    return torch.randint(low, high, shape, generator=gen, device=device, dtype=dtype)


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
            inputs.append(_random_tensor(spec, tuple(shapes[spec["name"]]), gen))
    return inputs


def correctness_inputs(
    specs: list[dict[str, Any]], workload: dict[str, Any], seed: int, device: torch.device, custom: MakeInputs | None
) -> list[Any]:
    gen = torch.Generator("cpu").manual_seed(seed)
    drawn = make_inputs(specs, workload["axes"], workload["shapes"], gen, custom)
    return [x.to(device) if isinstance(x, torch.Tensor) else x for x in drawn]


def fresh_inputs_factory(
    specs: list[dict[str, Any]], workload: dict[str, Any], seed: int, device: torch.device, custom: MakeInputs | None
) -> Callable[[int], list[Any]]:
    """Inputs for the i-th timed call, drawn on the device itself so that drawing is cheap."""
    gen = torch.Generator(device)

    def fresh(i: int) -> list[Any]:
        gen.manual_seed(seed + 7919 * (i + 1))
        return make_inputs(specs, workload["axes"], workload["shapes"], gen, custom)

    return fresh


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
