"""`arena import kernelbench PATH`: KernelBench's problems as arena tasks.

One task per problem, `kernelbench/l<level>_<number>_<name>`:

- the candidate's `run(*inputs)` takes the forward's arguments (`get_inputs()`, in order)
  followed by the model's parameters (`named_parameters()`, in order), so a kernel sees every
  tensor it computes with; buffers (batch-norm statistics) stay inside the model;
- `reference.py` is the problem's own module followed by a `run` that calls its `Model` with
  those parameters (`torch.func.functional_call`), in float64 where the model runs in it;
- `baseline.py` and `starter.py` are the same module in the problem's precision: KernelBench's
  baseline is the model in eager PyTorch, and a candidate starts from it;
- `inputs.py` re-runs the problem's constants and `get_inputs()` at the workload's sizes with the
  evaluation's seed (so integer targets, masks and value ranges are the problem's own) and draws
  the parameters as PyTorch's default initialisation would (uniform in ±1/sqrt(fan_in));
- workloads: the problem's sizes are the visible GPU workload; hidden ones scale the *scalable*
  constants (core/importers/kernelbench_problem.py) to sizes that are not powers of two; the CPU
  sets scale them down until a call fits the CPU device. A problem with no scalable constant
  gets no hidden workloads, and is reported as not converted.
- FLOPs are torch's FlopCounterMode on the meta device (one per output element where it counts
  none), bytes the sizes of every input, parameter and output: per workload, as the derived axes
  `flop_count` and `byte_count`, named in the task's `provenance`.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from core.importers.isolate import isolated
from core.importers.kb_files import (
    BASELINE_DOC,
    PRECISIONS,
    STARTER_DOC,
    Layout,
    entry_module,
    inputs_module,
    task_yaml,
)
from core.importers.kb_sizes import HIDDEN_FACTORS, cpu_probe, hidden_probes, scalable_constants
from core.importers.kernelbench_problem import (
    Problem,
    ProblemError,
    is_power_of_two,
)
from core.importers.report import Converted, ImportReport, Skipped

FAMILY = "kernelbench"

OnProblem = Callable[
    [int, int, str, "Converted | Skipped"], None
]  # (index, total, source, outcome)


@dataclass(frozen=True)
class Options:
    precision: str = "fp32"
    levels: tuple[int, ...] = (1, 2, 3, 4)
    timeout_s: float = 120.0  # one problem's conversion (its module code and every probe)


def find_problems(root: Path, levels: Iterable[int] = (1, 2, 3, 4)) -> list[Path]:
    """The problem files of a KernelBench checkout (or of its `KernelBench/` folder)."""
    base = root / "KernelBench" if (root / "KernelBench").is_dir() else root
    found = []
    for level in levels:
        folder = base / f"level{level}"
        found += sorted(folder.glob("*.py"), key=lambda p: (_number(p), p.name))
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
    problems = find_problems(root, options.levels)
    if not problems:
        raise FileNotFoundError(
            f"{root}: no KernelBench problems (expected KernelBench/level1/*.py); give the checkout's root"
        )
    report = ImportReport("kernelbench", str(root), str(out))
    commit = _commit(root)
    _warm_up()
    for i, path in enumerate(problems, 1):
        source = str(path.relative_to(root))
        outcome = isolated(
            _convert_one, (path, source, out, options, commit), source, options.timeout_s
        )
        (report.converted if isinstance(outcome, Converted) else report.skipped).append(outcome)  # type: ignore[arg-type]
        if on_problem:
            on_problem(i, len(problems), source, outcome)
    return report


def _warm_up() -> None:
    """Import what every probe needs once, here: each problem runs in a forked child, which
    would otherwise import it again (seconds each)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

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

    gpu_hidden = hidden_probes(problem, base, scalable, HIDDEN_FACTORS)
    if not gpu_hidden:
        raise ProblemError(
            "no_hidden", "no scaled size runs on the meta device: hidden workloads are impossible"
        )
    cpu_visible, cpu_note = cpu_probe(problem, base, scalable)
    cpu_hidden = hidden_probes(problem, cpu_visible, scalable, (0.7, 1.4), avoid=[cpu_visible])
    if not cpu_hidden:
        raise ProblemError("no_hidden", "no scaled CPU size runs on the meta device")

    notes = [f"scaled: {', '.join(scalable)}"] + dropped + ([cpu_note] if cpu_note else [])
    if any(p.flops == 0 for p in [base, *gpu_hidden]):
        notes.append(
            "flops: torch counts none (no matmul, conv or attention); one per input element"
        )
    folder = out / FAMILY / task_name(path)
    folder.mkdir(parents=True, exist_ok=True)
    spec = task_yaml(
        problem, source, commit, options, layout, base, gpu_hidden, cpu_visible, cpu_hidden, notes
    )
    (folder / "task.yaml").write_text(spec)
    dtype = PRECISIONS[options.precision]
    (folder / "reference.py").write_text(
        entry_module(problem, source, len(base.inputs), base, "float64", "reference")
    )
    baseline = entry_module(problem, source, len(base.inputs), base, dtype, "baseline")
    (folder / "baseline.py").write_text(baseline)
    (folder / "starter.py").write_text(baseline.replace(BASELINE_DOC, STARTER_DOC))
    (folder / "inputs.py").write_text(inputs_module(problem, source, base, dtype))
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
