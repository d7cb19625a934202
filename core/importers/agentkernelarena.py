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

import fnmatch
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
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
from core.importers.aka_files import LICENSE, task_yaml
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
from core.importers.isolate import Budget, isolated_all
from core.importers.kernelbench_problem import ProblemError
from core.importers.ref_check import BrokenWorkload, Rule
from core.importers.report import Converted, ImportReport, Skipped
from core.importers.work import TooMuchWork, counted, cpu_limited

FAMILY = "agentkernelarena"
OnTask = Callable[[int, int, str, "Converted | Skipped"], None]
BUDGET = Budget(cpu_s=120.0)


@dataclass(frozen=True)
class Options:
    budget: Budget = BUDGET  # one task's conversion: CPU seconds, not wall-clock (isolate.py)
    external: bool = (
        True  # tasks that do not convert become external tasks (core/importers/aka_external.py)
    )
    workers: int = 1  # tasks converted at once (one CPU each)
    only: tuple[str, ...] = ()  # glob patterns on the task's path (`*/vllm/triton_bmm`): only those


def find_tasks(root: Path, only: tuple[str, ...] = ()) -> list[Path]:
    """Every task folder (one holding config.yaml) under the checkout's tasks/ folder."""
    base = root / "tasks" if (root / "tasks").is_dir() else root
    found = sorted(p.parent for p in base.rglob("config.yaml") if ".git" not in p.parts)
    if only:
        found = [
            f for f in found if any(fnmatch.fnmatch(str(f.relative_to(base)), pat) for pat in only)
        ]
    return found


def import_agentkernelarena(
    root: Path | str, out: Path | str, options: Options = Options(), on_task: OnTask | None = None
) -> ImportReport:
    """Template Triton tasks convert in forked children, `options.workers` at a time; every other
    task is decided from its config.yaml alone, here, running none of its code."""
    root, out = Path(root).resolve(), Path(out).resolve()
    if not root.is_dir():
        raise FileNotFoundError(
            f"{root}: no such folder; give the path of an AgentKernelArena checkout"
        )
    folders = find_tasks(root, options.only)
    if not folders:
        raise FileNotFoundError(
            f"{root}: no AgentKernelArena tasks (expected tasks/**/config.yaml"
            + (f" matching {', '.join(options.only)}" if options.only else "")
            + "); give the checkout's root"
        )
    report = ImportReport("agentkernelarena", str(root), str(out))
    sources = [str(f.relative_to(root)) for f in folders]
    outcomes: list[Converted | Skipped | None] = [None] * len(folders)
    done = [0]

    def finished(k: int, outcome: Converted | Skipped) -> None:
        if (
            options.external
            and isinstance(outcome, Skipped)
            and outcome.kind in ("hang", "cpu_limit", "crash")
        ):
            outcome = _as_external(  # copying files runs none of its code
                folders[k], sources[k], out, f"{outcome.kind}: {outcome.reason}"
            )
        outcomes[k] = outcome
        done[0] += 1
        if on_task:
            on_task(done[0], len(folders), sources[k], outcome)

    native = []
    for k, folder in enumerate(folders):
        if _converts(folder):
            native.append(k)
        else:
            finished(k, _convert_one(folder, sources[k], out, options.external))
    if native:
        _warm_up()
        isolated_all(
            [
                (_convert_one, (folders[k], sources[k], out, options.external), sources[k])
                for k in native
            ],
            options.budget,
            options.workers,
            lambda j, outcome: finished(native[j], outcome),
        )
    for outcome in outcomes:
        (report.converted if isinstance(outcome, Converted) else report.skipped).append(outcome)  # type: ignore[arg-type]
    return report


def _converts(folder: Path) -> bool:
    """Whether the task might convert to an ordinary one (a Triton-to-Triton task with a
    runner): only those run any of their code at import."""
    try:
        config = yaml.safe_load((folder / "config.yaml").read_text()) or {}
    except (OSError, yaml.YAMLError):
        return False
    return (
        config.get("task_type") == "triton2triton"
        and (folder / "scripts" / "task_runner.py").is_file()
    )


def _warm_up() -> None:
    """Import what every conversion needs once, here: each runs in a forked child, which would
    otherwise import torch and Triton again (seconds each)."""
    import torch  # noqa: F401
    import triton
    import triton.language
    import triton.runtime.interpreter  # noqa: F401

    import core.harness.compare
    import core.harness.triton_cpu  # noqa: F401


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
