"""task.yaml of a converted AgentKernelArena task: the runner's shapes as axes and workloads, its
own tolerance, the entry's outputs (in place ones named so) and what was derived. The Python
files are aka_modules.py's."""

from __future__ import annotations

from typing import Any

import yaml

from core.importers.aka_replay import KernelOutput
from core.importers.aka_runner import Runner
from core.importers.aka_shapes import Layout

LICENSE = "Apache-2.0"


def task_yaml(
    config: dict[str, Any],
    source: str,
    runner: Runner,
    visible: list[tuple[Any, ...]],
    hidden: list[tuple[Any, ...]],
    cpu_visible: list[tuple[Any, ...]],
    cpu_hidden: list[tuple[Any, ...]],
    sizes: list[int],
    layout: Layout,
    outputs: list[KernelOutput],
    reference_on_cpu: bool,
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
    for k, o in enumerate(outputs):
        if o.kind == "inplace":
            name = layout.arg_names[o.arg]  # type: ignore[index]
            out_specs.append({"name": f"{name}_out", "dtype": o.dtype, "inplace_of": name})
        else:
            out_specs.append(
                {
                    "name": f"out{k}" if len(outputs) > 1 else "out",
                    "shape": Flow.list(layout.outputs[k]),
                    "dtype": o.dtype,
                }
            )
    tol = runner.tolerance
    prompt = (config.get("prompt") or {}).get("instructions") or f"Optimise `{runner.entry}`."
    moved = list(layout.tensor.values()) + [
        (layout.outputs[k], o.dtype) for k, o in enumerate(outputs) if o.kind != "inplace"
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
                "reference": f"the runner's own {'reference_* function'}, called as run_correctness calls it"
                + (" (on CPU copies, as the runner does)" if reference_on_cpu else ""),
                "tolerance": tol.how,
                "outputs": "; ".join(_output_note(o, layout) for o in outputs),
                "flops": "unknown (the task states none): 1, so the speed of light is the bytes' alone",
                "bytes": "the sizes of the tensor arguments and of the outputs",
                "fixed_arguments": {k: repr(v) for k, v in layout.fixed.items()},
                "arguments_from_shapes": {
                    k: f"{t}.shape[{d}]" for k, (t, d) in layout.from_shape.items()
                },
                "checks": "the reference ran at every workload at import (finite, no lazy output passes); the task's own kernel passed it in Triton's interpreter at the CPU workloads",
            },
            "notes": notes,
        },
        "axes": axes,
        "inputs": inputs,
        "outputs": out_specs,
        "correctness": Flow({"atol": tol.atol, "rtol": tol.rtol, "min_match": 1.0, "seeds": 3}),
        "flops": "1",
        "bytes": byte_terms,
        "peak": "bf16"
        if any(d in ("bfloat16", "float16") for _, d in layout.tensor.values())
        else "fp32",
        "workloads": {
            "visible": [Flow(layout.axes(runner, s, sizes)) for s in visible],
            "hidden": {"fixed": [Flow(layout.axes(runner, s, sizes)) for s in hidden]},
            "cpu": {
                "visible": [Flow(layout.axes(runner, s, sizes)) for s in cpu_visible],
                "hidden": {"fixed": [Flow(layout.axes(runner, s, sizes)) for s in cpu_hidden]},
            },
        },
    }
    header = f"# Written by `arena import agentkernelarena` from {source}; AgentKernelArena is {LICENSE}-licensed.\n"
    return header + yaml.dump(spec, Dumper=Dumper, sort_keys=False, width=100, allow_unicode=True)


def _output_note(o: KernelOutput, layout: Layout) -> str:
    if o.kind == "returned":
        return "returned"
    arg = layout.arg_names[o.arg]  # type: ignore[index]
    return (
        f"written in place into `{arg}`"
        if o.kind == "inplace"
        else f"a view of `{arg}`, which `run` returns as a copy (the harness takes no output that shares an input's memory)"
    )


def _numel_expr(dims: list[str | int]) -> str:
    return " * ".join(f"({d})" for d in dims) or "1"


def _itemsize(dtype: str) -> int:
    import torch

    return getattr(torch, dtype).itemsize
