"""One isolated workspace per attempt (run × agent × task × device × variant).

The agent sees exactly this folder: `PROMPT.md` (what to do and how it is scored, the run
signature, the visible workloads of its device, the budget, how to use `arena check`),
`solution.py` (a copy of the task's starter: what gets scored) and, where the variant asks for
it, `CHEATSHEET.md` for the device's vendor. Nothing else of the task enters it: no hidden
workload, no reference, no baseline source, no task folder. While the attempt runs the check
server adds its socket, `.arena-check.sock`.

The workspace sits in a per-attempt folder that the agent does not see as a whole:

    <attempt>/workspace/     the agent's cwd, writable
    <attempt>/home/          the agent's private HOME, writable (CLI config, caches)
    <attempt>/bin/arena      runs `arena` from this arena's own packages (read-only for the agent)
    <attempt>/submissions/   snapshots of solution.py as checked and as finally scored
    <attempt>/agent.log      a CLI agent's stderr
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from core.devices.ids import DeviceId, local_part
from core.model.task import Task, TensorSpec

PROMPT = "PROMPT.md"
SOLUTION = "solution.py"
CHEATSHEET = "CHEATSHEET.md"
SOCKET = ".arena-check.sock"
VENDORS = ("nvidia", "amd", "intel", "cpu")


@dataclass(frozen=True)
class Variant:
    """An A/B arm of a run: the same agents and tasks, a different set-up. `cheatsheet` puts
    the vendor's cheatsheet in the workspace; `prompt` is appended to PROMPT.md."""

    name: str = "default"
    cheatsheet: bool = False
    prompt: str = ""
    options: dict[str, Any] = field(default_factory=dict)  # anything else, kept with the run

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "cheatsheet": self.cheatsheet,
            "prompt": self.prompt,
            "options": dict(self.options),
        }


@dataclass(frozen=True)
class Workspace:
    root: Path  # the attempt's folder
    path: Path  # the workspace itself
    prompt: str

    @property
    def solution(self) -> Path:
        return self.path / SOLUTION

    @property
    def socket(self) -> Path:
        return self.path / SOCKET

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def bin(self) -> Path:
        return self.root / "bin"

    @property
    def submissions(self) -> Path:
        return self.root / "submissions"

    @property
    def log(self) -> Path:
        return self.root / "agent.log"


def prompt_head(task: Task) -> list[str]:
    """PROMPT.md's first lines, the same for every task: its id, its description, and the
    heading of what to write."""
    return [f"# Task: {task.id}", "", task.description.strip(), "", "## What to write", ""]


def vendor_of(device_id: str) -> str:
    """The vendor behind a device id, from the id alone (no probe: the device may be on another
    host): `cpu`, `cuda:N` (AMD under a ROCm build of torch), `xpu:N`, `sim:<gpu>`, `host/dev`."""
    kind = local_part(device_id)
    if (gpu := DeviceId.parse(device_id).sim_gpu) is not None:
        gpu = gpu.lower()
        return (
            "amd"
            if gpu.startswith("mi")
            else "intel"
            if gpu.startswith(("pvc", "max", "arc"))
            else "nvidia"
        )
    if kind.startswith("xpu"):
        return "intel"
    if kind.startswith("cuda"):
        if "/" not in device_id:
            try:
                import torch

                return "amd" if getattr(torch.version, "hip", None) else "nvidia"
            except ImportError:
                pass
        return "nvidia"
    return "cpu"


def cheatsheet(vendor: str) -> str:
    """The short vendor cheatsheet bundled in core/data/cheatsheets/."""
    if vendor not in VENDORS:
        raise ValueError(f"no cheatsheet for vendor `{vendor}`: one of {', '.join(VENDORS)}")
    return (
        resources.files("core")
        .joinpath("data", "cheatsheets", f"{vendor}.md")
        .read_text(encoding="utf-8")
    )


BASELINE_FIGURES = "baseline_figures.json"  # core/data/: per GPU model, task and visible workload (bench/tasks_doc.py writes it)


def recorded_baselines(gpu: str) -> dict[str, Any]:
    """The baseline figures recorded on GPU model `gpu` (a peaks-table key such as `h200`):
    {task id: {workload label: {impl, median_us, sol_fraction}}}; {} where none are recorded."""
    import json

    try:
        data = json.loads(
            resources.files("core").joinpath("data", BASELINE_FIGURES).read_text(encoding="utf-8")
        )
    except (FileNotFoundError, ValueError):
        return {}
    return data.get("gpus", {}).get(gpu, {}).get("tasks", {})


def _gpu_key(device_id: str, device_model: str | None) -> str | None:
    """The peaks-table key of the device's GPU model: `sim:h200` stands for the H200; a GPU
    named by its probed model matches the table; the CPU and unknown GPUs have none."""
    local = local_part(device_id)
    if (gpu := DeviceId.parse(device_id).sim_gpu) is not None:
        return gpu
    if device_model and local != "cpu":
        from core.devices.device import load_peaks, match_peaks

        return match_peaks(device_model, load_peaks())
    return None


def baseline_paragraph(task: Task, device_id: str, device_model: str | None = None) -> list[str]:
    """What the agent is compared with: the implementation the baseline runs on this device
    and, where recorded for its GPU model, its time and fraction of speed of light per
    visible workload; else the candidates in order of preference."""
    gpu = _gpu_key(device_id, device_model)
    figures = recorded_baselines(gpu).get(task.id, {}) if gpu else {}
    cpu = device_id.rsplit("/", 1)[-1] == "cpu"
    if cpu:
        ran = [task.baselines[-1]]  # no GPU library runs on the CPU device: the torch fallback
    else:
        impls = [f["impl"] for f in figures.values()]
        ran = [b for b in task.baselines if b.impl in impls] or []
    lines = []
    if ran:
        names = " and ".join(f"`{b.impl}` ({b.kind.replace('_', ' ')}: {b.calls})" for b in ran)
        where = (
            "on the CPU device"
            if cpu
            else f"on this device (recorded on {gpu.upper() if gpu else 'it'})"
        )
        lines.append(
            f"The baseline you are compared with, {where}: {names}. It is what production runs where that library is installed; "
            "aim at beating it, not at torch eager."
        )
    else:
        order = "; ".join(
            f"{n}. `{b.impl}` ({b.kind.replace('_', ' ')}): {b.calls}"
            for n, b in enumerate(task.baselines, 1)
        )
        lines.append(
            f"The baseline you are compared with ({task.baseline_kind.replace('_', ' ')}): `{task.baseline}`. "
            f"It runs the first of these that imports on the device: {order}."
        )
    visible = {w.label for w in task.workloads(cpu=cpu).visible}
    shown = [(label, f) for label, f in figures.items() if label in visible]
    if shown:
        lines += [
            "",
            f"Its recorded times on an NVIDIA {str(gpu).upper()} (fraction of the speed of light, launch floor included):",
        ]
        lines += [
            f"- {label}: {f['median_us']:.2f} µs ({f['sol_fraction'] * 100:.1f}% of speed of light, `{f['impl']}`)"
            for label, f in shown
            if f.get("sol_fraction") is not None
        ]
    if task.baseline_note:
        lines += ["", f"Why the baseline is where it is: {task.baseline_note}"]
    return lines


def _tensor_line(spec: TensorSpec, inputs: tuple[TensorSpec, ...]) -> str:
    return f"- `{spec.name}`: {spec.describe(inputs)}"


def render_prompt(
    task: Task,
    device_id: str,
    variant: Variant,
    budget_s: float,
    max_cost_usd: float | None = None,
    max_tokens: int | None = None,
    with_cheatsheet: bool = False,
    device_model: str | None = None,
) -> str:
    """PROMPT.md. Names the visible workloads of the device only; says that hidden ones exist,
    never what they are. `device_model` (the probed name, e.g. "NVIDIA H200") lets the
    baseline paragraph quote the figures recorded on that GPU model."""
    if task.external is not None:  # its own commands and rules (core/tasks/external.py)
        from core.agents.external_prompt import external_prompt

        return external_prompt(task, device_id, _duration(budget_s), variant.prompt)
    vendor = vendor_of(device_id)
    cpu = device_id.rsplit("/", 1)[-1] == "cpu"
    visible = task.workloads(cpu=cpu).visible
    args = ", ".join(s.name for s in task.inputs)
    outs = [s for s in task.outputs if not s.inplace_of]
    returns = ", ".join(s.name for s in outs) if outs else "None (outputs are written in place)"
    lines = [
        *prompt_head(task),
        f"Edit `solution.py` in this folder. It must define `run({args})` and return {returns}"
        + (" as a tuple in this order." if len(outs) > 1 else "."),
        f"Languages allowed: {', '.join(task.languages)}. It starts as a copy of the task's starter, a correct portable kernel: make it fast and keep it correct.",
        "",
        "Inputs, in call order:",
        *(_tensor_line(s, task.inputs) for s in task.inputs),
        "",
        "Outputs:",
        *(_tensor_line(s, task.inputs) for s in task.outputs),
        "",
        "Axes:",
        *(f"- `{name}`: {meaning}" for name, meaning in task.axes.items()),
        "",
        *baseline_paragraph(task, device_id, device_model),
        "",
        f"## The device: `{device_id}` (vendor: {vendor})",
        "",
    ]
    if cpu:
        lines += [
            "This is the CPU device: Triton runs in its interpreter and PyTorch on the CPU. Times are shown for information only.",
            "",
        ]
    if task.vendor_notes:
        lines += [task.vendor_notes.strip(), ""]
    lines += [
        "## Visible workloads",
        "",
        "Your solution is checked and timed on these shapes (axis values):",
        "",
        *(
            f"- {w.label}" + (f"  ({w.model}{', ' + w.note if w.note else ''})" if w.model else "")
            for w in visible
        ),
        "",
        "## How it is scored",
        "",
        "When the attempt ends, the arena evaluates `solution.py` as it is then, in stages; each stage gates the next:",
        "1. compile: the module imports (and builds, for CUDA/HIP sources);",
        f"2. correctness on the visible workloads, several random seeds each, against a reference computed in higher precision "
        f"(atol {task.correctness.atol:g}, rtol {task.correctness.rtol:g}; NaN or Inf never pass);",
        "3. correctness on hidden workloads you never see: other sizes of the same models, including sizes that are not "
        "powers of two, so do not specialise on the visible shapes;",
        "4. performance: speedup = baseline time / your time (geometric mean over workloads), and the fraction of the "
        "device's speed of light from the task's FLOP and byte counts.",
        "",
        "A candidate that fails a stage scores zero. Reading files outside this folder, caching outputs, timing tricks or "
        "touching the harness are detected and fail the evaluation.",
        "",
        "## Your budget",
        "",
        f"- wall-clock time: {_duration(budget_s)}; at the limit you are stopped and `solution.py` is scored as it is.",
    ]
    if max_cost_usd is not None:
        lines.append(f"- cost: ${max_cost_usd:g} of model usage.")
    if max_tokens is not None:
        lines.append(f"- tokens: {max_tokens:,} (input + output).")
    lines += [
        "",
        "## Checking your work",
        "",
        "Run `arena check` in this folder. It sends `solution.py` to the arena, which runs it on this device and prints:",
        "compile output, correctness on the visible workloads with the worst error, and per-workload times of your code and",
        "the baseline with the speedup and the fraction of speed of light. It never runs hidden workloads. A check waits for",
        "a free slot on the device, so it can take from seconds to minutes; check after meaningful changes, not after each line.",
    ]
    if with_cheatsheet:
        lines += [
            "",
            f"`{CHEATSHEET}` in this folder has notes on writing fast kernels for {vendor}.",
        ]
    if variant.prompt.strip():
        lines += ["", variant.prompt.strip()]
    return "\n".join(lines) + "\n"


def _duration(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:g} h"
    if seconds >= 60:
        return f"{seconds / 60:g} min"
    return f"{seconds:g} s"


def make_workspace(
    root: Path,
    task: Task,
    device_id: str,
    variant: Variant,
    budget_s: float,
    max_cost_usd: float | None = None,
    max_tokens: int | None = None,
    device_model: str | None = None,
) -> Workspace:
    """Create the attempt's folder at `root` from scratch (a rerun attempt starts clean).
    `device_model`: the probed GPU name, for the baseline figures recorded on that model."""
    if root.exists():
        shutil.rmtree(root)
    path = root / "workspace"
    path.mkdir(parents=True)
    for sub in ("home", "bin", "submissions"):
        (root / sub).mkdir()
    with_sheet = bool(variant.cheatsheet)
    prompt = render_prompt(
        task, device_id, variant, budget_s, max_cost_usd, max_tokens, with_sheet, device_model
    )
    (path / PROMPT).write_text(prompt, encoding="utf-8")
    shutil.copyfile(task.file("starter.py"), path / SOLUTION)
    if (
        task.external is not None
    ):  # nothing of it is hidden: the agent reads and runs the task's own files
        from core.agents.external_prompt import WORKSPACE_COPY

        shutil.copytree(
            task.file("files"), path / WORKSPACE_COPY, ignore=shutil.ignore_patterns("__pycache__")
        )
    if with_sheet:
        (path / CHEATSHEET).write_text(cheatsheet(vendor_of(device_id)), encoding="utf-8")
    _write_arena_wrapper(root / "bin" / "arena")
    return Workspace(root=root, path=path, prompt=prompt)


def _write_arena_wrapper(path: Path) -> None:
    """`arena` for the sandbox: this interpreter, with this arena's packages first on the path
    (the editable install may point at another checkout, and the checkout is masked but for
    core/ and the command's package)."""
    from core.devices.device import PACKAGE_ROOT
    from core.model.paths import cli_module

    python = os.path.realpath(sys.executable)
    path.write_text(
        "#!/bin/sh\n"
        f'PYTHONPATH={shlex.quote(str(PACKAGE_ROOT))}${{PYTHONPATH:+:$PYTHONPATH}} exec {shlex.quote(python)} -m {cli_module()} "$@"\n'
    )
    path.chmod(0o755)
