"""`arena import kernelbench PATH`: KernelBench's problems as arena tasks.

One task per problem, `kernelbench/l<level>_<number>_<name>`, as KernelBench's own eval would
judge it (src/kernelbench/eval.py):

- the candidate's `run(*inputs)` takes the forward's arguments (`get_inputs()`, in order)
  followed by the model's parameters (`named_parameters()`, in order); the parameters are
  KernelBench's: the Model built under seed 42 with its own initialisation, the same at every
  call. A file with KernelBench's `ModelNew` and no `run` is accepted as it is (adapter.py);
- reference, baseline (eager, or `torch.compile` by name), starter, inputs and adapter modules
  are written by kb_modules.py; the tolerance is KernelBench's for the precision;
- workloads: the problem's sizes are the visible GPU workload; hidden ones scale the *scalable*
  constants (core/importers/kernelbench_problem.py) to sizes that are not powers of two, within
  the caps of kb_sizes.py (the target device's memory, upstream's own size); the CPU sets
  scale them down until a call fits the CPU device. A problem with no scalable constant gets no
  hidden workloads, and is reported as not converted;
- every workload's reference runs at import (kb_check.py): on the CPU where it is small enough,
  else on the meta device; a workload that breaks it, or where a lazy output passes, is not
  written, and a problem whose own sizes do is not converted;
- FLOPs are torch's FlopCounterMode on the meta device (one per output element where it counts
  none), bytes the sizes of every input, parameter and output: per workload, as the derived axes
  `flop_count` and `byte_count`, named in the task's `provenance`.
"""

from __future__ import annotations

import fnmatch
import re
import shutil
import subprocess
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from core.importers.isolate import Budget, isolated_all
from core.importers.kb_check import checked_workloads
from core.importers.kb_files import PRECISIONS, TOLERANCE, Layout, task_yaml
from core.importers.kb_modules import (
    adapter_module,
    baseline_module,
    inputs_module,
    reference_module,
    starter_module,
)
from core.importers.kb_sizes import (
    CPU_CAP_BYTES,
    DEFAULT_DEVICE_GB,
    FALLBACK_FACTORS,
    HIDDEN_FACTORS,
    cpu_ladder,
    hidden_cap,
    hidden_probes,
    scalable_constants,
)
from core.importers.kernelbench_problem import (
    Problem,
    ProblemError,
    is_power_of_two,
)
from core.importers.report import Converted, ImportReport, Skipped

FAMILY = "kernelbench"

BUDGET = Budget(cpu_s=120.0)
OnProblem = Callable[
    [int, int, str, "Converted | Skipped"], None
]  # (index, total, source, outcome)


@dataclass(frozen=True)
class Options:
    precision: str = "fp32"
    levels: tuple[int, ...] = (1, 2, 3, 4)
    budget: Budget = BUDGET  # one problem's conversion: CPU seconds, not wall-clock (isolate.py)
    device_gb: float = DEFAULT_DEVICE_GB  # the target device's memory: caps the hidden workloads
    workers: int = 1  # problems converted at once (one CPU each)
    only: tuple[str, ...] = ()  # glob patterns on the problem's path (`level1/19_*`): only those
    cpu_mb: float = CPU_CAP_BYTES / 1e6  # a CPU workload moves less than this (`--cpu-memory`)


def find_problems(
    root: Path, levels: Iterable[int] = (1, 2, 3, 4), only: Iterable[str] = ()
) -> list[Path]:
    """The problem files of a KernelBench checkout (or of its `KernelBench/` folder)."""
    base = root / "KernelBench" if (root / "KernelBench").is_dir() else root
    patterns = list(only)
    found = []
    for level in levels:
        folder = base / f"level{level}"
        found += sorted(folder.glob("*.py"), key=lambda p: (_number(p), p.name))
    if patterns:
        found = [
            p
            for p in found
            if any(fnmatch.fnmatch(f"{p.parent.name}/{p.name}", pat) for pat in patterns)
        ]
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
    problems = find_problems(root, options.levels, options.only)
    if not problems:
        raise FileNotFoundError(
            f"{root}: no KernelBench problems (expected KernelBench/level1/*.py"
            + (f" matching {', '.join(options.only)}" if options.only else "")
            + "); give the checkout's root"
        )
    report = ImportReport("kernelbench", str(root), str(out))
    commit = _commit(root)
    _warm_up()
    sources = [str(p.relative_to(root)) for p in problems]
    done = [0]

    def finished(k: int, outcome: Converted | Skipped) -> None:
        done[0] += 1
        if on_problem:
            on_problem(done[0], len(problems), sources[k], outcome)

    outcomes = isolated_all(
        [
            (_convert_one, (path, source, out, options, commit), source)
            for path, source in zip(problems, sources)
        ],
        options.budget,
        options.workers,
        finished,
    )
    for outcome in outcomes:
        (report.converted if isinstance(outcome, Converted) else report.skipped).append(outcome)  # type: ignore[arg-type]
    return report


def _warm_up() -> None:
    """Import what every probe needs once, here: each problem runs in a forked child, which
    would otherwise import it again (seconds each)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    import core.harness.compare  # noqa: F401 - the reference checks' rule

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
    scalable, dropped = scalable_constants(problem, base)
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
    layout = Layout.infer(base, doubled, scalable)

    cap = hidden_cap(base, options.device_gb)
    gpu_hidden = hidden_probes(
        problem, base, scalable, HIDDEN_FACTORS + FALLBACK_FACTORS, cap=cap, want=4
    )
    if not gpu_hidden:
        raise ProblemError(
            "no_hidden",
            f"no scaled size runs on the meta device within {cap / 1e9:.1f} GB: hidden workloads are impossible",
        )
    cpu_cap = int(options.cpu_mb * 1e6)
    ladder, cpu_note = cpu_ladder(problem, base, scalable, cpu_cap)
    cpu_hidden = [
        hidden_probes(problem, p, scalable, (0.7, 1.4), avoid=[p], cap=cpu_cap, want=2)
        for p in ladder[:4]
    ]

    name = task_name(path)
    folder = out / FAMILY / name
    stage = out / FAMILY / f".{name}.importing"
    shutil.rmtree(stage, ignore_errors=True)
    stage.mkdir(parents=True)
    try:
        dtype = PRECISIONS[options.precision]
        for file, write in (
            ("reference.py", reference_module),
            ("baseline.py", baseline_module),
            ("starter.py", starter_module),
            ("inputs.py", inputs_module),
            ("adapter.py", adapter_module),
        ):
            (stage / file).write_text(write(problem, source, base, dtype))
        chosen = checked_workloads(
            stage, layout, base, gpu_hidden, ladder, cpu_hidden, TOLERANCE[options.precision]
        )
        notes = [f"scaled: {', '.join(scalable)}", *dropped, *chosen.notes]
        if cpu_note and chosen.cpu_visible is ladder[0]:
            notes.append(cpu_note)
        if any(p.flops == 0 for p in [base, *chosen.gpu_hidden]):
            notes.append(
                "flops: torch counts none (no matmul, conv or attention); one per input element"
            )
        caps = (
            f"hidden GPU workloads at most {cap / 1e9:.2f} GB (the larger of upstream's own "
            f"{base.nbytes / 1e9:.2f} GB and 1 GB, and 1/8 of a {options.device_gb:g} GB device); "
            f"CPU workloads under {options.cpu_mb:g} MB, no constant below min(8, its own value)"
        )
        (stage / "task.yaml").write_text(
            task_yaml(
                problem,
                source,
                commit,
                options,
                layout,
                base,
                chosen.gpu_hidden,
                chosen.cpu_visible,
                chosen.cpu_hidden,
                notes,
                caps,
            )
        )
        shutil.rmtree(folder, ignore_errors=True)
        stage.rename(folder)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return Converted(source, f"{FAMILY}/{folder.name}", str(folder), tuple(notes))


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
