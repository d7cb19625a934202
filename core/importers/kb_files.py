"""The files a KernelBench problem converts into: the shapes as axes (`Layout`: which dimensions
scale with which constant), task.yaml, and the entry, reference and inputs modules (the
problem's own module with a `run` that calls its Model on the given parameters)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import yaml

from core.importers.kb_sizes import BYTE_AXIS, FLOP_AXIS, numel_of, peak_for, probe_flops
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
# KernelBench's tolerances (src/kernelbench/eval.py): 1e-2 for fp16 and bf16, and for fp32 the
# 1e-2 of its v0 and v0.1. Its current 1e-4 for fp32 compares against the model run the same way
# in the same process; here the reference is float64, and PyTorch's default TF32 convolutions
# are ~1e-3 off it (measured on the H200: the eager model itself failed 1e-4).
TOLERANCE = {"fp32": 1.0e-2, "fp16": 1.0e-2, "bf16": 1.0e-2}


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
        "provenance": {
            "source": "kernelbench",
            "file": source,
            **({"commit": commit} if commit else {}),
            "license": LICENSE,
            "precision": options.precision,
            "derived": {
                "hidden_workloads": f"scaled {', '.join(layout_scaled(base, gpu_hidden))}; no drawn workloads (the sizes are code, not ranges)",
                "tolerance": f"KernelBench's for {options.precision} (v0.1's for fp32): atol = rtol = {tol:g}",
                "flops": "torch.utils.flop_counter.FlopCounterMode on the meta device, per workload",
                "bytes": "sizes of every input, parameter and output, per workload",
                "peak": "bf16 (the tensor-core rate) where torch's FLOP counter saw matmul, convolution or attention: fp32 ones run as TF32",
                "parameters": "drawn uniform in ±1/sqrt(fan_in), as PyTorch's default initialisation",
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


BASELINE_DOC = "The baseline: the problem's Model in eager PyTorch, in the problem's precision."
STARTER_DOC = "The starter: the problem's Model in eager PyTorch; replace `run` (or the Model) with your kernel."


def entry_module(
    problem: Problem, source: str, n_inputs: int, base: Probe, dtype: str, role: str
) -> str:
    doc = {
        "reference": "The reference: the problem's Model, computed in float64 where it runs in it.",
        "baseline": BASELINE_DOC,
    }[role]
    params = [name for name, _ in named_parameters(problem)]
    return f"""{problem.source.rstrip()}


# --- arena entry, written by `arena import kernelbench` from {source} ---
# {doc}
# run(*inputs): get_inputs()'s {n_inputs} argument(s), then the model's parameters in this order.
import torch as _arena_torch

_ARENA_PARAMETERS = {params!r}
_ARENA_DTYPE = _arena_torch.{dtype}
_arena_models = {{}}


def _arena_model(device):
    model = _arena_models.get(device)
    if model is None:
        with _arena_torch.device(device):
            model = Model(*get_init_inputs())
        _arena_models[device] = model
    return model


def _arena_cast(x):
    if isinstance(x, _arena_torch.Tensor) and x.is_floating_point():
        return x.to(_ARENA_DTYPE)
    return x


def run(*inputs):
    args, params = inputs[:{n_inputs}], inputs[{n_inputs}:]
    device = next((t.device for t in inputs if isinstance(t, _arena_torch.Tensor)), _arena_torch.device("cpu"))
    model = _arena_model(device)
    state = {{name: _arena_cast(p) for name, p in zip(_ARENA_PARAMETERS, params)}}
    if _ARENA_DTYPE == _arena_torch.float64:
        model = model.double()
    out = _arena_torch.func.functional_call(model, state, tuple(_arena_cast(a) for a in args))
    outs = tuple(o.reshape(1) if o.dim() == 0 else o for o in (out if isinstance(out, (tuple, list)) else (out,)))
    return outs if len(outs) > 1 else outs[0]  # a 0-dimensional output travels as shape [1]
"""


def named_parameters(problem: Problem) -> list[tuple[str, Any]]:
    import torch

    ns = problem.module({})
    with torch.device("meta"):
        model = ns["Model"](*ns["get_init_inputs"]())
    return list(model.named_parameters())


def inputs_module(problem: Problem, source: str, base: Probe, dtype: str) -> str:
    """The problem's imports, constants, helper functions and get_inputs, never its Model: the
    candidate's process loads this file and must not find the reference in it."""
    import ast

    kept = [
        n
        for n in problem.tree.body
        if not (
            isinstance(n, ast.ClassDef)
            or (isinstance(n, ast.FunctionDef) and n.name == "get_init_inputs")
        )
    ]
    body = ast.unparse(ast.Module(body=kept, type_ignores=[]))
    params = [(p.name, list(p.shape), fan_in(p.shape)) for p in base.params]
    return f'''"""Inputs of KernelBench {source}: its constants and get_inputs() at the workload's sizes, then
the model's parameters. Written by `arena import kernelbench`; the Model is not in this file."""

import ast
import math

import torch

_SOURCE = {body!r}
_SCALED = {list(base.constants)!r}
_PARAMETERS = {params!r}  # (name, shape, fan_in)
_DTYPE = torch.{dtype}


_RANDOM = {{"rand", "randn", "randint", "randperm", "normal", "bernoulli", "multinomial", "poisson"}}
_FACTORIES = {{"zeros", "ones", "empty", "full", "arange", "linspace", "eye", "tensor"}}
_compiled = {{}}


class _OnDevice(ast.NodeTransformer):
    """`torch.rand(...)` and friends draw with the evaluation's generator on its device (given
    explicitly, never through a device context or torch's global generator: every process that
    draws a workload's inputs gets the same tensors), and factories allocate on that device."""

    def visit_Call(self, node):
        self.generic_visit(node)
        f = node.func
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "torch":
            given = {{k.arg for k in node.keywords}}
            extra = []
            if f.attr in _RANDOM and "generator" not in given:
                extra.append(ast.keyword("generator", ast.Name("_arena_generator", ast.Load())))
            if (f.attr in _RANDOM or f.attr in _FACTORIES) and "device" not in given and f.attr not in ("normal", "bernoulli", "multinomial", "poisson"):
                extra.append(ast.keyword("device", ast.Name("_arena_device", ast.Load())))
            node.keywords += extra
        return node


def _problem(axes, generator):
    """The problem's namespace with the scaled constants set where each is assigned."""
    if "code" not in _compiled:
        body = []
        for node in ast.parse(_SOURCE).body:
            body.append(node)
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
            names = {{n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}}
            for name in sorted(names & set(_SCALED)):
                body.append(ast.parse(f"{{name}} = _axes[{{name!r}}]").body[0])
        tree = _OnDevice().visit(ast.Module(body=body, type_ignores=[]))
        _compiled["code"] = compile(ast.fix_missing_locations(tree), "{source}", "exec")
    ns = {{"_axes": {{k: axes[k] for k in _SCALED}}, "__name__": "kernelbench_inputs", "_arena_generator": generator, "_arena_device": generator.device}}
    exec(_compiled["code"], ns)
    return ns


def _cast(x, device):
    if isinstance(x, torch.Tensor):
        x = x.to(device)
        return x.to(_DTYPE) if x.is_floating_point() else x
    return x


def make_inputs(axes, generator):
    device = generator.device
    args = [_cast(x, device) for x in _problem(axes, generator)["get_inputs"]()]
    for name, shape, fan_in in _PARAMETERS:
        bound = 1.0 / math.sqrt(fan_in)
        p = torch.empty(shape, dtype=torch.float32, device=device).uniform_(-bound, bound, generator=generator)
        args.append(p.to(_DTYPE))
    return args
'''


def fan_in(shape: tuple[int, ...]) -> int:
    if len(shape) >= 2:
        return max(1, shape[1] * numel_of(shape[2:]))
    return max(1, shape[0] if shape else 1)
