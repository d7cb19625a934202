"""`arena import kernelbench PATH`: KernelBench's problems as arena tasks.

One task per problem, `kernelbench/l<level>_<number>_<name>`:

- the candidate's `run(*inputs)` takes the forward's arguments (`get_inputs()`, in order)
  followed by the model's parameters (`named_parameters()`, in order), so a kernel sees every
  tensor it computes with; buffers (batch-norm statistics) stay inside the model;
- `reference.py` is the problem's own module followed by a `run` that calls its `Model` with
  those parameters (`torch.func.functional_call`), in float64 where the model runs in it;
- `baseline.py` and `starter.py` are the same module in the problem's precision: KernelBench's
  baseline is the model in eager PyTorch, and a candidate starts from it;
- `inputs.py` re-runs the problem's constants and `get_inputs()` at the workload's sizes with the
  evaluation's seed (so integer targets, masks and value ranges are the problem's own) and draws
  the parameters as PyTorch's default initialisation would (uniform in ±1/sqrt(fan_in));
- workloads: the problem's sizes are the visible GPU workload; hidden ones scale the *scalable*
  constants (core/importers/kernelbench_problem.py) to sizes that are not powers of two; the CPU
  sets scale them down until a call fits the CPU device. A problem with no scalable constant
  gets no hidden workloads, and is reported as not converted.
- FLOPs are torch's FlopCounterMode on the meta device (one per output element where it counts
  none), bytes the sizes of every input, parameter and output: per workload, as the derived axes
  `flop_count` and `byte_count`, named in the task's `provenance`.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from core.importers.isolate import isolated
from core.importers.kernelbench_problem import (
    Probe,
    Problem,
    ProblemError,
    TensorInfo,
    is_power_of_two,
    not_power_of_two,
)
from core.importers.report import Converted, ImportReport, Skipped

FAMILY = "kernelbench"
LICENSE = "MIT"
PRECISIONS = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}
# KernelBench's tolerances (src/kernelbench/eval.py): 1e-2 for fp16 and bf16, and for fp32 the
# 1e-2 of its v0 and v0.1. Its current 1e-4 for fp32 compares against the model run the same way
# in the same process; here the reference is float64, and PyTorch's default TF32 convolutions
# are ~1e-3 off it (measured on the H200: the eager model itself failed 1e-4).
TOLERANCE = {"fp32": 1.0e-2, "fp16": 1.0e-2, "bf16": 1.0e-2}
CPU_BYTES = 2 << 20  # a CPU workload moves at most this much (inputs, parameters, outputs) ...
CPU_FLOPS = 5e7  # ... and computes at most this much, where the scalable constants allow
HIDDEN_FACTORS = (0.75, 1.3)  # the fixed hidden GPU workloads, relative to the problem's sizes
FLOP_AXIS, BYTE_AXIS = "flop_count", "byte_count"

OnProblem = Callable[
    [int, int, str, "Converted | Skipped"], None
]  # (index, total, source, outcome)


@dataclass(frozen=True)
class Options:
    precision: str = "fp32"
    levels: tuple[int, ...] = (1, 2, 3, 4)
    timeout_s: float = 120.0  # one problem's conversion (its module code and every probe)


def find_problems(root: Path, levels: Iterable[int] = (1, 2, 3, 4)) -> list[Path]:
    """The problem files of a KernelBench checkout (or of its `KernelBench/` folder)."""
    base = root / "KernelBench" if (root / "KernelBench").is_dir() else root
    found = []
    for level in levels:
        folder = base / f"level{level}"
        found += sorted(folder.glob("*.py"), key=lambda p: (_number(p), p.name))
    return found


def import_kernelbench(
    root: Path | str,
    out: Path | str,
    options: Options = Options(),
    on_problem: OnProblem | None = None,
) -> ImportReport:
    root, out = Path(root).resolve(), Path(out).resolve()
    if not root.is_dir():
        raise FileNotFoundError(f"{root}: no such folder; give the path of a KernelBench checkout")
    if options.precision not in PRECISIONS:
        raise ValueError(
            f"precision `{options.precision}` is unknown; use one of {', '.join(PRECISIONS)}"
        )
    problems = find_problems(root, options.levels)
    if not problems:
        raise FileNotFoundError(
            f"{root}: no KernelBench problems (expected KernelBench/level1/*.py); give the checkout's root"
        )
    report = ImportReport("kernelbench", str(root), str(out))
    commit = _commit(root)
    _warm_up()
    for i, path in enumerate(problems, 1):
        source = str(path.relative_to(root))
        outcome = isolated(
            _convert_one, (path, source, out, options, commit), source, options.timeout_s
        )
        (report.converted if isinstance(outcome, Converted) else report.skipped).append(outcome)  # type: ignore[arg-type]
        if on_problem:
            on_problem(i, len(problems), source, outcome)
    return report


def _warm_up() -> None:
    """Import what every probe needs once, here: each problem runs in a forked child, which
    would otherwise import it again (seconds each)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    with torch.device("meta"), FlopCounterMode(display=False):
        a = torch.nn.Linear(4, 4)(torch.rand(2, 4))
        torch.nn.functional.conv2d(torch.rand(1, 1, 4, 4), torch.rand(1, 1, 3, 3)).sum() + a.sum()


def level_of(source: str) -> str:
    match = re.search(r"level(\d+)", source)
    return f"level {match.group(1)}" if match else "other"


def task_name(path: Path) -> str:
    level = re.search(r"level(\d+)", str(path.parent))
    stem = re.sub(r"[^a-z0-9]+", "_", path.stem.lower()).strip("_")
    number, _, rest = stem.partition("_")
    prefix = f"l{level.group(1)}" if level else "l0"
    return f"{prefix}_{int(number):03d}_{rest}" if number.isdigit() else f"{prefix}_{stem}"


# --- one problem -------------------------------------------------------------------------------


def _convert_one(
    path: Path, source: str, out: Path, options: Options, commit: str | None
) -> Converted | Skipped:
    try:
        return convert(path, source, out, options, commit)
    except ProblemError as exc:
        return Skipped(source, exc.kind, exc.reason)


def convert(path: Path, source: str, out: Path, options: Options, commit: str | None) -> Converted:
    problem = Problem.load(path)
    base = problem.probe({})
    scalable, dropped = _scalable(problem, base)
    if not scalable:
        why = (
            "every size feeds the model's construction (get_init_inputs or the Model class)"
            if not problem.scalable
            else "; ".join(dropped)
        )
        raise ProblemError(
            "no_hidden",
            f"no size constant can be scaled without changing the model ({why}): hidden workloads are impossible",
        )
    doubled = {c: problem.probe({c: 2 * base.constants[c]}) for c in scalable}
    layout = _Layout.infer(base, doubled, scalable)

    gpu_hidden = _hidden(problem, base, scalable, HIDDEN_FACTORS)
    if not gpu_hidden:
        raise ProblemError(
            "no_hidden", "no scaled size runs on the meta device: hidden workloads are impossible"
        )
    cpu_visible, cpu_note = _cpu(problem, base, scalable)
    cpu_hidden = _hidden(problem, cpu_visible, scalable, (0.7, 1.4), avoid=[cpu_visible])
    if not cpu_hidden:
        raise ProblemError("no_hidden", "no scaled CPU size runs on the meta device")

    notes = [f"scaled: {', '.join(scalable)}"] + dropped + ([cpu_note] if cpu_note else [])
    if any(p.flops == 0 for p in [base, *gpu_hidden]):
        notes.append(
            "flops: torch counts none (no matmul, conv or attention); one per input element"
        )
    folder = out / FAMILY / task_name(path)
    folder.mkdir(parents=True, exist_ok=True)
    spec = _task_yaml(
        problem, source, commit, options, layout, base, gpu_hidden, cpu_visible, cpu_hidden, notes
    )
    (folder / "task.yaml").write_text(spec)
    dtype = PRECISIONS[options.precision]
    (folder / "reference.py").write_text(
        _entry_module(problem, source, len(base.inputs), base, "float64", "reference")
    )
    baseline = _entry_module(problem, source, len(base.inputs), base, dtype, "baseline")
    (folder / "baseline.py").write_text(baseline)
    (folder / "starter.py").write_text(baseline.replace(_BASELINE_DOC, _STARTER_DOC))
    (folder / "inputs.py").write_text(_inputs_module(problem, source, base, dtype))
    return Converted(source, f"{FAMILY}/{folder.name}", str(folder), tuple(notes))


def _scalable(problem: Problem, base: Probe) -> tuple[list[str], list[str]]:
    """The constants that really scale: doubling each must still run."""
    keep, dropped = [], []
    for c in problem.scalable:
        try:
            problem.probe({c: 2 * base.constants[c]})
            keep.append(c)
        except ProblemError as exc:
            dropped.append(f"`{c}` kept fixed (doubling it fails: {exc.reason.split(': ', 1)[-1]})")
    return keep, dropped


def _hidden(
    problem: Problem,
    around: Probe,
    scalable: list[str],
    factors: Iterable[float],
    avoid: Iterable[Probe] = (),
) -> list[Probe]:
    """One workload per factor: every scalable constant scaled near `factor` times its value, to
    a size that is not a power of two (a multiple of 8, then of 64, where the model needs
    divisible sizes), and never the same setting twice."""
    found: list[Probe] = []
    taken = [around.constants, *(p.constants for p in avoid)]
    for f in factors:
        for multiple in (1, 8, 64):
            setting = {c: _near(around.constants[c], f, multiple) for c in scalable}
            if setting in taken:
                continue
            try:
                probe = problem.probe(setting)
            except ProblemError:
                continue
            found.append(probe)
            taken.append(setting)
            break
    return found


def _near(value: int, factor: float, multiple: int) -> int:
    """A size near value × factor that is not a power of two and differs from `value`."""
    if multiple > 1 and value < 4 * multiple:
        multiple = 1  # small sizes: divisibility would move them too far
    target = max(1, round(value * factor))
    n = not_power_of_two(target, multiple)
    if n == value and value > multiple:
        n = not_power_of_two(value + (multiple if factor > 1 else -multiple), multiple)
    if n == value:  # tiny sizes (a batch of 1): step up, differently per direction
        n = not_power_of_two(value + (2 if factor < 1 else 4))
    return n


def _cpu(problem: Problem, base: Probe, scalable: list[str]) -> tuple[Probe, str | None]:
    """The largest common down-scaling of the scalable constants that fits a CPU call."""
    best = base
    for k in range(0, 16):
        s = 0.5**k
        setting = {c: max(1, int(base.constants[c] * s)) for c in scalable}
        try:
            probe = problem.probe(setting)
        except ProblemError:
            continue
        best = probe
        if probe.nbytes <= CPU_BYTES and _flops(probe) <= CPU_FLOPS:
            return probe, None
        if all(v == 1 for v in setting.values()):
            break
    return (
        best,
        f"the CPU workload still moves {best.nbytes / 1e6:.1f} MB and {_flops(best):.2g} FLOPs (the model's own sizes do not scale)",
    )


def _flops(p: Probe) -> int:
    """torch's count; where it counts nothing (no matmul, conv or attention), one per element read."""
    return p.flops or sum(_numel(t.shape) for t in p.inputs if isinstance(t, TensorInfo))


def _peak(precision: str, probe: Probe) -> str:
    """The compute peak that bounds the problem. torch's FLOP counter counts only matmul,
    convolution and attention ops, and those run on tensor cores even in fp32: cuDNN
    convolutions use TF32 by default in PyTorch, as does Triton's `tl.dot` on fp32 inputs, and
    KernelBench's fp32 tolerance (1e-2) admits it. Bounding them by the vector fp32 rate
    flagged the problem's own eager Model as faster than light on the H200 (a 3x3 conv at 76
    TFLOP/s against 67), so they take the 16-bit tensor-core peak: a floor nothing honest
    beats (TF32 runs at half of it), at the cost of a lower speed-of-light fraction."""
    if precision in ("bf16", "fp16") or probe.flops:
        return "bf16"
    return "fp32"


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


# --- shapes as axes ----------------------------------------------------------------------------


@dataclass
class _Layout:
    """How each dimension of each input and output follows the constants: a constant's axis,
    a fixed integer, or a derived axis whose value each workload records."""

    dims: dict[str, list[str | int]]  # tensor name -> per dim: axis name or int
    derived: dict[str, tuple[str, int]]  # derived axis -> (tensor name, dim index)

    @classmethod
    def infer(cls, base: Probe, doubled: dict[str, Probe], scalable: list[str]) -> _Layout:
        dims: dict[str, list[str | int]] = {}
        derived: dict[str, tuple[str, int]] = {}
        for t in _tensors(base):
            per_dim: list[str | int] = []
            for i, b in enumerate(t.shape):
                moved = {c: _shape_of(p, t.name)[i] for c, p in doubled.items()}
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
            values[axis] = _shape_of(probe, name)[i]
        values[FLOP_AXIS] = max(1, _flops(probe))
        values[BYTE_AXIS] = max(1, probe.nbytes)
        return values


def _tensors(p: Probe) -> list[TensorInfo]:
    return [t for t in p.inputs if isinstance(t, TensorInfo)] + list(p.outputs)


def _shape_of(p: Probe, name: str) -> tuple[int, ...]:
    for t in _tensors(p):
        if t.name == name:
            return t.shape
    raise ProblemError(
        "shapes",
        f"`{name}` appears at one size and not at another: the inputs' structure changes with the sizes",
    )


# --- the files ---------------------------------------------------------------------------------


def _task_yaml(
    problem: Problem,
    source: str,
    commit: str | None,
    options: Options,
    layout: _Layout,
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
                    "shape": _Flow.list(layout.dims[item.name]),
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
        inputs.append({"name": p.name, "shape": _Flow.list(p.shape), "dtype": tensor_dtype(p)})
    outputs = [
        {"name": o.name, "shape": _Flow.list(layout.dims[o.name] or [1]), "dtype": tensor_dtype(o)}
        for o in base.outputs
    ]
    tol = TOLERANCE[options.precision]
    doc = (_class_doc(problem) or f"KernelBench problem {source}.").strip()
    spec = {
        "schema_version": 1,
        "description": f"{' '.join(doc.split())} (KernelBench {source}; run(*inputs) takes get_inputs() and then the model's parameters.)",
        "models": _Flow.list(["KernelBench"]),
        "languages": _Flow.list(["triton", "pytorch", "cuda", "hip"]),
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
        "correctness": _Flow({"atol": tol, "rtol": tol, "min_match": 1.0, "seeds": 3}),
        "flops": FLOP_AXIS,
        "bytes": BYTE_AXIS,
        "peak": _peak(options.precision, base),
        "workloads": {
            "visible": [_Flow(layout.axes(base) | {"note": "KernelBench's sizes"})],
            "hidden": {"fixed": [_Flow(layout.axes(p)) for p in gpu_hidden]},
            "cpu": {
                "visible": [_Flow(layout.axes(cpu_visible))],
                "hidden": {"fixed": [_Flow(layout.axes(p)) for p in cpu_hidden]},
            },
        },
    }
    header = f"# Written by `arena import kernelbench` from {source}; KernelBench is {LICENSE}-licensed.\n"
    return header + yaml.dump(spec, Dumper=_Dumper, sort_keys=False, width=100, allow_unicode=True)


class _Flow(dict):
    """A mapping (or, through `list`, a sequence) written on one line: workloads, shapes."""

    class list(list):
        pass


class _Dumper(yaml.SafeDumper):
    pass


_Dumper.add_representer(
    _Flow, lambda d, v: d.represent_mapping("tag:yaml.org,2002:map", v.items(), flow_style=True)
)
_Dumper.add_representer(
    _Flow.list, lambda d, v: d.represent_sequence("tag:yaml.org,2002:seq", v, flow_style=True)
)


def layout_scaled(base: Probe, hidden: list[Probe]) -> list[str]:
    return [
        f"{c} {base.constants[c]} -> {'/'.join(str(p.constants[c]) for p in hidden)}"
        for c in base.constants
    ]


def _class_doc(problem: Problem) -> str | None:
    import ast

    for node in problem.tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "Model":
            doc = ast.get_docstring(node)
            return doc.split("\n\n")[0] if doc else None
    return None


_BASELINE_DOC = "The baseline: the problem's Model in eager PyTorch, in the problem's precision."
_STARTER_DOC = "The starter: the problem's Model in eager PyTorch; replace `run` (or the Model) with your kernel."


def _entry_module(
    problem: Problem, source: str, n_inputs: int, base: Probe, dtype: str, role: str
) -> str:
    doc = {
        "reference": "The reference: the problem's Model, computed in float64 where it runs in it.",
        "baseline": _BASELINE_DOC,
    }[role]
    params = [name for name, _ in _named_parameters(problem)]
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


def _named_parameters(problem: Problem) -> list[tuple[str, Any]]:
    import torch

    ns = problem.module({})
    with torch.device("meta"):
        model = ns["Model"](*ns["get_init_inputs"]())
    return list(model.named_parameters())


def _inputs_module(problem: Problem, source: str, base: Probe, dtype: str) -> str:
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
    params = [(p.name, list(p.shape), _fan_in(p.shape)) for p in base.params]
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


def _fan_in(shape: tuple[int, ...]) -> int:
    if len(shape) >= 2:
        return max(1, shape[1] * _numel(shape[2:]))
    return max(1, shape[0] if shape else 1)


def _number(path: Path) -> int:
    head = path.stem.split("_", 1)[0]
    return int(head) if head.isdigit() else 1 << 30


def _commit(root: Path) -> str | None:
    try:
        done = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            check=False,
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() or None if done.returncode == 0 else None


__all__ = [
    "Options",
    "convert",
    "find_problems",
    "import_kernelbench",
    "is_power_of_two",
    "level_of",
    "task_name",
]
