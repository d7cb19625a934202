"""The Python files an AgentKernelArena task converts into:

- `baseline.py`, `starter.py`: the task's source file and a `run` that calls its entry
  (AgentKernelArena's baseline is the untouched source);
- `adapter.py`: that `run` alone, appended to a candidate that defines no `run` but the entry:
  the task's source file as a user of AgentKernelArena edits it is accepted as it is;
- `reference.py`: the runner's own `reference_*` function, called as run_correctness calls it
  (on CPU copies where the runner makes them), its outputs back on the inputs' device;
- `inputs.py`: the runner's run_correctness replayed at the workload's shape, on the
  evaluation's device and seed, stopped at the entry call.

`run` returns the entry's outputs as the harness takes them: an argument written in place as
that whole argument (declared `inplace_of` in task.yaml), a returned view of an argument as a
copy (the harness never takes an output that shares an input's memory), anything else as it is
(made contiguous).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from core.importers.aka_replay import KernelOutput, ReferenceCall, replayable_source
from core.importers.aka_runner import Runner
from core.importers.aka_shapes import Layout

# An argument of the entry's call, from the tensors `run` was given, a tensor's shape, or the
# values fixed across the shapes (written into the entry and the reference modules).
_ARGUMENT = """def _arena_argument(name, given):
    if name in given:
        return given[name]
    if name in _ARENA_FROM_SHAPE:
        tensor, dim = _ARENA_FROM_SHAPE[name]
        return int(given[tensor].shape[dim])
    return _ARENA_FIXED[name]
"""


def _arguments(layout: Layout) -> str:
    return f"""_ARENA_ARGUMENTS = {layout.arg_names!r}
_ARENA_TENSORS = {list(layout.tensor)!r}
_ARENA_FIXED = {layout.fixed!r}
_ARENA_POSITIONAL = {layout.n_positional}
_ARENA_FROM_SHAPE = {layout.from_shape!r}  # integer arguments read off a tensor's shape: name -> (tensor, dim)


{_ARGUMENT}"""


def run_code(
    source: str, runner: Runner, layout: Layout, outputs: list[KernelOutput], returns_none: bool
) -> str:
    """The `run` appended to the task's source (baseline, starter) or to a candidate (adapter)."""
    kinds = [(o.kind, o.arg) for o in outputs]
    return f"""

# --- arena entry, written by `arena import agentkernelarena` from {source} ---
# run(*inputs) takes the tensor arguments of `{runner.entry}` in call order; the others are fixed.
import torch as _arena_torch

{_arguments(layout)}
_ARENA_OUTPUTS = {kinds!r}  # per output: returned | inplace (the whole argument) | view (of an argument), argument index
_ARENA_RETURNS_NONE = {returns_none!r}  # the entry writes its outputs in place and returns nothing


def run(*inputs):
    given = dict(zip(_ARENA_TENSORS, inputs))
    values = [_arena_argument(n, given) for n in _ARENA_ARGUMENTS]
    args, kwargs = values[:_ARENA_POSITIONAL], dict(zip(_ARENA_ARGUMENTS[_ARENA_POSITIONAL:], values[_ARENA_POSITIONAL:]))
    out = {runner.entry}(*args, **kwargs)
    outs = [] if _ARENA_RETURNS_NONE else list(out) if isinstance(out, (tuple, list)) else [out]
    result = []
    for k, (kind, i) in enumerate(_ARENA_OUTPUTS):
        if kind == "inplace":
            result.append(values[i])
        elif kind == "view":
            result.append(outs[k].clone(memory_format=_arena_torch.contiguous_format))
        else:
            result.append(outs[k] if outs[k].is_contiguous() else outs[k].contiguous())
    return tuple(result) if len(result) > 1 else result[0]
"""


def entry_module(
    source_file: Path,
    source: str,
    runner: Runner,
    layout: Layout,
    outputs: list[KernelOutput],
    returns_none: bool,
) -> str:
    return (
        source_file.read_text().rstrip()
        + "\n"
        + run_code(source, runner, layout, outputs, returns_none)
    )


def adapter_module(
    source: str, runner: Runner, layout: Layout, outputs: list[KernelOutput], returns_none: bool
) -> str:
    return (
        f"\n\n# --- arena adapter: appended to a candidate that defines `{runner.entry}` and no `run` ---\n"
        f"ADAPTS = {runner.entry!r}" + run_code(source, runner, layout, outputs, returns_none)
    )


def reference_module(runner: Runner, source: str, layout: Layout, call: ReferenceCall) -> str:
    return f'''"""The reference of AgentKernelArena {source}: its runner's own `{call.name}`, called with the
entry's arguments as run_correctness calls it. Written by `arena import agentkernelarena`."""

__arena_device__ = "cpu"
{replayable_source(runner.tree)}


# --- arena entry ---
import torch as _arena_torch

{_arguments(layout)}
_ARENA_CALL = {call.args!r}
_ARENA_KWARGS = {call.kwargs!r}
_ARENA_ON_CPU = {call.on_cpu!r}  # the runner hands the reference CPU copies: it computes there


def _arena_value(spec, values):
    if spec[0] == "const":
        return spec[1]
    v = values[spec[1]]
    if isinstance(v, _arena_torch.Tensor):
        v = v.cpu().clone() if _ARENA_ON_CPU else v.clone()  # never writes the caller's inputs
        v = v.to(getattr(_arena_torch, spec[2])) if spec[2] else v
    return v


def run(*inputs):
    given = dict(zip(_ARENA_TENSORS, inputs))
    values = [_arena_argument(n, given) for n in _ARENA_ARGUMENTS]
    args = [_arena_value(s, values) for s in _ARENA_CALL]
    kwargs = {{k: _arena_value(s, values) for k, s in _ARENA_KWARGS}}
    out = {call.name}(*args, **kwargs)
    device = next((t.device for t in inputs if isinstance(t, _arena_torch.Tensor)), None)
    if device is None:
        return out
    if isinstance(out, (tuple, list)):
        return tuple(o.to(device) if isinstance(o, _arena_torch.Tensor) else o for o in out)
    return out.to(device) if isinstance(out, _arena_torch.Tensor) else out
'''


def inputs_module(runner: Runner, source: str, first: tuple[Any, ...]) -> str:
    return f'''"""Inputs of AgentKernelArena {source}: its runner's run_correctness replayed at the workload's
shape, on the evaluation's device and seed, and stopped at the entry call. Written by `arena import
agentkernelarena`; the task's kernel and reference are not in this file."""

import types

import torch

_RUNNER = compile({replayable_source(runner.tree)!r}, "task_runner.py", "exec")
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
    exec(_RUNNER, ns)
    ns["TEST_SHAPES"] = [shape]
    ns["load_module"] = lambda: types.SimpleNamespace(**{{_ENTRY: entry}})
    seed, manual_seed = generator.initial_seed(), torch.manual_seed
    torch.manual_seed = lambda _ignored: manual_seed(seed)  # the runner seeds 42 + i: the evaluation's seed instead
    try:
        said = ns["run_correctness"]()
    except _Captured as call:
        args, kwargs = call.args
        values = list(args) + list(kwargs.values())
        return [v.to(device) for v in values if isinstance(v, torch.Tensor)]
    finally:
        torch.manual_seed = manual_seed
    # The runner catches what failed before the call and returns it: say it, not only that
    why = said[1] if isinstance(said, tuple) and len(said) > 1 and said[1] else said
    raise RuntimeError(f"the runner never called {{_ENTRY}} at {{shape}}: it returned {{why!r}}")
'''
