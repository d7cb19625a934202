"""`arena import agentkernelarena PATH`: AgentKernelArena's Triton tasks as arena tasks.

An AgentKernelArena task is a folder with `config.yaml` (the source file to optimise, the
kernels in it, compile / correctness / performance commands) and a bespoke
`scripts/task_runner.py`. Most Triton runners follow one generated template: a module-level
`TEST_SHAPES` list, `load_module()` that imports the source file, and `run_correctness()` that,
for each shape, seeds torch, builds the inputs, calls the source's entry function (the one
`run_compile()` asserts with `hasattr`) and compares it with a PyTorch reference. Those convert:

- the inputs are the ones the runner itself builds (`inputs.py` replays its `run_correctness`
  at the workload's shape, on the evaluation's device and seed, and stops it at the entry call,
  before any kernel runs), so their dtypes, layouts (a transposed cache) and value ranges
  (indices, quantised weights) are the task's own;
- the axes are the names `run_correctness` unpacks each shape into, the visible workloads its
  `TEST_SHAPES`, the hidden ones those shapes scaled to sizes that are not powers of two;
- `reference.py`, `baseline.py` and `starter.py` are the task's source file with a `run` that calls
  its entry: the reference is the task's original kernel, which AgentKernelArena's own check
  accepts and which is its baseline (its `reference_*` functions are code inside a loop, not a
  function of the inputs); the tolerance is the runner's own `allclose` tolerance;
- arguments that do not change across the shapes used (a flag, an activation's name) are fixed
  in `run`; shapes whose non-size entries differ from the first shape's are left out.

Everything else (HIP, CUDA and FlyDSL tasks, runners off the template, template tasks whose
conversion fails) becomes an external task (core/importers/aka_external.py): its own commands
in this arena's sandbox, scored by its own rules; HIP ones run only on AMD devices. Repository
and image tasks are reported, with the reason.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from core.importers.aka_files import (
    LICENSE,
    entry_module,
    inputs_module,
    reference_module,
    task_yaml,
)
from core.importers.aka_runner import Runner, capture_call, capture_reference, output_shapes
from core.importers.aka_shapes import hidden_shapes, read_layout
from core.importers.isolate import isolated
from core.importers.kernelbench_problem import ProblemError
from core.importers.report import Converted, ImportReport, Skipped

FAMILY = "agentkernelarena"
OnTask = Callable[[int, int, str, "Converted | Skipped"], None]


@dataclass(frozen=True)
class Options:
    timeout_s: float = 120.0
    external: bool = (
        True  # tasks that do not convert become external tasks (core/importers/aka_external.py)
    )


def find_tasks(root: Path) -> list[Path]:
    """Every task folder (one holding config.yaml) under the checkout's tasks/ folder."""
    base = root / "tasks" if (root / "tasks").is_dir() else root
    return sorted(p.parent for p in base.rglob("config.yaml") if ".git" not in p.parts)


def import_agentkernelarena(
    root: Path | str, out: Path | str, options: Options = Options(), on_task: OnTask | None = None
) -> ImportReport:
    root, out = Path(root).resolve(), Path(out).resolve()
    if not root.is_dir():
        raise FileNotFoundError(
            f"{root}: no such folder; give the path of an AgentKernelArena checkout"
        )
    folders = find_tasks(root)
    if not folders:
        raise FileNotFoundError(
            f"{root}: no AgentKernelArena tasks (expected tasks/**/config.yaml); give the checkout's root"
        )
    report = ImportReport("agentkernelarena", str(root), str(out))
    for i, folder in enumerate(folders, 1):
        source = str(folder.relative_to(root))
        outcome = isolated(
            _convert_one, (folder, source, out, options.external), source, options.timeout_s
        )
        if (
            options.external
            and isinstance(outcome, Skipped)
            and outcome.kind in ("timeout", "crash")
        ):
            outcome = _as_external(
                folder, source, out, f"{outcome.kind}: {outcome.reason}"
            )  # copying files runs none of its code
        (report.converted if isinstance(outcome, Converted) else report.skipped).append(outcome)  # type: ignore[arg-type]
        if on_task:
            on_task(i, len(folders), source, outcome)
    return report


def category_of(source: str) -> str:
    """`tasks/triton2triton/vllm/x` -> `triton2triton/vllm`."""
    parts = Path(source).parts
    start = 1 if parts and parts[0] == "tasks" else 0
    return "/".join(parts[start : start + 2])


def task_name(folder: Path) -> str:
    parts = [p for p in folder.parts[-3:] if p not in ("tasks", "triton2triton")]
    return re.sub(r"[^a-z0-9]+", "_", "_".join(parts).lower()).strip("_").replace("triton_", "", 1)


# --- one task ------------------------------------------------------------------------------------


def _convert_one(
    folder: Path, source: str, out: Path, external: bool = True
) -> Converted | Skipped:
    try:
        return convert(folder, source, out)
    except ProblemError as exc:
        return (
            _as_external(folder, source, out, f"{exc.kind}: {exc.reason}")
            if external
            else Skipped(source, exc.kind, exc.reason)
        )


def _as_external(folder: Path, source: str, out: Path, why: str) -> Converted | Skipped:
    """A task that did not convert, as an external task; where even that is impossible (a
    repository or image task), Skipped with that reason."""
    from core.importers.aka_external import write_external

    try:
        return write_external(folder, source, out, task_name(folder), FAMILY, LICENSE, why)
    except ProblemError as exc:
        return Skipped(source, exc.kind, exc.reason)


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
    hidden = hidden_shapes(runner, source_file, usable, sizes)
    if not hidden:
        raise ProblemError(
            "no_hidden",
            "no scaled shape builds its inputs and runs the kernel: hidden workloads are impossible",
        )
    shapes = usable + hidden
    calls = [capture_call(runner, source_file, s) for s in shapes]
    runs = [output_shapes(runner, source_file, s) for s in shapes]
    layout = read_layout(runner, source_file, calls, runs, shapes, sizes)
    outputs = runs[0]
    reference = capture_reference(runner, source_file, usable[0])

    name = task_name(folder)
    target = out / FAMILY / name
    target.mkdir(parents=True, exist_ok=True)
    notes = [
        f"entry: {runner.entry}",
        f"shapes used: {len(usable)} of {len(runner.shapes)} (the first shape's flags)",
    ]
    (target / "task.yaml").write_text(
        task_yaml(config, source, runner, usable, hidden, sizes, layout, outputs, notes)
    )
    entry = entry_module(
        source_file, source, runner, layout, [i for _, _, i in outputs if i is not None]
    )
    (target / "baseline.py").write_text(entry)
    (target / "starter.py").write_text(entry)
    (target / "reference.py").write_text(reference_module(runner, source, layout, reference))
    (target / "inputs.py").write_text(inputs_module(runner, source, sizes, usable[0]))
    return Converted(source, f"{FAMILY}/{name}", str(target), tuple(notes))


def _modes(shape: tuple[Any, ...]) -> tuple[Any, ...]:
    """A shape's non-size entries (flags, names, floats): shapes that differ there are other tasks."""
    return tuple(v for v in shape if type(v) is not int)
