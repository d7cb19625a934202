"""A converted KernelBench problem's reference, run at each of its workloads at import from the
files just written (ref_check.py says what is checked). Every CPU workload runs for real on the
CPU, and so do GPU-sized ones that move at most 100 MB and compute at most 2·10⁹ FLOPs; larger ones
ran on the meta device while they were sized (shapes and dtypes; their values are the harness's
to check on the device). A hidden or CPU workload that fails is left out (the next size tried
takes its place); the problem's own sizes failing means the problem is not converted."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.importers.kb_files import Layout
from core.importers.kb_sizes import CPU_CAP_BYTES, probe_flops
from core.importers.kernelbench_problem import Probe, ProblemError
from core.importers.ref_check import BrokenWorkload, Rule, check_outputs
from core.tasks.modules import load_module

RUN_BYTES, RUN_FLOPS = CPU_CAP_BYTES, 2e9  # GPU-sized workloads run for real at import up to these
HIDDEN_WANTED = 2  # hidden workloads kept per set (GPU and CPU)
CHECK_SEED = 0  # the inputs the checks draw: the same at every import


@dataclass
class Chosen:
    gpu_hidden: list[Probe]
    cpu_visible: Probe
    cpu_hidden: list[Probe]
    notes: list[str] = field(default_factory=list)


def checked_workloads(
    folder: Path,
    layout: Layout,
    base: Probe,
    gpu_hidden: list[Probe],
    ladder: list[Probe],
    cpu_hidden: list[list[Probe]],
    tolerance: float,
) -> Chosen:
    """The workloads to write: the visible one checked, the first hidden GPU ones and the first
    CPU setting (visible and hidden) that pass. ProblemError where the problem's own sizes
    fail, or where no hidden GPU or CPU workload passes."""
    run = _Reference(folder, layout, Rule(tolerance, tolerance))
    notes: list[str] = []
    try:
        ran = run.check(base, "KernelBench's sizes")
    except BrokenWorkload as exc:
        raise ProblemError(exc.kind, f"{exc.reason}: the problem as KernelBench ships it") from None
    notes.append(
        "KernelBench's sizes: the reference ran on the CPU at import"
        if ran
        else "KernelBench's sizes: shapes checked on the meta device (too large to run at import)"
    )
    kept: list[Probe] = []
    for p in gpu_hidden:
        if len(kept) == HIDDEN_WANTED:
            break
        try:
            run.check(p, _label(p, base))
            kept.append(p)
        except BrokenWorkload as exc:
            notes.append(f"hidden workload {_label(p, base)} left out: {exc.reason}")
    if not kept:
        raise ProblemError("no_hidden", "; ".join(notes[1:]) or "no hidden workload passes")
    for rung, hidden in zip(ladder, cpu_hidden):
        try:
            run.check(rung, "the CPU workload " + _label(rung, base), always=True)
        except BrokenWorkload as exc:
            notes.append(f"CPU size {_label(rung, base)} not used: {exc.reason}")
            continue
        if not hidden:
            notes.append(
                f"CPU size {_label(rung, base)} not used: no other size near it stays under the CPU cap"
            )
            continue
        passing = []
        for p in hidden:
            try:
                run.check(p, "the CPU workload " + _label(p, base), always=True)
                passing.append(p)
            except BrokenWorkload as exc:
                notes.append(f"CPU hidden size {_label(p, base)} left out: {exc.reason}")
        if passing:
            return Chosen(kept, rung, passing[:HIDDEN_WANTED], notes)
    failures = [n for n in notes if n.startswith("CPU")]
    lazy = bool(failures) and all("passes the correctness rule" in n for n in failures)
    if failures and all("stays under the CPU cap" in n for n in failures):
        raise ProblemError(
            "cpu_size",
            f"{failures[0]}: a CPU hidden workload needs a second size, and none fits (its parameters are most of it)",
        )
    raise ProblemError(
        "degenerate" if lazy else "cpu_workload",
        (
            "a lazy output passes at every CPU size tried, up to 100 MB (the problem's inputs and tolerance are "
            "KernelBench's own): "
            if lazy
            else "no CPU size both runs and has a hidden one that passes the checks: "
        )
        + "; ".join(failures[:3]),
    )


def _label(p: Probe, base: Probe) -> str:
    return ", ".join(f"{c}={p.constants[c]}" for c in base.constants)


class _Reference:
    """inputs.py and reference.py of the folder, loaded once, run where a workload is small enough."""

    def __init__(self, folder: Path, layout: Layout, rule: Rule):
        tag = folder.name.strip(".").replace(".", "_")
        self.inputs = load_module(folder / "inputs.py", f"kb_check_inputs_{tag}")
        self.reference = load_module(folder / "reference.py", f"kb_check_reference_{tag}")
        self.layout, self.rule = layout, rule

    def check(self, p: Probe, where: str, always: bool = False) -> bool:
        """True where it ran for real and passed; False where it is too large to run here (its
        meta-device probe stands; `always` runs it anyway: a CPU workload); BrokenWorkload where
        it fails."""
        if not always and (p.nbytes > RUN_BYTES or probe_flops(p) > RUN_FLOPS):
            return False
        import torch

        try:
            args = self.inputs.make_inputs(
                self.layout.axes(p), torch.Generator("cpu").manual_seed(CHECK_SEED)
            )
            with torch.no_grad():
                out = self.reference.run(*args)
        except Exception as exc:  # noqa: BLE001 - the problem's own code may raise anything
            raise BrokenWorkload(
                "reference_raises",
                f"the reference raised {type(exc).__name__} at {where}: {' '.join(str(exc).split())[:200]}",
            ) from None
        outs: list[Any] = list(out) if isinstance(out, (tuple, list)) else [out]
        want = [tuple(o.shape) or (1,) for o in p.outputs]
        got = [tuple(o.shape) if isinstance(o, torch.Tensor) else None for o in outs]
        if got != want:
            raise BrokenWorkload(
                "reference_outputs",
                f"the reference returned shapes {got} at {where}; the meta device gave {want}",
            )
        check_outputs(outs, args, self.rule, where)
        return True
