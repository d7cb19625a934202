"""The files an AgentKernelArena task converts into: task.yaml, and the entry, reference and
inputs modules (the task's source file with a `run` that calls its entry, the runner's own
reference, and its run_correctness replayed to build the inputs)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from core.importers.aka_runner import ReferenceCall, Runner, replayable_source
from core.importers.aka_shapes import Layout, volume

LICENSE = "Apache-2.0"
DEFAULT_TOLERANCE = 1.0e-2
# Written into both the entry and the reference module: an argument of the entry's call, from the
# tensors `run` was given, a tensor's shape, or the values fixed across the shapes.
_ARGUMENT = """def _arena_argument(name, given):
    if name in given:
        return given[name]
    if name in _ARENA_FROM_SHAPE:
        tensor, dim = _ARENA_FROM_SHAPE[name]
        return int(given[tensor].shape[dim])
    return _ARENA_FIXED[name]
"""


def task_yaml(
    config: dict[str, Any],
    source: str,
    runner: Runner,
    usable: list[tuple[Any, ...]],
    hidden: list[tuple[Any, ...]],
    sizes: list[int],
    layout: Layout,
    outputs: list[tuple[tuple[int, ...], str, int | None]],
    notes: list[str],
) -> str:
    from core.importers.yaml_flow import Dumper, Flow

    axes = {runner.names[i]: f"AgentKernelArena shape entry `{runner.names[i]}`" for i in sizes}
    axes.update(
        {
            a: "a size the runner computes from the shape (derived: recorded per workload)"
            for a in layout.derived
        }
    )
    inputs = [
        {"name": n, "shape": Flow.list(dims), "dtype": dtype}
        for n, (dims, dtype) in layout.tensor.items()
    ]
    out_specs: list[dict[str, Any]] = []
    for k, (_, dtype, inplace) in enumerate(outputs):
        if inplace is not None:
            out_specs.append(
                {
                    "name": f"{layout.arg_names[inplace]}_out",
                    "dtype": dtype,
                    "inplace_of": layout.arg_names[inplace],
                }
            )
        else:
            out_specs.append(
                {
                    "name": f"out{k}" if len(outputs) > 1 else "out",
                    "shape": Flow.list(layout.outputs[k]),
                    "dtype": dtype,
                }
            )
    out_dims = [layout.outputs[k] for k, o in enumerate(outputs) if o[2] is None]
    atol = runner.atol if runner.atol is not None else DEFAULT_TOLERANCE
    rtol = runner.rtol if runner.rtol is not None else DEFAULT_TOLERANCE
    prompt = (config.get("prompt") or {}).get("instructions") or f"Optimise `{runner.entry}`."
    moved = list(layout.tensor.values()) + [
        (d, o[1]) for d, o in zip(out_dims, [o for o in outputs if o[2] is None])
    ]
    byte_terms = (
        " + ".join(f"{_numel_expr(dims)} * {_itemsize(dtype)}" for dims, dtype in moved) or "1"
    )
    spec = {
        "schema_version": 1,
        "description": " ".join(str(prompt).split())
        + f" (AgentKernelArena {source}; run(*inputs) calls `{runner.entry}`.)",
        "models": Flow.list(["AgentKernelArena"]),
        "languages": Flow.list(["triton", "pytorch"]),
        "baseline_kind": "vendor_kernel_library",
        "baseline": f"the task's own Triton kernel, `{runner.entry}` (AgentKernelArena's baseline)",
        "provenance": {
            "source": "agentkernelarena",
            "file": source,
            "license": LICENSE,
            "derived": {
                "hidden_workloads": f"TEST_SHAPES scaled to sizes that are not powers of two: {', '.join(str(h) for h in hidden)}",
                "reference": "the runner's own reference_* function, called as run_correctness calls it",
                "tolerance": f"the runner's own allclose: atol {atol:g}, rtol {rtol:g}"
                if runner.atol is not None
                else f"none in the runner: {DEFAULT_TOLERANCE:g}",
                "flops": "unknown (the task states none): 1, so the speed of light is the bytes' alone",
                "bytes": "the sizes of the tensor arguments and of the outputs",
                "fixed_arguments": {k: repr(v) for k, v in layout.fixed.items()},
                "arguments_from_shapes": {
                    k: f"{t}.shape[{d}]" for k, (t, d) in layout.from_shape.items()
                },
            },
            "notes": notes,
        },
        "axes": axes,
        "inputs": inputs,
        "outputs": out_specs,
        "correctness": Flow({"atol": atol, "rtol": rtol, "min_match": 1.0, "seeds": 3}),
        "flops": "1",
        "bytes": byte_terms,
        "peak": "bf16"
        if any(d in ("bfloat16", "float16") for _, d in layout.tensor.values())
        else "fp32",
        "workloads": {
            "visible": [Flow(layout.axes(runner, s, sizes)) for s in usable],
            "hidden": {"fixed": [Flow(layout.axes(runner, s, sizes)) for s in hidden]},
            "cpu": {
                "visible": [
                    Flow(layout.axes(runner, s, sizes))
                    for s in sorted(usable, key=lambda s: volume(s, sizes))[:2]
                ],
                "hidden": {"fixed": [Flow(layout.axes(runner, hidden[-1], sizes))]},
            },
        },
    }
    header = f"# Written by `arena import agentkernelarena` from {source}; AgentKernelArena is {LICENSE}-licensed.\n"
    return header + yaml.dump(spec, Dumper=Dumper, sort_keys=False, width=100, allow_unicode=True)


def _numel_expr(dims: list[str | int]) -> str:
    return " * ".join(f"({d})" for d in dims) or "1"


def _itemsize(dtype: str) -> int:
    import torch

    return getattr(torch, dtype).itemsize


def entry_module(
    source_file: Path, source: str, runner: Runner, layout: Layout, inplace: list[int]
) -> str:
    return f"""{source_file.read_text().rstrip()}


# --- arena entry, written by `arena import agentkernelarena` from {source} ---
# run(*inputs) takes the tensor arguments of `{runner.entry}` in call order; the others are fixed.
_ARENA_ARGUMENTS = {layout.arg_names!r}
_ARENA_TENSORS = {list(layout.tensor)!r}
_ARENA_FIXED = {layout.fixed!r}
_ARENA_POSITIONAL = {layout.n_positional}
_ARENA_INPLACE = {inplace!r}  # arguments the entry writes in place (its outputs when it returns None)
_ARENA_FROM_SHAPE = {layout.from_shape!r}  # integer arguments read off a tensor's shape: name -> (tensor, dim)


{_ARGUMENT}

def run(*inputs):
    given = dict(zip(_ARENA_TENSORS, inputs))
    values = [_arena_argument(n, given) for n in _ARENA_ARGUMENTS]
    args, kwargs = values[:_ARENA_POSITIONAL], dict(zip(_ARENA_ARGUMENTS[_ARENA_POSITIONAL:], values[_ARENA_POSITIONAL:]))
    out = {runner.entry}(*args, **kwargs)
    if _ARENA_INPLACE:
        written = tuple(values[i] for i in _ARENA_INPLACE)
        return written if len(written) > 1 else written[0]
    return out
"""


def reference_module(runner: Runner, source: str, layout: Layout, call: ReferenceCall) -> str:
    return f'''"""The reference of AgentKernelArena {source}: its runner's own `{call.name}`, called with the
entry's arguments as run_correctness calls it. Written by `arena import agentkernelarena`."""

__arena_device__ = "cpu"
{replayable_source(runner.tree)}


# --- arena entry ---
import torch as _arena_torch

_ARENA_ARGUMENTS = {layout.arg_names!r}
_ARENA_TENSORS = {list(layout.tensor)!r}
_ARENA_FIXED = {layout.fixed!r}
_ARENA_CALL = {call.args!r}
_ARENA_KWARGS = {call.kwargs!r}
_ARENA_FROM_SHAPE = {layout.from_shape!r}  # integer arguments read off a tensor's shape: name -> (tensor, dim)


{_ARGUMENT}

def _arena_value(spec, values):
    if spec[0] == "const":
        return spec[1]
    v = values[spec[1]]
    return v.to(getattr(_arena_torch, spec[2])) if spec[2] else v


def run(*inputs):
    given = dict(zip(_ARENA_TENSORS, inputs))
    values = [_arena_argument(n, given) for n in _ARENA_ARGUMENTS]
    args = [_arena_value(s, values) for s in _ARENA_CALL]
    kwargs = {{k: _arena_value(s, values) for k, s in _ARENA_KWARGS}}
    return {call.name}(*args, **kwargs)
'''


def inputs_module(runner: Runner, source: str, sizes: list[int], first: tuple[Any, ...]) -> str:
    return f'''"""Inputs of AgentKernelArena {source}: its runner's run_correctness replayed at the workload's
shape, on the evaluation's device and seed, and stopped at the entry call. Written by `arena import
agentkernelarena`; the task's kernel and reference are not in this file."""

import types

import torch

_RUNNER = {replayable_source(runner.tree)!r}
_NAMES = {runner.names!r}
_FIRST = {first!r}  # the non-size entries (flags, names) of the shapes this task uses
_ENTRY = {runner.entry!r}


class _Captured(BaseException):
    pass


def make_inputs(axes, generator):
    shape = tuple(axes[n] if n in axes else v for n, v in zip(_NAMES, _FIRST))
    device = str(generator.device)

    def entry(*args, **kwargs):
        raise _Captured(args, kwargs)

    ns = {{"__name__": "aka_runner", "__file__": "task_runner.py", "__arena_device__": device}}
    exec(compile(_RUNNER, "task_runner.py", "exec"), ns)
    ns["TEST_SHAPES"] = [shape]
    ns["load_module"] = lambda: types.SimpleNamespace(**{{_ENTRY: entry}})
    seed, manual_seed = generator.initial_seed(), torch.manual_seed
    torch.manual_seed = lambda _ignored: manual_seed(seed)  # the runner seeds 42 + i: the evaluation's seed instead
    try:
        ns["run_correctness"]()
    except _Captured as call:
        args, kwargs = call.args
        values = list(args) + list(kwargs.values())
        return [v.to(device) for v in values if isinstance(v, torch.Tensor)]
    finally:
        torch.manual_seed = manual_seed
    raise RuntimeError(f"the runner never called {{_ENTRY}} at {{shape}}")
'''
