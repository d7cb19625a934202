"""The gated pipeline: compile → correctness → generalization (hidden) → performance.

The engine resolves a job (concrete workloads, hidden ones drawn with a secret seed, seeds,
limits, timing settings), hands it to the harness in its own process on the device, reads the
harness's events from a private descriptor, and turns them into a `Result`. This module is the
`Evaluator` that does it (and the candidate file's first check); building the job is
core/evaluation/job.py, folding the events into a verdict core/evaluation/verdict.py.
"""

from __future__ import annotations

import ast
import asyncio
import hashlib
import secrets
import shutil
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from core.evaluation import scan, scoring
from core.evaluation.adapter import adapted, adapts, needs_adapter
from core.evaluation.escalate import escalated
from core.evaluation.executors import Executor, HarnessError, LocalExecutor
from core.evaluation.heartbeat import Pulse
from core.evaluation.job import Timing, build_job, job_deadline_s, task_dtypes
from core.evaluation.profiles import Profile, parse_profile
from core.evaluation.verdict import assemble, infrastructure_result
from core.harness.pysource import parse_module
from core.model import events
from core.model.result import Result
from core.model.task import Limits, Task
from core.tasks import manifest

OnEvent = Callable[[events.Event], None]


class BadCandidate(ValueError):
    """A candidate file that cannot be evaluated at all (exit code 2)."""


def check_candidate(path: Path, task: Task | None = None) -> str:
    """Reject what cannot be a candidate before any process starts; return its sha256. An
    external task's candidate is its editable source (any language, no `run`): it must exist."""
    if not path.is_file():
        raise BadCandidate(
            f"candidate file {path} does not exist: pass the path of a Python file that defines run(*inputs)"
        )
    if task is not None and task.external is not None:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    if path.suffix != ".py":
        raise BadCandidate(
            f"candidate {path} is not a .py file: native CUDA/HIP goes in a sibling .cu/.hip loaded by a .py wrapper"
        )
    source = path.read_bytes()
    try:
        tree = parse_module(source, str(path))
    except SyntaxError:
        tree = None  # a syntax error is the candidate's compile failure, reported by the harness
    if tree is not None and not _defines_run(tree):
        name = adapts(task) if task is not None else None
        if name is None:
            raise BadCandidate(
                f"{path} defines no `run`: add `def run(*inputs)` returning the task's outputs"
            )
        if not needs_adapter(task, path):  # type: ignore[arg-type]
            raise BadCandidate(
                f"{path} defines neither `run` nor `{name}`: add `def run(*inputs)` returning the task's outputs, "
                f"or define `{name}` as {task.id}'s own benchmark expects (docs/interop.md)"  # type: ignore[union-attr]
            )
    return hashlib.sha256(source).hexdigest()


def _defines_run(tree: ast.Module) -> bool:
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == "run":
            return True
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "run" for t in targets):
                return True
        if isinstance(node, (ast.Import, ast.ImportFrom)) and any(
            (a.asname or a.name) == "run" for a in node.names
        ):
            return True
    return False


class Evaluator:
    """Evaluates candidates on one device through one executor (a warm harness on this
    machine by default; a remote host's through remotes/)."""

    def __init__(
        self,
        device_id: str | None = None,
        workdir: Path | None = None,
        keep_workdir: bool = False,
        graphs: bool = True,
        sync_each_call: bool = False,
        executor: Executor | None = None,
        timing: Timing | None = None,
        baseline_impl: str | None = None,
    ):
        """`graphs=False` times decode-sized workloads eagerly too; `sync_each_call=True` makes
        the host wait for the device after every timed call (both for timer studies: the
        default queues a round's calls back to back, see docs/fidelity.md); `timing` replaces
        the device's timing budget (the cheat suite's short one, say); `baseline_impl` times
        against that one of a task's `baselines:` where the task declares it (the result's
        `baseline_impl` records what ran)."""
        self.graphs, self.sync_each_call, self.timing = graphs, sync_each_call, timing
        self.baseline_impl = baseline_impl
        # What judges candidates is read once, checked against the manifest, before any of them
        # runs (a mismatch raises ManifestMismatch: exit 2); later evaluations use these bytes.
        self.engine_data = manifest.stage_engine_data()
        self.staged_tasks: dict[Path, manifest.Staged] = {}
        self.keep = keep_workdir or workdir is not None
        self.root = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="arena-"))
        self.root.mkdir(parents=True, exist_ok=True)
        if executor is None:
            if device_id is None:
                raise ValueError("give a device id or an executor")
            executor = LocalExecutor(device_id, self.root)
        self.executor = executor
        self.info = executor.info
        # `sim:h200?escalate=...` (core/devices/ids.py): undecided predictions go to a GPU
        self.escalation = getattr(executor, "escalation", None)
        self.count = 0

    def __enter__(self) -> Evaluator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.executor.close()
        if not self.keep:
            shutil.rmtree(self.root, ignore_errors=True)

    def evaluate(
        self,
        task: Task,
        candidate: Path | str,
        seed: int | None = None,
        on_event: OnEvent | None = None,
        limits: Limits | None = None,
        performance: bool = True,
        world_size: int | None = None,
        profile: Profile | str | None = None,
    ) -> Result:
        """Evaluate one candidate; `limits` overrides the task's per-stage time limits;
        `performance=False` stops after the hidden workloads' correctness (the performance stage
        is reported skipped); `profile`: `full` (default) or `train` (core/evaluation/profiles.py). An
        infrastructure fault is retried once, then reported as one (exit code 3)."""
        for attempt in range(2):
            try:
                return asyncio.run(
                    self.aevaluate(
                        task,
                        candidate,
                        seed,
                        on_event,
                        limits,
                        performance,
                        world_size=world_size,
                        profile=profile,
                    )
                )
            except HarnessError as exc:
                if attempt == 1:
                    result = infrastructure_result(
                        task,
                        self.info,
                        check_candidate(Path(candidate)),
                        str(exc),
                        parse_profile(profile).value,
                    )
                    result.sandbox = self.sandbox_record()
                    return result
        raise AssertionError("unreachable")

    def _job_dir(self) -> Path:
        self.count += 1
        job_dir = self.root / f"eval-{self.count:04d}-{secrets.token_hex(3)}"
        job_dir.mkdir(parents=True, exist_ok=True)
        return job_dir

    async def aevaluate(
        self,
        task: Task,
        candidate: Path | str,
        seed: int | None = None,
        on_event: OnEvent | None = None,
        limits: Limits | None = None,
        performance: bool = True,
        visible_only: bool = False,
        world_size: int | None = None,
        profile: Profile | str | None = None,
    ) -> Result:
        """One evaluation; raises HarnessError on an infrastructure fault (for the scheduler
        to retry elsewhere); WorldSizeError before anything runs for a world size the task or
        the device cannot run. `visible_only`, `world_size`, `profile`: see `build_job`."""
        candidate = Path(candidate)
        if (
            task.external is not None
        ):  # its own commands and rules, not the harness (core/evaluation/external.py)
            return await asyncio.to_thread(self._evaluate_external, task, candidate, profile)
        limits = limits or task.limits
        # Reading and hashing the candidate and the task's files, building the job, and judging
        # the events afterwards take milliseconds to tens of them (more on a cold cache): off
        # the event loop, which may be a server's that answers every other request meanwhile.
        sha, scan_notes, job_dir, job, before = await asyncio.to_thread(
            self._prepare,
            task,
            candidate,
            seed,
            limits,
            performance=performance,
            visible_only=visible_only,
            world_size=world_size,
            profile=profile,
        )
        pulse = Pulse(job, on_event)  # a heartbeat while a stage runs, whatever the candidate does
        seen = await pulse.around(self.executor.run(job, job_dir, job_deadline_s(job), pulse))
        result = await asyncio.to_thread(self._judge, task, job, sha, seen, scan_notes, before)
        if self.escalation is not None:  # a prediction whose band straddles the decision
            result = await escalated(
                result,
                self.escalation,
                task,
                candidate,
                seed=seed,
                limits=limits,
                performance=performance,
                visible_only=visible_only,
                world_size=world_size,
                profile=profile,
            )
        return result

    def _prepare(
        self,
        task: Task,
        candidate: Path,
        seed: int | None,
        limits: Limits,
        **options: Any,
    ) -> tuple[str, list[str], Path, dict[str, Any], list[tuple[str, dict[Path, bytes | None]]]]:
        sha = check_candidate(candidate, task)
        scan_notes = scan.scan_candidate(
            candidate, task_dtypes(task)
        )  # before it runs: it may rewrite itself
        job_dir = self._job_dir()
        staged = self.stage_task(task)
        job = build_job(
            task,
            adapted(task, candidate, job_dir),  # a KernelBench ModelNew file, say (adapter.py)
            self.info,
            self.executor.torch_device(),
            seed if seed is not None else secrets.randbits(63),
            job_dir,
            limits,
            self.graphs,
            self.sync_each_call,
            self.timing,
            files=staged.named(task.path.resolve()),
            baseline_impl=self.baseline_impl,
            **options,
        )
        watched = (("task_files_modified", staged), ("engine_data_modified", self.engine_data))
        before = [(what, files.on_disk()) for what, files in watched]
        return sha, scan_notes, job_dir, job, before

    def _judge(
        self,
        task: Task,
        job: dict[str, Any],
        sha: str,
        seen: list[Any],
        scan_notes: list[str],
        before: list[tuple[str, dict[Path, bytes | None]]],
    ) -> Result:
        result = assemble(task, job, self.info, sha, seen, scan_notes)
        result.sandbox = self.sandbox_record()
        for what, files_before in before:
            self._flag_changes(
                result, what, [p for p, data in files_before.items() if manifest.read(p) != data]
            )
        return result

    def _evaluate_external(
        self, task: Task, candidate: Path, profile: Profile | str | None
    ) -> Result:
        from core.evaluation.external import evaluate_external

        device = getattr(self.executor, "device", None)
        if device is None or not hasattr(device, "harness_env"):
            sha = hashlib.sha256(candidate.read_bytes()).hexdigest()
            return infrastructure_result(
                task,
                self.info,
                sha,
                "cannot evaluate on this device: external tasks run on this machine's devices only",
                parse_profile(profile).value,
            )
        return evaluate_external(
            task,
            candidate,
            self.info,
            device.harness_env(),
            self._job_dir(),
            parse_profile(profile).value,
        )

    def stage_task(self, task: Task) -> manifest.Staged:
        """The task's files as first read by this evaluator (a bundled task checked against the
        manifest): every evaluation is judged with these bytes, whatever happens on disk later."""
        key = task.path.resolve()
        if key not in self.staged_tasks:
            self.staged_tasks[key] = manifest.stage_task(key)
        return self.staged_tasks[key]

    def sandbox_record(self) -> dict[str, Any] | None:
        """The executor's sandbox, as `Result.sandbox` records it (None: an executor that does not say)."""
        info = getattr(self.executor, "sandbox_info", None)
        return (
            info.to_json()
            if hasattr(info, "to_json")
            else (dict(info) if isinstance(info, dict) else None)
        )

    @staticmethod
    def _flag_changes(result: Result, what: str, changed: list[Path]) -> None:
        """A task or engine data file that changed on disk during the evaluation: the candidate
        did it (nothing else runs meanwhile), an integrity violation. The next evaluations
        still use the staged bytes; the next process refuses a changed bundled file."""
        if not changed:
            return
        names = ", ".join(manifest.rel(p) if manifest.is_bundled(p) else str(p) for p in changed)
        hint = (
            f"; {manifest.restore_hint(changed[0])}"
            if manifest.is_bundled(changed[0])
            else "; restore them before the next run"
        )
        if not any(f.startswith(what) for f in result.integrity_flags):
            result.integrity_flags.append(
                f"{what}: {names} changed on disk during the evaluation (judged with the copy staged before it){hint}"
            )
        if result.status == "passed":
            compiled = (
                result.stage("compile").status == "passed"
            )  # scored as assemble scores a violation
            result.status, result.failed_stage, result.speedup, result.sol_fraction = (
                "failed",
                "performance",
                0.0,
                None,
            )
            result.points = scoring.points(compiled, False, 0.0)

    async def aevaluate_batch(
        self,
        task: Task,
        candidates: Sequence[Path | str],
        seed: int | None = None,
        on_event: OnEvent | None = None,
        limits: Limits | None = None,
        performance: bool = True,
        visible_only: bool = False,
        profile: Profile | str | None = None,
        on_result: Callable[[int, Result], None] | None = None,
    ) -> list[Result]:
        """Many candidates of one task as one batch (core/evaluation/batch.py): the same workloads and
        seeds for all, the reference and baseline shared, each candidate's verdict its own.
        Results in the candidates' order (`on_result(k, result)` as each is known); raises
        BadCandidate for a file that is no candidate (check each with `check_candidate` first
        to score it instead)."""
        from core.evaluation.batch import evaluate_batch

        paths = [Path(c) for c in candidates]
        results = await evaluate_batch(
            self,
            task,
            paths,
            seed,
            on_event,
            limits,
            performance,
            visible_only,
            profile,
            on_result if self.escalation is None else None,
        )
        if self.escalation is None:
            return results
        for k, (path, result) in enumerate(zip(paths, results)):
            results[k] = await escalated(
                result,
                self.escalation,
                task,
                path,
                seed=seed,
                limits=limits,
                performance=performance,
                visible_only=visible_only,
                profile=profile,
            )
            if on_result is not None:
                on_result(k, results[k])
        return results


def evaluate(
    task: Task,
    candidate: Path | str,
    device: str = "cpu",
    seed: int | None = None,
    on_event: OnEvent | None = None,
) -> Result:
    """Evaluate one candidate on one device: the whole gated pipeline, scored."""
    with Evaluator(device) as evaluator:
        return evaluator.evaluate(task, candidate, seed=seed, on_event=on_event)
