"""One AgentKernelArena template Triton task converted into an ordinary arena task folder
(core/importers/agentkernelarena.py runs it in a child per task and says what the task becomes;
docs/interop.md says how it is judged): the runner read, its arguments classified, the entry's
outputs found by calling the task's own kernel once in Triton's interpreter, every workload's
reference checked, the hidden shapes chosen, and the files written."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import yaml

from core.importers.aka_check import (
    CPU_CAP_BYTES,
    KERNEL_CPU_S,
    LARGE_KERNEL_CPU_S,
    LINE_BUDGET,
    Checked,
    check_workload,
    own_kernel_passes,
)
from core.importers.aka_files import task_yaml
from core.importers.aka_modules import (
    adapter_module,
    entry_module,
    inputs_module,
    reference_module,
)
from core.importers.aka_replay import (
    KernelOutput,
    ReferenceCall,
    capture_call,
    capture_reference,
    kernel_call,
)
from core.importers.aka_runner import Runner
from core.importers.aka_shapes import hidden_candidates, read_layout, volume
from core.importers.kernelbench_problem import ProblemError
from core.importers.ref_check import BrokenWorkload, Rule
from core.importers.report import Converted
from core.importers.work import TooMuchWork, counted, cpu_limited

FAMILY = "agentkernelarena"


def task_name(folder: Path) -> str:
    parts = [p for p in folder.parts[-3:] if p not in ("tasks", "triton2triton")]
    return re.sub(r"[^a-z0-9]+", "_", "_".join(parts).lower()).strip("_").replace("triton_", "", 1)


def convert(folder: Path, source: str, out: Path) -> Converted:
    config = yaml.safe_load((folder / "config.yaml").read_text()) or {}
    kind = str(config.get("task_type", ""))
    if kind != "triton2triton":
        amd = " (HIP: AMD devices only)" if "hip" in kind else ""
        raise ProblemError(
            kind or "unknown",
            f"a `{kind}` task{amd}: only Triton-to-Triton tasks convert to ordinary tasks",
        )
    sources = config.get("source_file_path") or []
    if len(sources) != 1:
        raise ProblemError(
            "off_template",
            f"source_file_path lists {len(sources)} files: one source module converts",
        )
    source_file = folder / sources[0]
    runner = Runner.read(folder, config)
    usable = [s for s in runner.shapes if _modes(s) == _modes(runner.shapes[0])]
    sizes = [i for i, v in enumerate(runner.shapes[0]) if type(v) is int]
    if not sizes:
        raise ProblemError("off_template", "TEST_SHAPES holds no integer sizes to scale")
    rule = Rule(runner.tolerance.atol, runner.tolerance.rtol)
    by_volume = sorted(usable, key=lambda s: volume(s, sizes))
    try:
        with counted(LINE_BUDGET):
            # The arguments first (the commonest reason not to convert): every one that varies
            # across the shapes must be a tensor or read off one (aka_shapes.py).
            early = [capture_call(runner, s) for s in by_volume[:3]]
            read_layout(runner, source_file, early, [[] for _ in early], by_volume[:3], sizes)
            reference = capture_reference(runner, by_volume[0])
    except TooMuchWork as exc:
        raise ProblemError(
            "too_much_work",
            f"building the inputs and finding the reference's call at the smallest shapes took {exc.what}",
        ) from None
    try:
        with cpu_limited(KERNEL_CPU_S):
            outputs, _, returns_none = kernel_call(runner, source_file, early[0])
    except TooMuchWork as exc:
        raise ProblemError(
            "interpreter",
            f"its kernel needs {exc.what} in Triton's CPU interpreter at {by_volume[0]}",
        ) from None

    notes = [
        f"entry: {runner.entry}",
        f"shapes used: {len(usable)} of {len(runner.shapes)} (the first shape's flags)",
    ]
    visible: list[Checked] = []
    broken: list[BrokenWorkload] = []
    for shape in usable:
        try:
            visible.append(check_workload(runner, reference, outputs, shape, rule))
        except BrokenWorkload as exc:
            broken.append(exc)
            notes.append(f"visible shape {shape} left out: {exc.reason}")
    if not visible:
        raise ProblemError(
            broken[0].kind,
            "no TEST_SHAPES entry passes the reference's checks: " + "; ".join(notes[2:4]),
        )
    by_size = sorted(visible, key=lambda c: volume(c.shape, sizes))
    cpu_visible = [c for c in by_size if c.nbytes <= CPU_CAP_BYTES][:2]
    if not cpu_visible:
        raise ProblemError(
            "cpu_size", f"no shape moves under {CPU_CAP_BYTES / 1e6:.0f} MB: no CPU workload"
        )
    for at in cpu_visible:  # the task's own kernel must pass its own task where the CPU runs it
        try:
            own_kernel_passes(runner, source_file, outputs, at, rule, KERNEL_CPU_S)
        except TooMuchWork as exc:
            raise ProblemError(
                "interpreter",
                f"its kernel needs {exc.what} in Triton's CPU interpreter at {at.shape}: too slow for the CPU device",
            ) from None
    hidden = _hidden(runner, source_file, reference, outputs, visible, sizes, rule, notes)
    cpu_hidden = [h for h in hidden[1:] if h.nbytes <= CPU_CAP_BYTES]
    if not cpu_hidden:
        raise ProblemError(
            "cpu_size", f"the small hidden shape moves over {CPU_CAP_BYTES / 1e6:.0f} MB"
        )

    everything = visible + hidden
    runs = [
        [
            (tuple(e.shape), o.dtype, o.arg if o.kind == "inplace" else None)
            for e, o in zip(c.expected, outputs)
        ]
        for c in everything
    ]
    shapes = [c.shape for c in everything]
    layout = read_layout(runner, source_file, [c.call for c in everything], runs, shapes, sizes)

    name = task_name(folder)
    target = out / FAMILY / name
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    (target / "task.yaml").write_text(
        task_yaml(
            config,
            source,
            runner,
            [c.shape for c in visible],
            [c.shape for c in hidden],
            [c.shape for c in cpu_visible],
            [c.shape for c in cpu_hidden],
            sizes,
            layout,
            outputs,
            reference.on_cpu,
            notes,
        )
    )
    entry = entry_module(source_file, source, runner, layout, outputs, returns_none)
    (target / "baseline.py").write_text(entry)
    (target / "starter.py").write_text(entry)
    (target / "adapter.py").write_text(
        adapter_module(source, runner, layout, outputs, returns_none)
    )
    (target / "reference.py").write_text(reference_module(runner, source, layout, reference))
    (target / "inputs.py").write_text(inputs_module(runner, source, usable[0]))
    return Converted(source, f"{FAMILY}/{name}", str(target), tuple(notes))


def _hidden(
    runner: Runner,
    source_file: Path,
    reference: ReferenceCall,
    outputs: list[KernelOutput],
    visible: list[Checked],
    sizes: list[int],
    rule: Rule,
    notes: list[str],
) -> list[Checked]:
    """The large hidden shape, then the small one: the first candidate of each group where the
    reference passes its checks and the task's own kernel passes the reference in the
    interpreter (a kernel that assumes divisible sizes fails at some; the next candidate rounds
    to a multiple). The small one is checked first and fully; the large one's kernel check gets a
    few CPU seconds and is noted where they do not suffice."""
    large, small = hidden_candidates([c.shape for c in visible], sizes)
    found: list[Checked | None] = [None, None]
    rounding = (
        1  # the small shape's: the large one starts there (a kernel's divisibility is its own)
    )
    for slot, group, budget in ((1, small, KERNEL_CPU_S), (0, large, LARGE_KERNEL_CPU_S)):
        for multiple, shape in group:
            if slot == 0 and multiple < rounding:
                continue
            try:
                checked = check_workload(runner, reference, outputs, shape, rule)
                own_kernel_passes(runner, source_file, outputs, checked, rule, budget)
            except TooMuchWork as exc:
                notes.append(
                    f"the task's kernel was not run at hidden shape {shape} here (it needs {exc.what} in the interpreter)"
                )
            except (BrokenWorkload, ProblemError) as exc:
                notes.append(f"hidden shape {shape} not used: {exc.reason}")
                continue
            found[slot], rounding = checked, multiple
            break
        if found[slot] is None:
            break  # no small hidden shape: the large ones would cost more and fail the same way
    if found[0] is None or found[1] is None:
        raise ProblemError(
            "no_hidden",
            "no scaled shape passes the reference's checks and the task's own kernel: hidden workloads are impossible ("
            + "; ".join(n for n in notes if n.startswith("hidden"))[:600]
            + ")",
        )
    return [found[0], found[1]]


def _modes(shape: tuple[Any, ...]) -> tuple[Any, ...]:
    """A shape's non-size entries (flags, names, floats): shapes that differ there are other tasks."""
    return tuple(v for v in shape if type(v) is not int)
