"""An AgentKernelArena task's reference, run at each of its workloads at import (ref_check.py
says what is checked), and its own kernel against that reference where it runs on the CPU.

The work is counted, not timed (work.py): the runner building a workload's inputs and the
reference computing its outputs may run at most `LINE_BUDGET` Python lines there. A reference
written as Python loops over elements (`for v in range(vocab_size): ... .item()`) runs out of
them at large sizes; so would it in the harness, where every correctness call and seed runs it
again, so such a workload is left out. The interpreter's calls are bounded in CPU seconds."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from core.importers.aka_replay import (
    Captured,
    KernelOutput,
    ReferenceCall,
    _runner_namespace,
    capture_call,
    kernel_call,
)
from core.importers.aka_runner import Runner
from core.importers.kernelbench_problem import ProblemError
from core.importers.ref_check import BrokenWorkload, Rule, check_outputs
from core.importers.work import TooMuchWork, counted, cpu_limited

LINE_BUDGET = 1_000_000  # Python lines to build one workload's inputs and run its reference
KERNEL_CPU_S = 20.0  # CPU seconds for one call of the task's kernel in Triton's interpreter
LARGE_KERNEL_CPU_S = (
    5.0  # ... at the large hidden shape, where it is a check beyond the CPU's needs
)
CPU_CAP_BYTES = 100 * 10**6  # a CPU workload's tensors: inputs and outputs


@dataclass
class Checked:
    """A workload that passed: the entry's arguments there and the reference's outputs."""

    shape: tuple[Any, ...]
    call: Captured
    expected: list[Any]

    @property
    def nbytes(self) -> int:
        import torch

        tensors = [v for v in self.call.values if isinstance(v, torch.Tensor)] + list(self.expected)
        return sum(t.numel() * t.element_size() for t in tensors)


def reference_args(call: Captured, ref: ReferenceCall) -> tuple[list[Any], dict[str, Any]]:
    """The reference's arguments from the entry's, as run_correctness hands them over."""
    import torch

    values = call.values

    def value(spec: tuple[Any, ...]) -> Any:
        if spec[0] == "const":
            return spec[1]
        v = values[spec[1]]
        if isinstance(v, torch.Tensor):
            v = v.clone()  # the reference never writes into the entry's arguments
            v = v.cpu() if ref.on_cpu else v
            v = v.to(getattr(torch, spec[2])) if spec[2] else v
        return v

    return [value(s) for s in ref.args], {k: value(s) for k, s in ref.kwargs}


def check_workload(
    runner: Runner,
    ref: ReferenceCall,
    outputs: list[KernelOutput],
    shape: tuple[Any, ...],
    rule: Rule,
) -> Checked:
    """The reference at `shape`: it runs within the work budget, returns one finite tensor per
    output of the entry (an in-place one shaped as its argument), and no lazy output passes."""
    import torch

    where = f"shape {shape}"
    try:
        with counted(LINE_BUDGET):
            call = capture_call(runner, shape)
            ns = _runner_namespace(runner, shape, "cpu", lambda *a, **k: None)
            args, kwargs = reference_args(call, ref)
            with torch.no_grad():
                got = ns[ref.name](*args, **kwargs)
    except TooMuchWork as exc:
        raise BrokenWorkload(
            "too_much_work",
            f"building the inputs and running the reference at {where} took {exc.what} (the harness runs it for every call it checks)",
        ) from None
    except ProblemError as exc:
        raise BrokenWorkload(exc.kind, exc.reason) from None
    except MemoryError:
        raise BrokenWorkload(
            "too_large",
            f"building the inputs and running the reference at {where} needs more memory than the import allows",
        ) from None
    except Exception as exc:  # noqa: BLE001 - the runner's reference may raise anything
        raise BrokenWorkload(
            "reference_raises",
            f"the reference raised {type(exc).__name__} at {where}: {' '.join(str(exc).split())[:200]}",
        ) from None
    expected = list(got) if isinstance(got, (tuple, list)) else [got]
    if len(expected) != len(outputs):
        raise BrokenWorkload(
            "reference_outputs",
            f"the reference returns {len(expected)} value(s) at {where}; the entry has {len(outputs)} output(s)",
        )
    values = call.values
    for k, (o, want) in enumerate(zip(outputs, expected)):
        if not isinstance(want, torch.Tensor):
            continue  # check_outputs says so
        if o.kind == "inplace" and tuple(want.shape) != tuple(values[o.arg].shape):  # type: ignore[index]
            raise BrokenWorkload(
                "reference_outputs",
                f"output {k} is written in place into argument {o.arg} {tuple(values[o.arg].shape)}, "  # type: ignore[index]
                f"but the reference returns {tuple(want.shape)} at {where}",
            )
    check_outputs(expected, values, rule, where)
    return Checked(shape, call, expected)


def own_kernel_passes(
    runner: Runner,
    source_file: Any,
    outputs: list[KernelOutput],
    at: Checked,
    rule: Rule,
    cpu_s: float,
) -> None:
    """The task's own kernel (in the interpreter, at most `cpu_s` CPU seconds: TooMuchWork past
    them) against its reference at a workload: the task's baseline must pass its own task.
    ProblemError (`own_source`) where it does not."""
    from core.harness import compare

    call = capture_call(runner, at.shape)
    with cpu_limited(cpu_s):
        found, tensors, _ = kernel_call(runner, source_file, call)
    if [(o.kind, o.arg) for o in found] != [(o.kind, o.arg) for o in outputs]:
        raise ProblemError(
            "outputs",
            f"the entry's outputs change with the shape ({[o.kind for o in outputs]} at the smallest, {[o.kind for o in found]} at {at.shape})",
        )
    for k, (got, want) in enumerate(zip(tensors, at.expected)):
        verdict = compare.compare(got, want.to(got.device), rule.atol, rule.rtol, rule.min_match)
        if not verdict["passed"]:
            raise ProblemError(
                "own_source",
                f"the task's own kernel fails its reference at {at.shape} (output {k}: {verdict.get('message')}): "
                "its correctness rule, as read here, rejects its own source",
            )
