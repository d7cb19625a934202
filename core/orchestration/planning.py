"""Planning a run: the run file's tasks (ids, families, globs), candidates, devices, variants
and iterations expanded into the jobs and the agent attempts that the run executes."""

from __future__ import annotations

import fnmatch
import itertools
from dataclasses import dataclass
from pathlib import Path

from core.agents.base import AgentConfig
from core.agents.workspace import Variant
from core.evaluation.evaluator import check_candidate
from core.model import keys
from core.model.task import Task
from core.orchestration.runfile import BUILTIN_CANDIDATES, RunSpec
from core.tasks.discovery import discover, find_task


@dataclass(frozen=True)
class PlannedJob:
    task: Task
    candidate: Path
    candidate_label: str
    device: str
    iteration: int

    @property
    def key(self) -> str:
        return keys.job_key(self.task.id, self.candidate_label, self.device, self.iteration)


def select_tasks(patterns: tuple[str, ...], tasks_dir: str | None) -> list[Task]:
    """Tasks by id, family or glob, in sorted order, each once."""
    every = discover(tasks_dir)
    chosen: dict[str, Task] = {}
    for pattern in patterns:
        hits = [
            t
            for t in every
            if t.id == pattern or t.family == pattern or fnmatch.fnmatch(t.id, pattern)
        ]
        if not hits:
            find_task(pattern, tasks_dir)  # raises with a suggestion
        chosen.update({t.id: t for t in hits})
    return [chosen[k] for k in sorted(chosen)]


def _candidate(task: Task, entry: str, base_dir: str) -> Path:
    if entry in BUILTIN_CANDIDATES:
        return task.file(f"{entry}.py")
    path = Path(entry.format(family=task.family, name=task.name, task=task.id.replace("/", "__")))
    return path if path.is_absolute() else Path(base_dir) / path


def plan(spec: RunSpec) -> list[PlannedJob]:
    jobs = []
    for task in select_tasks(spec.tasks, spec.tasks_dir):
        for entry in spec.candidates:
            candidate = _candidate(task, entry, spec.base_dir)
            check_candidate(candidate, task)
            for device in spec.devices:
                for i in range(spec.iterations):
                    jobs.append(PlannedJob(task, candidate, entry, device, i))
    return jobs


@dataclass(frozen=True)
class PlannedAttempt:
    index: int  # 1, 2, ... in the run: the attempt's id is `<run id>/<index>`
    agent: AgentConfig  # options resolved for this task (offline agents' paths)
    task: Task
    device: str
    variant: Variant
    iteration: int

    @property
    def key(self) -> str:
        from core.agents.runner import attempt_key

        return attempt_key(
            self.agent.name, self.task.id, self.device, self.variant.name, self.iteration
        )


def plan_attempts(spec: RunSpec) -> list[PlannedAttempt]:
    """Every attempt of the run, agents side by side: task, device, variant, iteration, agent."""
    if not spec.agents:
        return []
    from core.agents.offline import resolve_options

    attempts = []
    counter = itertools.count(1)
    for task in select_tasks(spec.tasks, spec.tasks_dir):
        resolved = [resolve_options(a, task, spec.base_dir) for a in spec.agents]
        for device in spec.devices:
            for variant in spec.variants:
                for i in range(spec.iterations):
                    for agent in resolved:
                        attempts.append(
                            PlannedAttempt(next(counter), agent, task, device, variant, i)
                        )
    return attempts
