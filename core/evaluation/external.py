"""Evaluating an external task (core/tasks/external.py): its own commands, in the sandbox, per attempt.

For each evaluation: two fresh copies of the task's `files/` (one with the candidate in place
of the editable file, one untouched for the baseline), then, in the candidate's copy, the
compile, correctness and performance commands in order, each stage gating the next; then the
performance command in the untouched copy (AgentKernelArena's baseline is the same command on
the original source). Every command runs through the sandbox (core/evaluation/sandbox.py) with the
device's visibility variables, in its own process group, killed at the stage's timeout. The
outcome is read by the task's own rules (core/evaluation/external_rules.py) and stored as a Result whose
timing kind is `external`.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core import __version__
from core.devices.device import DeviceInfo
from core.evaluation import external_rules as rules
from core.evaluation import sandbox
from core.model.result import STAGES, Result, StageResult, WorkloadFigures
from core.tasks.external import FILES, TIMING_KIND, ExternalSpec

LOG_LIMIT = 20_000  # characters of a stage's output kept in the result
NOTE = "external task: compiled, checked and timed by its own commands and scored by {rules}'s rules, not by this arena's harness (no hidden workloads, its own timer)"


@dataclass(frozen=True)
class Ran:
    returncode: int | None  # None: killed at the timeout
    output: str
    seconds: float

    @property
    def timed_out(self) -> bool:
        return self.returncode is None


def run_command(
    line: str, cwd: Path, env: dict[str, str], timeout_s: float, gpu: bool, masked: tuple[Path, ...]
) -> Ran:
    """One shell command line in `cwd`, inside the sandbox; stdout and stderr together."""
    policy = sandbox.for_harness(writable=(cwd,), read_only=(), env=env, gpu=gpu, masked=masked)
    argv, proc_env, _ = sandbox.wrap(["/bin/sh", "-c", line], policy)
    start = time.monotonic()
    proc = subprocess.Popen(
        argv,
        cwd=cwd,
        env=proc_env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=timeout_s)
        code: int | None = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the whole group: a runner's children too
        out, _ = proc.communicate()
        code = None
    return Ran(code, out.decode(errors="replace"), time.monotonic() - start)


class Attempt:
    """One evaluation's workspace and command runner."""

    def __init__(self, task: Any, spec: ExternalSpec, root: Path, env: dict[str, str], gpu: bool):
        self.task, self.spec, self.env, self.gpu = task, spec, env, gpu
        self.root = root
        self.masked = (
            Path(task.path).resolve().parent.parent,
        )  # the task folders: the copy is all a command needs

    def workspace(self, name: str, candidate: Path | None) -> Path:
        path = self.root / name
        shutil.copytree(
            Path(self.task.path) / FILES,
            path,
            ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache"),
        )
        if candidate is not None:
            shutil.copyfile(candidate, path / self.spec.editable[0])
        return path

    def stage(self, name: str, cwd: Path) -> tuple[StageResult, list[Ran]]:
        """Every command of stage `name`, in order, stopping at the first that fails."""
        ran: list[Ran] = []
        start = time.monotonic()
        for line in self.spec.commands.get(name, ()):
            r = run_command(line, cwd, self.env, self.spec.timeout(name), self.gpu, self.masked)
            ran.append(r)
            if r.timed_out or r.returncode != 0:
                break
        log = "".join(
            f"$ {line}\n{r.output}" for line, r in zip(self.spec.commands.get(name, ()), ran)
        )[-LOG_LIMIT:]
        last = ran[-1] if ran else None
        if last is None:
            return StageResult(name, "passed", 0.0, "no command: passes by its rules", ""), ran
        if last.timed_out:
            status, message = "timeout", f"did not finish within {self.spec.timeout(name):.0f} s"
        elif last.returncode != 0:
            status, message = "failed", f"exit code {last.returncode}"
        elif name == "correctness" and not rules.correctness_passed(
            0, "".join(r.output for r in ran)
        ):
            status, message = "failed", "its output reports a failure (`fail` and no `pass`)"
        else:
            status, message = "passed", None
        return StageResult(name, status, round(time.monotonic() - start, 3), message, log), ran


def evaluate_external(
    task: Any,
    candidate: Path,
    info: DeviceInfo,
    env: dict[str, str],
    root: Path,
    profile: str | None = None,
) -> Result:
    """The Result of `candidate` on external `task` (status infrastructure_error, exit code 3,
    where the device cannot run it: a HIP task on a GPU that is not AMD, a GPU task on a CPU)."""
    spec: ExternalSpec = task.external
    sha = hashlib.sha256(candidate.read_bytes()).hexdigest()
    device = {"id": info.id, "model": info.model, "vendor": info.vendor, "arch": info.arch}
    base: dict[str, Any] = {
        "task_id": task.id,
        "candidate_sha256": sha,
        "device": device,
        "timing_kind": TIMING_KIND,
        "sol_fraction": None,
        "sol_source": None,
        "versions": {"arena": __version__, **info.versions},
        "baseline_kind": "external",
        "baseline_impl": spec.rules,
        "profile": profile,
        "review_notes": [NOTE.format(rules=spec.rules)],
        "sandbox": sandbox.sandbox_info().to_json(),
    }
    refusal = spec.requires.refuses(info.type, info.vendor)
    if refusal:
        stage = StageResult(
            "compile",
            "error",
            message=f"cannot evaluate on this device ({info.id}): {task.id} {refusal}",
        )
        return Result(
            status="infrastructure_error",
            failed_stage="compile",
            stages=[stage] + [StageResult(n) for n in STAGES[1:]],
            workloads=[],
            speedup=0.0,
            points=0.0,
            **base,
        )
    started = time.monotonic()
    root.mkdir(parents=True, exist_ok=True)
    attempt = Attempt(task, spec, root, env, gpu=info.type not in ("cpu", "sim"))
    work = attempt.workspace("candidate", candidate)
    stages: dict[str, StageResult] = {n: StageResult(n) for n in STAGES}
    stages["generalization"] = StageResult(
        "generalization",
        "skipped",
        message="external task: no hidden workloads (its own commands choose the shapes)",
    )
    failed: str | None = None
    for name in ("compile", "correctness", "performance"):
        stages[name], ran = attempt.stage(name, work)
        if stages[name].status != "passed":
            failed = name
            break
    figures: list[WorkloadFigures] = []
    ratio = 0.0
    if failed is None and spec.commands.get("performance"):
        cand_cases, source = rules.read_cases(work, "".join(r.output for r in ran))
        original = attempt.workspace("baseline", None)
        for name in ("compile", "performance"):
            baseline_stage, base_ran = attempt.stage(name, original)
            if baseline_stage.status != "passed":
                stages[
                    "performance"
                ].log += f"\n--- the baseline (the untouched source) ---\n{baseline_stage.log}"
                stages["performance"] = StageResult(
                    "performance",
                    "error",
                    stages["performance"].seconds,
                    f"the baseline's {name} command {baseline_stage.message}: no speedup",
                    stages["performance"].log,
                )
                failed = "performance"
                break
        else:
            base_cases, _ = rules.read_cases(original, "".join(r.output for r in base_ran))
            pairs, why = rules.match(base_cases, cand_cases)
            if why:
                stages["performance"] = StageResult(
                    "performance",
                    "failed",
                    stages["performance"].seconds,
                    why,
                    stages["performance"].log,
                )
                failed = "performance"
            else:
                ratio = rules.speedup(pairs)
                figures = [
                    WorkloadFigures(
                        label=c.key,
                        axes={},
                        hidden=False,
                        mode=TIMING_KIND,
                        candidate={"median_us": c.ms * 1000.0, "source": source},
                        baseline={"median_us": b.ms * 1000.0},
                        speedup=b.ms / c.ms,
                        roofline_us=None,
                        sol_fraction=None,
                    )
                    for b, c in pairs
                ]
                stages[
                    "performance"
                ].message = f"{len(pairs)} cases from {source}; speedup is the arithmetic mean of per-case ratios ({spec.rules}'s rule)"
    compiled = stages["compile"].status == "passed"
    correct = compiled and stages["correctness"].status == "passed"
    status = "passed" if failed is None else "failed"
    return Result(
        status=status,
        failed_stage=failed,
        stages=[stages[n] for n in STAGES],
        workloads=figures,
        speedup=ratio,
        points=rules.points(compiled, correct, ratio),
        seconds=round(time.monotonic() - started, 3),
        **base,
    )
