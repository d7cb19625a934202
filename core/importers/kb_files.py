"""task.yaml of a converted KernelBench problem: the shapes as axes (`Layout`: which dimensions
scale with which constant), the workloads, KernelBench's tolerance and what was derived. The
Python files are kb_modules.py's."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import yaml

from core.importers.kb_sizes import BYTE_AXIS, FLOP_AXIS, peak_for, probe_flops
from core.importers.kernelbench_problem import (
    Probe,
    Problem,
    ProblemError,
    TensorInfo,
)
from core.importers.yaml_flow import Dumper, Flow

if TYPE_CHECKING:
    from core.importers.kernelbench import Options

LICENSE = "MIT"
PRECISIONS = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}
# KernelBench's tolerances (src/kernelbench/eval.py, get_tolerance_for_precision, since November
# 2025): atol = rtol = 1e-4 for fp32, 1e-2 for fp16 and bf16, against the Model run in the same
# precision with PyTorch's defaults (kb_modules.py's reference does the same).
TOLERANCE = {"fp32": 1.0e-4, "fp16": 1.0e-2, "bf16": 1.0e-2}


@dataclass
class Layout:
    """How each dimension of each input and output follows the constants: a constant's axis,
    a fixed integer, or a derived axis whose value each workload records."""

    dims: dict[str, list[str | int]]  # tensor name -> per dim: axis name or int
    derived: dict[str, tuple[str, int]]  # derived axis -> (tensor name, dim index)

    @classmethod
    def infer(cls, base: Probe, doubled: dict[str, Probe], scalable: list[str]) -> Layout:
        dims: dict[str, list[str | int]] = {}
        derived: dict[str, tuple[str, int]] = {}
        for t in tensors(base):
            per_dim: list[str | int] = []
            for i, b in enumerate(t.shape):
                moved = {c: shape_of(p, t.name)[i] for c, p in doubled.items()}
                match = [
                    c
                    for c in scalable
                    if b == base.constants[c]
                    and moved[c] == 2 * b
                    and all(moved[o] == b for o in scalable if o != c)
                ]
                if match:
                    per_dim.append(match[0])
                elif all(v == b for v in moved.values()):
                    per_dim.append(b)
                else:
                    axis = f"{t.name}_d{i}"
                    derived[axis] = (t.name, i)
                    per_dim.append(axis)
            dims[t.name] = per_dim
        return cls(dims, derived)

    def axes(self, probe: Probe) -> dict[str, int]:
        values = dict(probe.constants)
        for axis, (name, i) in self.derived.items():
            values[axis] = shape_of(probe, name)[i]
        values[FLOP_AXIS] = max(1, probe_flops(probe))
        values[BYTE_AXIS] = max(1, probe.nbytes)
        return values


def tensors(p: Probe) -> list[TensorInfo]:
    return [t for t in p.inputs if isinstance(t, TensorInfo)] + list(p.outputs)


def shape_of(p: Probe, name: str) -> tuple[int, ...]:
    for t in tensors(p):
        if t.name == name:
            return t.shape
    raise ProblemError(
        "shapes",
        f"`{name}` appears at one size and not at another: the inputs' structure changes with the sizes",
    )


def task_yaml(
    problem: Problem,
    source: str,
    commit: str | None,
    options: Options,
    layout: Layout,
    base: Probe,
    gpu_hidden: list[Probe],
    cpu_visible: Probe,
    cpu_hidden: list[Probe],
    notes: list[str],
    caps: str,
) -> str:
    dtype = PRECISIONS[options.precision]
    axes: dict[str, str] = {
        c: f"KernelBench constant `{c}` (scaled for hidden workloads)" for c in base.constants
    }
    axes.update(
        {
            a: f"dimension {i} of `{n}` (derived: recorded per workload)"
            for a, (n, i) in layout.derived.items()
        }
    )
    axes[FLOP_AXIS] = "FLOPs of one call (derived: torch.utils.flop_counter on the meta device)"
    axes[BYTE_AXIS] = "bytes of every input, parameter and output (derived: tensor sizes)"

    def tensor_dtype(t: TensorInfo) -> str:
        return dtype if t.dtype.startswith(("float", "bfloat")) else t.dtype

    inputs: list[dict[str, Any]] = []
    for i, item in enumerate(base.inputs):
        if isinstance(item, TensorInfo):
            inputs.append(
                {
                    "name": item.name,
                    "shape": Flow.list(layout.dims[item.name]),
                    "dtype": tensor_dtype(item),
                }
            )
        else:
            inputs.append(
                {
                    "name": problem.input_names[i] if i < len(problem.input_names) else f"x{i}",
                    "dtype": "float32" if isinstance(item, float) else "int64",
                    "value": item,
                }
            )
    for p in base.params:
        inputs.append({"name": p.name, "shape": Flow.list(p.shape), "dtype": tensor_dtype(p)})
    outputs = [
        {"name": o.name, "shape": Flow.list(layout.dims[o.name] or [1]), "dtype": tensor_dtype(o)}
        for o in base.outputs
    ]
    tol = TOLERANCE[options.precision]
    doc = (class_doc(problem) or f"KernelBench problem {source}.").strip()
    spec = {
        "schema_version": 1,
        "description": f"{' '.join(doc.split())} (KernelBench {source}; run(*inputs) takes get_inputs() and then the model's parameters.)",
        "models": Flow.list(["KernelBench"]),
        "languages": Flow.list(["triton", "pytorch", "cuda", "hip"]),
        "baseline_kind": "torch_composition",
        "baseline": "the problem's Model in eager PyTorch (KernelBench's own baseline)",
        "baselines": [
            Flow(
                impl="eager",
                kind="torch_composition",
                calls="the problem's Model, eager (KernelBench's default baseline)",
            ),
            Flow(
                impl="torch_compile",
                kind="torch_composition",
                calls="torch.compile(Model), inductor in its default mode (KernelBench's compile baseline)",
            ),
        ],
        "provenance": {
            "source": "kernelbench",
            "file": source,
            **({"commit": commit} if commit else {}),
            "license": LICENSE,
            "precision": options.precision,
            "derived": {
                "hidden_workloads": f"scaled {', '.join(layout_scaled(base, gpu_hidden))}; no drawn workloads (the sizes are code, not ranges)",
                "sizes": caps,
                "tolerance": f"KernelBench's for {options.precision} (eval.py's get_tolerance_for_precision): atol = rtol = {tol:g}",
                "reference": f"the Model in {options.precision} with PyTorch's default TF32 settings (cuDNN convolutions TF32, matmuls full fp32), as KernelBench's eval compares",
                "flops": "torch.utils.flop_counter.FlopCounterMode on the meta device, per workload",
                "bytes": "sizes of every input, parameter and output, per workload",
                "peak": "bf16 (the tensor-core rate) where torch's FLOP counter saw matmul, convolution or attention: fp32 ones run as TF32",
                "parameters": "KernelBench's: Model(*get_init_inputs()) built on the CPU under torch.manual_seed(42), cast to the precision; the same at every call",
            },
            "notes": notes,
        },
        "axes": axes,
        "inputs": inputs,
        "outputs": outputs,
        "correctness": Flow({"atol": tol, "rtol": tol, "min_match": 1.0, "seeds": 3}),
        "flops": FLOP_AXIS,
        "bytes": BYTE_AXIS,
        "peak": peak_for(options.precision, base),
        "workloads": {
            "visible": [Flow(layout.axes(base) | {"note": "KernelBench's sizes"})],
            "hidden": {"fixed": [Flow(layout.axes(p)) for p in gpu_hidden]},
            "cpu": {
                "visible": [Flow(layout.axes(cpu_visible))],
                "hidden": {"fixed": [Flow(layout.axes(p)) for p in cpu_hidden]},
            },
        },
    }
    header = f"# Written by `arena import kernelbench` from {source}; KernelBench is {LICENSE}-licensed.\n"
    return header + yaml.dump(spec, Dumper=Dumper, sort_keys=False, width=100, allow_unicode=True)


def layout_scaled(base: Probe, hidden: list[Probe]) -> list[str]:
    return [
        f"{c} {base.constants[c]} -> {'/'.join(str(p.constants[c]) for p in hidden)}"
        for c in base.constants
    ]


def class_doc(problem: Problem) -> str | None:
    import ast

    for node in problem.tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "Model":
            doc = ast.get_docstring(node)
            return doc.split("\n\n")[0] if doc else None
    return None
