"""External tasks: another benchmark's task that runs its own commands, scored by its own rules.

Some imported tasks cannot become ordinary arena tasks (no plain-PyTorch reference to call, no
shapes to scale: AgentKernelArena's HIP tasks, its pytest-file tasks, runners off its template).
They are written as a task folder of kind `external` instead:

    agentkernelarena/<name>/
      task.yaml     kind: external, and an `external:` section (below)
      starter.py    the editable source as shipped (what an agent's solution.py starts from)
      files/        the task's own folder, copied: its scripts, sources and data

    external:
      rules: agentkernelarena        # whose rules parse the outcome (core/evaluation/external_rules.py)
      task_type: triton2triton       # the other benchmark's own category
      requires: gpu                  # any | gpu | amd: where its commands can run at all
      editable: [kernel.py]          # inside files/; a candidate replaces the first
      compile: ["python3 scripts/task_runner.py compile"]
      correctness: ["python3 scripts/task_runner.py correctness"]
      performance: ["python3 scripts/task_runner.py performance"]
      timeouts: {compile: 600, correctness: 600, performance: 900}

Evaluating one (core/evaluation/external.py) copies files/ into a fresh per-attempt workspace, puts
the candidate in place of the editable file, runs the commands there inside the sandbox, and
reads pass/fail and times by the task's own rules. The result's timing kind is `external`:
its numbers are not this arena's protocol (no hidden workloads, no fresh inputs per call, the
task's own timer), so it is never ranked with measured results. docs/interop.md.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

import yaml

KIND = "external"
TIMING_KIND = "external"
FILES = "files"
STAGES = ("compile", "correctness", "performance")
DEFAULT_TIMEOUT_S = (
    900.0  # AgentKernelArena's default is 3600 s; an arena attempt should not wait that long
)
RULES = ("agentkernelarena",)


class Requirement(str, Enum):
    """Where an external task's commands can run: HIP needs an AMD GPU, the GPU Triton runners
    need a GPU (they create `cuda` tensors), fixtures and CPU scripts run anywhere."""

    ANY = "any"
    GPU = "gpu"
    AMD = "amd"

    def refuses(self, device_type: str, vendor: str) -> str | None:
        """Why a device cannot run the task (None: it can)."""
        if self is Requirement.AMD and vendor.lower() != "amd":
            return "needs an AMD GPU (a HIP task: its commands build and run HIP code)"
        if self is not Requirement.ANY and device_type not in ("cuda", "xpu"):
            return f"needs a GPU ({'an AMD one' if self is Requirement.AMD else 'its commands create GPU tensors'}); `{device_type}` devices cannot run it"
        return None


@dataclass(frozen=True)
class ExternalSpec:
    rules: str
    task_type: str
    requires: Requirement
    editable: tuple[str, ...]
    commands: dict[str, tuple[str, ...]]  # stage -> shell command lines, run in order
    timeouts: dict[str, float] = field(default_factory=dict)

    def timeout(self, stage: str) -> float:
        return float(self.timeouts.get(stage, DEFAULT_TIMEOUT_S))

    def to_json(self) -> dict[str, Any]:
        return {
            "rules": self.rules,
            "task_type": self.task_type,
            "requires": self.requires.value,
            "editable": list(self.editable),
            **{s: list(self.commands.get(s, ())) for s in STAGES},
            "timeouts": dict(self.timeouts),
        }


class ExternalError(ValueError):
    """A malformed external task: the file, the field and the fix."""

    def __init__(self, path: Path, field_name: str, problem: str, fix: str):
        super().__init__(f"{path}: `{field_name}` {problem}; {fix}")
        self.path, self.field_name, self.problem, self.fix = path, field_name, problem, fix


def is_external(raw: Any) -> bool:
    return isinstance(raw, dict) and raw.get("kind") == KIND


def parse_spec(path: Path, raw: Any) -> ExternalSpec:
    """The `external:` section of task.yaml at `path`, checked field by field."""
    if not isinstance(raw, dict):
        raise ExternalError(
            path,
            "external",
            "is missing or not a mapping",
            "add `external: {rules, requires, editable, compile, correctness, performance}`",
        )
    known = {"rules", "task_type", "requires", "editable", "timeouts", *STAGES}
    unknown = sorted(set(raw) - known)
    if unknown:
        raise ExternalError(
            path,
            f"external.{unknown[0]}",
            "is not a known field",
            f"use only {', '.join(sorted(known))}",
        )
    rules = raw.get("rules")
    if rules not in RULES:
        raise ExternalError(
            path,
            "external.rules",
            f"is {rules!r}",
            f"name whose rules score it: one of {', '.join(RULES)}",
        )
    try:
        requires = Requirement(raw.get("requires", "any"))
    except ValueError:
        raise ExternalError(
            path, "external.requires", f"is {raw.get('requires')!r}", "write any, gpu or amd"
        ) from None
    editable = raw.get("editable")
    if (
        not isinstance(editable, list)
        or not editable
        or not all(isinstance(e, str) and e for e in editable)
    ):
        raise ExternalError(
            path,
            "external.editable",
            "is missing or empty",
            "list the files (inside files/) a candidate replaces, the first one first",
        )
    outside = [e for e in editable if Path(e).is_absolute() or ".." in Path(e).parts]
    if outside:
        raise ExternalError(
            path,
            "external.editable",
            f"names {outside[0]}, outside files/",
            "give paths relative to files/, without `..`",
        )
    commands: dict[str, tuple[str, ...]] = {}
    for stage in STAGES:
        value = raw.get(stage, [])
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(c, str) and c.strip() for c in value):
            raise ExternalError(
                path,
                f"external.{stage}",
                "is not a list of command lines",
                'give shell command lines, e.g. ["python3 scripts/task_runner.py compile"]',
            )
        commands[stage] = tuple(value)
    if not commands["correctness"]:
        raise ExternalError(
            path,
            "external.correctness",
            "is empty",
            "give the command that checks a candidate: without one nothing can pass",
        )
    timeouts = raw.get("timeouts", {}) or {}
    if not isinstance(timeouts, dict) or not all(
        k in STAGES and isinstance(v, (int, float)) and v > 0 for k, v in timeouts.items()
    ):
        raise ExternalError(
            path,
            "external.timeouts",
            f"is {timeouts!r}",
            f"map stages ({', '.join(STAGES)}) to seconds > 0",
        )
    return ExternalSpec(
        str(rules),
        str(raw.get("task_type", "")),
        requires,
        tuple(editable),
        commands,
        {k: float(v) for k, v in timeouts.items()},
    )


def load_external_task(task_dir: Path, task_id: str, raw: dict[str, Any]) -> Any:
    """A Task (core.model.task) whose `external` holds the spec: no axes, inputs or workloads (its own
    commands hold them), so views that list tasks show it and the evaluator hands it here."""
    from core.model.task import Correctness, Limits, Task
    from core.model.workload import HiddenSet, WorkloadSets

    path = task_dir / "task.yaml"
    spec = parse_spec(path, raw.get("external"))
    if not (task_dir / FILES).is_dir():
        raise ExternalError(
            task_dir / FILES,
            FILES,
            "folder is missing",
            "copy the task's own folder there (arena import does)",
        )
    if not (task_dir / "starter.py").is_file():
        raise ExternalError(
            task_dir / "starter.py",
            "starter.py",
            "file is missing",
            "copy the editable source there (arena import does)",
        )
    empty = WorkloadSets(visible=(), hidden=HiddenSet(fixed=()))
    languages = raw.get("languages") or ["triton"]
    return Task(
        id=task_id,
        path=task_dir,
        description=str(raw.get("description", "")),
        models=(),
        languages=tuple(str(x) for x in languages),
        baseline_kind=KIND,
        baseline="the task's own source, timed by its own performance command",
        axes={},
        inputs=(),
        outputs=(),
        correctness=Correctness(atol=0.0, rtol=0.0),
        flops="0",
        bytes="0",
        peak="",
        gpu=empty,
        cpu=empty,
        limits=Limits(
            compile_s=spec.timeout("compile"),
            correctness_s=spec.timeout("correctness"),
            performance_s=spec.timeout("performance"),
        ),
        vendor_notes=str(raw.get("vendor_notes", "")),
        provenance=raw.get("provenance"),
        external=spec,
    )


def read_raw(task_yaml: Path) -> Any:
    try:
        return yaml.safe_load(task_yaml.read_text())
    except (OSError, yaml.YAMLError):
        return None  # load_task reports it with its own message


def check_folder(task_dir: Path, spec: ExternalSpec) -> list[str]:
    """What `arena tasks validate` finds wrong with an external task's folder: every editable file
    exists, every stage that scores has a command, and each command's script (the first
    argument that names a file: `python3 scripts/x.py`, `pytest k.py`) is in files/."""
    files = task_dir / FILES
    problems = [
        f"external.editable: {e} is not in {files}"
        for e in spec.editable
        if not (files / e).is_file()
    ]
    if not spec.commands.get("compile") and not spec.commands.get("correctness"):
        problems.append("external: no compile or correctness command")
    if not spec.commands.get("performance"):
        problems.append(
            "external.performance: no command; speedups cannot be measured (give the task's timing command)"
        )
    for stage in STAGES:
        for line in spec.commands.get(stage, ()):
            for name in referenced_files(line):
                if not (files / name).exists():
                    problems.append(
                        f"external.{stage}: `{line}` names {name}, which is not in {files}"
                    )
    return problems


def referenced_files(line: str) -> list[str]:
    """Relative paths a command line names as files (words ending in a source suffix that hold no
    shell syntax); inline code (`python -c "..."`) names none."""
    try:
        words = shlex.split(line)
    except ValueError:
        return []
    if "-c" in words:
        words = words[: words.index("-c")]
    suffixes = (".py", ".hip", ".cu", ".cpp", ".sh", ".json", ".yaml")
    return [
        w
        for w in words
        if w.endswith(suffixes)
        and not w.startswith(("/", "-", "$"))
        and "=" not in w
        and "*" not in w
    ]
