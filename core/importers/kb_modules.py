"""The Python files a KernelBench problem converts into, each the problem's own module followed
by an arena entry:

- `reference.py`: the Model in the problem's precision, as KernelBench's eval compares
  (src/kernelbench/eval.py: the reference and the candidate both run in the precision, on the
  device, with PyTorch's defaults: cuDNN convolutions in TF32, matmuls in full fp32);
- `baseline.py`: the same Model, eager (KernelBench's default baseline) or under
  `torch.compile` (its compile baseline, inductor's default mode), by name in `IMPLS`;
- `starter.py`: the eager Model, for an agent to replace;
- `inputs.py`: the problem's constants and `get_inputs()` at the workload's sizes with the
  evaluation's generator, then the Model's parameters as KernelBench makes them: the Model
  built on the CPU in float32 under `torch.manual_seed(42)` (its own initialisation), then cast
  to the precision and moved to the device;
- `adapter.py`: appended to a candidate that defines no `run` but a `ModelNew`, it builds that
  ModelNew as KernelBench does (seed 42, the problem's `get_init_inputs()`) and calls it.

Every entry builds its Model the same way (`_BUILD`), so the reference, the baseline, the
parameters in the inputs and a ModelNew all hold what KernelBench's eval would hold.
"""

from __future__ import annotations

import ast
from typing import Any

from core.importers.kernelbench_problem import Probe, Problem

SEED = (
    42  # KernelBench's eval: set_seed(42) before get_init_inputs() and before building each model
)
BASELINE_DOC = "The baseline: the problem's Model in the problem's precision, eager or torch.compile (`IMPLS`)."
STARTER_DOC = "The starter: the problem's Model in eager PyTorch; replace `run` (or the Model) with your kernel."
REFERENCE_DOC = "The reference: the problem's Model in its precision, with PyTorch's default TF32 settings, as KernelBench compares."

# Builds class `cls` as KernelBench's eval does, cached per device (its name prefixed so that it
# never meets the problem's own names).
_BUILD = """import torch as _arena_torch

_ARENA_DTYPE = _arena_torch.{dtype}
_arena_models = {{}}


def _arena_build(cls, device):
    key = (cls.__name__, str(device))
    model = _arena_models.get(key)
    if model is None:
        with _arena_torch.random.fork_rng(devices=[]):  # the caller's CPU generator is left as it was
            _arena_torch.manual_seed({seed})
            init = _ARENA_INIT_INPUTS if "_ARENA_INIT_INPUTS" in globals() else get_init_inputs()
            _arena_torch.manual_seed({seed})
            model = cls(*init)
        model = model.to(device=device, dtype=_ARENA_DTYPE)
        _arena_models[key] = model
    return model


def _arena_device(inputs):
    return next((t.device for t in inputs if isinstance(t, _arena_torch.Tensor)), _arena_torch.device("cpu"))


def _arena_cast(x):
    if isinstance(x, _arena_torch.Tensor) and x.is_floating_point():
        return x.to(_ARENA_DTYPE)
    return x


def _arena_outputs(out):
    outs = tuple(o.reshape(1) if o.dim() == 0 else o for o in (out if isinstance(out, (tuple, list)) else (out,)))
    return outs if len(outs) > 1 else outs[0]  # a 0-dimensional output travels as shape [1]
"""

_FUNCTIONAL = """

_ARENA_PARAMETERS = {params!r}


def _arena_call(model, inputs):
    args, params = inputs[:{n}], inputs[{n}:]
    state = {{name: _arena_cast(p) for name, p in zip(_ARENA_PARAMETERS, params)}}
    with _arena_torch.no_grad():
        out = _arena_torch.func.functional_call(model, state, tuple(_arena_cast(a) for a in args))
    return _arena_outputs(out)
"""


def _header(problem: Problem, source: str, doc: str, n_inputs: int) -> str:
    return f"""{problem.source.rstrip()}


# --- arena entry, written by `arena import kernelbench` from {source} ---
# {doc}
# run(*inputs): get_inputs()'s {n_inputs} argument(s), then the model's parameters in named_parameters() order.
"""


def _build(dtype: str) -> str:
    return _BUILD.format(dtype=dtype, seed=SEED)


def reference_module(problem: Problem, source: str, base: Probe, dtype: str) -> str:
    n = len(base.inputs)
    return (
        _header(problem, source, REFERENCE_DOC, n)
        + _build(dtype)
        + _FUNCTIONAL.format(params=param_names(problem), n=n)
        + """

def run(*inputs):
    # The harness turns TF32 off around reference calls; KernelBench compares against the Model
    # run with PyTorch's defaults (cuDNN convolutions in TF32, matmuls in full fp32): those here.
    saved = _arena_torch.backends.cuda.matmul.allow_tf32, _arena_torch.backends.cudnn.allow_tf32
    _arena_torch.backends.cuda.matmul.allow_tf32, _arena_torch.backends.cudnn.allow_tf32 = False, True
    try:
        return _arena_call(_arena_build(Model, _arena_device(inputs)), inputs)
    finally:
        _arena_torch.backends.cuda.matmul.allow_tf32, _arena_torch.backends.cudnn.allow_tf32 = saved
"""
    )


def baseline_module(problem: Problem, source: str, base: Probe, dtype: str) -> str:
    n = len(base.inputs)
    return (
        _header(problem, source, BASELINE_DOC, n)
        + _build(dtype)
        + _FUNCTIONAL.format(params=param_names(problem), n=n)
        + f"""

_arena_compiled = {{}}


def _arena_eager(*inputs):
    return _arena_call(_arena_build(Model, _arena_device(inputs)), inputs)


def _arena_torch_compile(*inputs):
    # KernelBench's compile baseline: torch.compile(model) with inductor in its default mode,
    # one static graph per shape. The compiled model holds the parameters it was first given
    # (KernelBench's, built under seed 42: the same at every call).
    device = _arena_device(inputs)
    key = str(device)
    if key not in _arena_compiled:
        model = _arena_build(Model, device)
        with _arena_torch.no_grad():
            for (name, p), given in zip(model.named_parameters(), inputs[{n}:]):
                p.copy_(given)
        _arena_compiled[key] = _arena_torch.compile(model, backend="inductor", mode="default", dynamic=False)
    with _arena_torch.no_grad():
        out = _arena_compiled[key](*(_arena_cast(a) for a in inputs[:{n}]))
    return _arena_outputs(out)


IMPLS = {{"eager": _arena_eager, "torch_compile": _arena_torch_compile}}
IMPL = "eager"  # which implementation the last call used (the result's baseline_impl)


def run(*inputs):
    global IMPL
    IMPL = "eager"
    return _arena_eager(*inputs)
"""
    )


def starter_module(problem: Problem, source: str, base: Probe, dtype: str) -> str:
    n = len(base.inputs)
    return (
        _header(problem, source, STARTER_DOC, n)
        + _build(dtype)
        + _FUNCTIONAL.format(params=param_names(problem), n=n)
        + """

def run(*inputs):
    return _arena_call(_arena_build(Model, _arena_device(inputs)), inputs)
"""
    )


def adapter_module(problem: Problem, source: str, base: Probe, dtype: str) -> str:
    """Appended to a KernelBench candidate (a file with `ModelNew` and no `run`)."""
    init = init_inputs(problem)
    return f"""

# --- arena adapter, written by `arena import kernelbench` from {source} ---
# A KernelBench candidate as KernelBench runs it: ModelNew(*get_init_inputs()) built under seed
# {SEED} on the CPU, moved to the device in the problem's precision, called with get_inputs()'s
# {len(base.inputs)} argument(s) (the parameters that follow them are KernelBench's own, which
# ModelNew makes itself).
ADAPTS = "ModelNew"
_ARENA_INIT_INPUTS = {init!r}  # the problem's get_init_inputs()
{_build(dtype)}

def run(*inputs):
    model = _arena_build(ModelNew, _arena_device(inputs))
    with _arena_torch.no_grad():
        out = model(*(_arena_cast(a) for a in inputs[:{len(base.inputs)}]))
    return _arena_outputs(out)
"""


def inputs_module(problem: Problem, source: str, base: Probe, dtype: str) -> str:
    """The problem's module (its Model builds the parameters) with its `torch.rand`-like calls
    given the evaluation's generator and device, and a make_inputs."""
    body = ast.unparse(problem.tree)
    return f'''"""Inputs of KernelBench {source}: its constants and get_inputs() at the workload's sizes, then
the model's parameters as KernelBench makes them (the Model built under seed {SEED}). Written by
`arena import kernelbench`."""

import ast

import torch

_SOURCE = {body!r}
_SCALED = {list(base.constants)!r}
_DTYPE = torch.{dtype}
_SEED = {SEED}

_RANDOM = {{"rand", "randn", "randint", "randperm", "normal", "bernoulli", "multinomial", "poisson"}}
_FACTORIES = {{"zeros", "ones", "empty", "full", "arange", "linspace", "eye", "tensor"}}
_compiled = {{}}
_parameters = {{}}


class _OnDevice(ast.NodeTransformer):
    """Outside the Model and get_init_inputs (which build the parameters under seed {SEED}, as
    KernelBench does), `torch.rand(...)` and friends draw with the evaluation's generator on its
    device (given explicitly, never through a device context or torch's global generator: every
    process that draws a workload's inputs gets the same tensors), and factories allocate there."""

    def visit_ClassDef(self, node):
        return node

    def visit_FunctionDef(self, node):
        if node.name != "get_init_inputs":
            self.generic_visit(node)
        return node

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
    ns = {{"_axes": {{k: axes[k] for k in _SCALED if k in axes}}, "__name__": "kernelbench_inputs", "_arena_generator": generator, "_arena_device": generator.device}}
    exec(_compiled["code"], ns)
    return ns


def _model_parameters(ns, device):
    """KernelBench's parameters: Model(*get_init_inputs()) built on the CPU in float32 under seed
    {SEED} (eval.py's set_seed before each), cast to the precision and moved to the device; made
    once per device, and copied for every call (a call never shares tensors with another)."""
    key = str(device)
    if key not in _parameters:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(_SEED)
            init = ns["get_init_inputs"]()
            torch.manual_seed(_SEED)
            model = ns["Model"](*init)
        _parameters[key] = [p.detach().to(device=device, dtype=_DTYPE) for _, p in model.named_parameters()]
    return [p.clone() for p in _parameters[key]]


def _cast(x, device):
    if isinstance(x, torch.Tensor):
        x = x.to(device)
        return x.to(_DTYPE) if x.is_floating_point() else x
    return x


def make_inputs(axes, generator):
    device = generator.device
    ns = _problem(axes, generator)
    args = [_cast(x, device) for x in ns["get_inputs"]()]
    return args + _model_parameters(ns, device)
'''


def param_names(problem: Problem) -> list[str]:
    import torch

    ns = problem.module({})
    with torch.device("meta"):
        model = ns["Model"](*ns["get_init_inputs"]())
    return [name for name, _ in model.named_parameters()]


def init_inputs(problem: Problem) -> list[Any]:
    """The problem's get_init_inputs(), as a literal the adapter can carry (they are sizes and
    flags in every KernelBench problem)."""
    from core.importers.kernelbench_problem import ProblemError

    values = list(problem.module({})["get_init_inputs"]())
    try:
        if ast.literal_eval(repr(values)) != values:
            raise ValueError
    except (ValueError, SyntaxError):
        raise ProblemError(
            "init_inputs",
            "get_init_inputs() returns something other than numbers, strings and tuples of them: a ModelNew file could not be built",
        ) from None
    return values
