"""AgentKernelArena tasks that do not convert to ordinary tasks, written as external tasks.

The task's folder is copied whole into `files/`, its compile / correctness / performance
commands and timeouts go into task.yaml's `external:` section (core/tasks/external.py), and its
editable source into `starter.py` (an agent's solution.py starts from it). HIP, CUDA-to-HIP and
FlyDSL tasks require an AMD GPU, Triton ones a GPU. Repository tasks (they clone an upstream
repository at evaluation) and image tasks (their sources live inside AgentKernelArena's Docker
image) cannot be copied, and are reported instead.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import yaml

from core.importers.kernelbench_problem import ProblemError
from core.importers.report import Converted
from core.tasks.external import FILES, KIND, STAGES, Requirement

AMD_TYPES = ("hip", "flydsl")  # task_type substrings whose commands build code for AMD GPUs
NOT_COPYABLE = {
    "repository": "a repository task: it clones an upstream repository (no commit pinned) at evaluation; not imported",
    "image_kernel": "an image task: its sources live inside AgentKernelArena's Docker image; not imported",
}


def requirement(task_type: str, config: dict[str, Any] | None = None) -> Requirement:
    """AMD for HIP and FlyDSL tasks and for any task pinned to an AMD architecture
    (`platform_support.required_arch: gfx942`); else a GPU."""
    arch = str(((config or {}).get("platform_support") or {}).get("required_arch") or "")
    return (
        Requirement.AMD
        if any(k in task_type for k in AMD_TYPES) or arch.startswith("gfx")
        else Requirement.GPU
    )


def language(task_type: str) -> str:
    target = task_type.split("2")[-1] if "2" in task_type else task_type
    return {"hip": "hip", "flydsl": "flydsl", "triton": "triton"}.get(target, target or "python")


MARK_START = "# >>> AKA-GENERATED"
MARK_END = "# <<< AKA-GENERATED <<<"
VLLM_HELPER = "src/tools/perf/vllm_cuda_graph_block.py"
VLLM_ANCHOR = "def _measure_cuda_event_fallback("
PYTEST_HELPER = "src/tools/perf/performance_utils_pytest.py"


def checkout_root(folder: Path) -> Path | None:
    """The AgentKernelArena checkout holding task `folder` (the parent of its `tasks/`)."""
    return next((p.parent for p in folder.parents if p.name == "tasks"), None)


def materialize_helpers(files: Path, root: Path | None) -> list[str]:
    """Put AgentKernelArena's timing helpers into the copied task, as its setup_workspace does:
    task sources ship stubs that raise, and the canonical helpers live in the checkout's
    src/tools/perf/. Returns notes (what was put in, or why the performance command will fail)."""
    notes: list[str] = []
    runner = files / "scripts" / "task_runner.py"
    text = runner.read_text() if runner.is_file() else ""
    stub_helper = (files / "performance_utils_pytest.py").is_file() or any(
        "performance_utils_pytest" in p.read_text(errors="replace") for p in files.glob("*.py")
    )
    if MARK_START in text and MARK_END in text:
        helper = root / VLLM_HELPER if root else None
        if helper is not None and helper.is_file() and VLLM_ANCHOR in helper.read_text():
            block = helper.read_text()
            head, rest = text.split(MARK_START, 1)
            start_line, _, rest = rest.partition("\n")
            _, _, tail = rest.partition(MARK_END)
            runner.write_text(
                head
                + MARK_START
                + start_line
                + "\n"
                + block[block.index(VLLM_ANCHOR) :]
                + MARK_END
                + tail
            )
            notes.append(
                f"timing helpers: {VLLM_HELPER} put into scripts/task_runner.py, as AgentKernelArena's setup does"
            )
        else:
            notes.append(
                f"timing helpers: {VLLM_HELPER} is not in the checkout, so the runner's stubs stay and its performance command fails"
            )
    if stub_helper:
        helper = root / PYTEST_HELPER if root else None
        if helper is not None and helper.is_file():
            shutil.copyfile(helper, files / "performance_utils_pytest.py")
            notes.append(
                f"timing helpers: {PYTEST_HELPER} copied in, as AgentKernelArena's setup does"
            )
        else:
            notes.append(
                f"timing helpers: {PYTEST_HELPER} is not in the checkout, so its performance command fails"
            )
    return notes


def editable_files(folder: Path, config: dict[str, Any]) -> list[str]:
    """What a candidate replaces: `source_file_path`, else `target_file_path`, else (instruction
    tasks list none: the agent writes the kernel into the task's test file) the one Python file
    at the task's top level that is not a timing helper."""
    listed = [str(p) for p in (config.get("source_file_path") or [])]
    if not listed and isinstance(config.get("target_file_path"), str):
        listed = [config["target_file_path"]]
    if not listed:
        top = [p.name for p in folder.glob("*.py") if p.name != "performance_utils_pytest.py"]
        listed = top if len(top) == 1 else []
    return listed


def write_external(
    folder: Path, source: str, out: Path, name: str, family: str, licence: str, why: str
) -> Converted:
    """The task at `folder` as an external task under out/<family>/<name>; `why` says why it
    did not convert to an ordinary task (kept in its notes and provenance)."""
    config: dict[str, Any] = yaml.safe_load((folder / "config.yaml").read_text()) or {}
    task_type = str(config.get("task_type", ""))
    if task_type in NOT_COPYABLE or config.get("repo_url") or config.get("image_repo_path"):
        raise ProblemError(
            task_type or "repository", NOT_COPYABLE.get(task_type, NOT_COPYABLE["repository"])
        )
    status = (config.get("platform_support") or {}).get("status")
    if status == "skip":
        raise ProblemError(
            "skipped_upstream",
            f"AgentKernelArena skips it: {(config.get('platform_support') or {}).get('skip_reason', 'no reason given')}",
        )
    editable = editable_files(folder, config)
    if not editable or not all((folder / p).is_file() for p in editable):
        raise ProblemError(
            "external",
            f"source_file_path {config.get('source_file_path')} names no file in the task folder (nor does target_file_path, nor is there one top-level .py file): nothing for a candidate to replace",
        )
    commands = {s: [str(c) for c in (config.get(f"{s}_command") or [])] for s in STAGES}
    if not commands["correctness"]:
        raise ProblemError("external", "config.yaml has no correctness_command: nothing could pass")
    target = out / family / name
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(
        folder,
        target / FILES,
        ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache", "build"),
    )
    shutil.copyfile(folder / editable[0], target / "starter.py")
    helpers = materialize_helpers(target / FILES, checkout_root(folder))
    timeouts = {
        s: float(config[f"{s}_timeout"])
        for s in STAGES
        if isinstance(config.get(f"{s}_timeout"), (int, float))
    }
    prompt = config.get("prompt") or {}
    spec = {
        "schema_version": 1,
        "kind": KIND,
        "description": f"AgentKernelArena {task_type} task {source}: optimise {', '.join(config.get('target_kernel_functions') or []) or editable[0]}"
        f" in {editable[0]}, scored by its own commands and rules",
        "languages": [language(task_type)],
        "vendor_notes": str(prompt.get("instructions") or "").strip()[:4000],
        "external": {
            "rules": "agentkernelarena",
            "task_type": task_type,
            "requires": requirement(task_type, config).value,
            "editable": editable,
            **commands,
            **({"timeouts": timeouts} if timeouts else {}),
        },
        "provenance": {
            "benchmark": "agentkernelarena",
            "source": source,
            "license": licence,
            "derived": {
                "mode": f"external: {why}",
                "requires": f"{requirement(task_type, config).value} (from task_type `{task_type}`)",
                "helpers": helpers,
            },
        },
    }
    (target / "task.yaml").write_text(yaml.safe_dump(spec, sort_keys=False, width=120))
    notes = (f"external ({requirement(task_type, config).value}): {why}", *helpers)
    return Converted(source, f"{family}/{name}", str(target), notes, mode=KIND)
