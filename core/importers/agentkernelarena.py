"""`arena import agentkernelarena PATH`: AgentKernelArena's Triton tasks as arena tasks.

An AgentKernelArena task is a folder with `config.yaml` (the source file to optimise, the
kernels in it, compile / correctness / performance commands) and a bespoke
`scripts/task_runner.py`. Most Triton runners follow one generated template: a module-level
`TEST_SHAPES` list, `load_module()` that imports the source file, and `run_correctness()` that,
for each shape, seeds torch, builds the inputs, calls the source's entry function (the one
`run_compile()` asserts with `hasattr`) and compares it with a PyTorch reference. Those convert:

- the inputs are the ones the runner itself builds (`inputs.py` replays its `run_correctness`
  at the workload's shape, on the evaluation's device and seed, and stops it at the entry call);
- the reference is the runner's own `reference_*` function, called as run_correctness calls it,
  the rule its own (exact where it compares with torch.equal), and the entry's outputs what its
  kernel returns or writes in place, found by calling it once in Triton's interpreter;
- every workload's reference runs at import, and the task's own kernel must pass it where the
  CPU runs it (aka_convert.py, aka_check.py); the task's source file is accepted as a candidate
  as it is (adapter.py).

Only template Triton tasks run any code at import, each in a forked child limited by CPU time
and memory (isolate.py), `Options.workers` at a time. Everything else (HIP, CUDA and FlyDSL tasks, runners off the template, template tasks whose
conversion fails) becomes an external task (core/importers/aka_external.py): its own commands
in this arena's sandbox, scored by its own rules; HIP ones run only on AMD devices. Repository
and image tasks are reported, with the reason.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import yaml

from core.importers.aka_convert import FAMILY, convert, task_name
from core.importers.aka_files import LICENSE
from core.importers.isolate import Budget, isolated_all
from core.importers.kernelbench_problem import ProblemError
from core.importers.report import Converted, ImportReport, Skipped

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


__all__ = [
    "FAMILY",
    "LICENSE",
    "Options",
    "category_of",
    "convert",
    "find_tasks",
    "import_agentkernelarena",
    "task_name",
]
