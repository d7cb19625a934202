"""The task's code as the trusted worker loads it: the reference, the baseline, inputs.py, check.py.

Every file is read as bytes checked against the hash the engine recorded in the job
(worker_tools.read_task_file) and executed from those bytes. The reference runs in full
float32 (`full_fp32`); the baseline keeps PyTorch's defaults, as the candidate does, and says
which implementation it ran (`baseline_impl`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from core.harness import checking
from core.harness.worker_tools import device_of, entry, module_from_source, read_task_file


def full_fp32(run: Callable[..., Any]) -> Callable[..., Any]:
    """`run` with TF32 off for the length of each call: the reference in full float32. Only the
    reference: the baseline, timed in this same worker, keeps PyTorch's defaults, as the
    candidate's worker does (cuDNN convolutions in TF32). Off for the whole worker, it timed an
    fp32 convolution's baseline 2.2x slower than the same code as the candidate on the H200."""

    def reference(*args: Any) -> Any:
        saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
        try:
            return run(*args)
        finally:
            torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved

    return reference


@dataclass
class TaskCode:
    """The task's code, loaded from its hash-checked files."""

    device: torch.device
    sources: dict[str, bytes | None]
    reference_run: Callable[..., Any]
    baseline_module: Any
    baseline_run: Callable[..., Any]
    custom: Any  # inputs.py's make_inputs, or None
    check: checking.Check | None
    pooled: Any
    # reference.py's bytes_share(axes, inputs): the share of the byte formula drawn inputs need
    # (a `sim:` device's hold, sim_stage.drawn_share), or None
    bytes_share: Any = None


def load_task(job: dict[str, Any]) -> TaskCode:
    device = device_of(job)
    task_dir = Path(job["task_dir"])
    sources = {
        name: read_task_file(job, name)
        for name in ("reference.py", "baseline.py", "inputs.py", "check.py")
    }
    for name in ("reference.py", "baseline.py"):
        if sources[name] is None:
            raise FileNotFoundError(f"the task's {name} is missing")
    reference_source, baseline_source = sources["reference.py"], sources["baseline.py"]
    assert reference_source is not None and baseline_source is not None  # checked above
    if device.type == "cpu":
        # A Triton baseline (an imported AgentKernelArena task's own kernel) runs in the
        # interpreter here, as the candidate's does: its @triton.jit must see it switched on.
        from core.harness.triton_cpu import enable_interpreter

        enable_interpreter()
    reference = module_from_source(
        reference_source, "arena_reference", str(task_dir / "reference.py")
    )
    reference_run = full_fp32(entry(reference, "reference.py"))
    bytes_share = getattr(reference, "bytes_share", None)
    baseline_module = module_from_source(
        baseline_source, "arena_baseline", str(task_dir / "baseline.py")
    )
    baseline_run = entry(baseline_module, "baseline.py")
    if job.get("baseline_impl"):
        baseline_run = chosen_impl(baseline_module, job["baseline_impl"])
    custom = None
    if sources["inputs.py"] is not None:
        custom = module_from_source(
            sources["inputs.py"], "arena_task_inputs", str(task_dir / "inputs.py")
        ).make_inputs
    check, pooled = (
        (None, None)
        if sources["check.py"] is None
        else checking.checks_from_source(sources["check.py"], str(task_dir / "check.py"))
    )
    return TaskCode(
        device,
        sources,
        reference_run,
        baseline_module,
        baseline_run,
        custom,
        check,
        pooled,
        bytes_share if callable(bytes_share) else None,
    )


def chosen_impl(module: Any, name: str) -> Callable[..., Any]:
    """The baseline implementation a run asked for by name (`arena eval --baseline-impl`, a run
    file's `baseline_impl:`): baseline.py's `IMPLS[name]`, reported as that name; an error where
    it has none or it did not import here (the evaluation is then an infrastructure fault that
    says so, never a silent fall back to another baseline)."""
    impls = getattr(module, "IMPLS", None)
    run = impls.get(name) if isinstance(impls, dict) else None
    if not callable(run):
        available = [k for k, v in impls.items() if callable(v)] if isinstance(impls, dict) else []
        raise RuntimeError(
            f"the run asks for baseline `{name}`, which baseline.py cannot run here "
            f"(its IMPLS that import here: {', '.join(available) or 'none'})"
        )

    def chosen(*args: Any) -> Any:
        out = run(*args)
        module.IMPL = name
        return out

    return chosen


def baseline_impl(module: Any) -> str | None:
    """Which implementation the baseline ran: its module's `IMPL`, which run() sets to the
    name task.yaml's `baselines:` gives the candidate it used (read after the calls, so a
    fallback taken at call time is what is reported); None where the module sets none."""
    impl = getattr(module, "IMPL", None)
    return impl if isinstance(impl, str) else None
