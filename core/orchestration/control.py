"""RunControl: act on one run, live or after the fact (the app's triage): cancel one attempt of
an executing run, re-run a job on its stored seed, requeue it on another device. On a run that
is not executing, a re-run is a small follow-up run for the caller to execute."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.model import keys
from core.orchestration.planning import plan
from core.orchestration.runfile import RunSpec
from core.store.db import Store


@dataclass(frozen=True)
class Queued:
    """What `RunControl.rerun` / `requeue` queued: the store job that will hold the result. When
    the run was not live, a follow-up run (`run_id`, `spec`) holds it: execute that with `execute`."""

    job_id: int
    run_id: str
    spec: RunSpec | None = None  # set for a follow-up run, which the caller executes


class RunControl:
    """Act on one run, live or after the fact (the app's triage). Pass it to `execute`: while the
    run executes, `cancel_attempt` stops one agent (recorded `cancelled`, the others go on), and
    `rerun` / `requeue` add an evaluation job to the store and to the run's scheduler. On a run
    that is not executing, `rerun` / `requeue` create a small follow-up run of that one job
    (named after the original) and return it for the caller to `execute`.

    `rerun(job)`: the same candidate, the same device, the job's stored secret seed, so the same
    hidden workloads and inputs. `requeue(job, device)`: the same candidate, a fresh seed, on
    another device. A job is a store job id, or an attempt id (`<run>/<n>`: its final evaluation).
    """

    def __init__(self, store: Store, tasks_dir: str | Path | None = None) -> None:
        self.store = store
        self.tasks_dir = (
            str(tasks_dir) if tasks_dir else None
        )  # for a follow-up run whose original names none
        self._live: LiveRun | None = None

    @property
    def live(self) -> bool:
        return self._live is not None

    def cancel_attempt(self, attempt_id: str) -> bool:
        """Stop one attempt of the executing run; False when it is not running or already ended."""
        live = self._live
        task = live.attempts.get(attempt_id) if live else None
        if task is None or task.done():
            return False
        task.cancel()
        return True

    def rerun(self, job: int | str) -> Queued:
        original = self._job(job)
        if original.seed is None:
            raise ValueError(
                f"job {original.id} has no stored seed (evaluated before seeds were kept, or never evaluated): requeue it instead"
            )
        return self._queue(original, original.device_id, original.seed, "rerun")

    def requeue(self, job: int | str, device: str) -> Queued:
        return self._queue(self._job(job), device, None, "requeue")

    def _job(self, job: int | str) -> Any:
        if isinstance(job, str):
            attempt = self.store.get_attempt(job)
            if attempt.job_id is None:
                raise ValueError(f"attempt {job} has no final evaluation yet: nothing to re-run")
            job = attempt.job_id
        found = self.store.get_job(job)
        if not found.candidate:
            raise ValueError(f"job {found.id} has no candidate file")
        return found

    def _add_copy(
        self, original: Any, run_id: str, device: str, candidate: Any, key: str, seed: int | None
    ) -> int:
        """A store job for `original`'s candidate on `device` in `run_id`, on `seed` if given."""
        job_id = self.store.add_job(
            run_id,
            task_id=original.task_id,
            device_id=device,
            candidate=candidate,
            family=original.family,
            agent=original.agent,
            variant=original.variant,
            key=key,
        )
        if seed is not None:
            self.store.set_job_seed(job_id, seed)
        return job_id

    def _queue(self, original: Any, device: str, seed: int | None, how: str) -> Queued:
        live = self._live
        if live is not None and original.run_id == live.run_id:
            if device not in live.devices:
                raise ValueError(
                    f"device {device} is not one of this run's ({', '.join(sorted(live.devices))}): requeue it once the run has ended"
                )
            n = sum(
                1
                for j in self.store.jobs(live.run_id)
                if j.key.startswith(keys.rerun_prefix(original.key, how))
            )
            key = keys.rerun_key(original.key, how, device, n + 1)
            job_id = self._add_copy(original, live.run_id, device, original.candidate, key, seed)
            live.submit(key, job_id, original.task_id, Path(original.candidate), device)
            return Queued(job_id, live.run_id)
        run = self.store.get_run(original.run_id)
        spec = RunSpec(
            name=f"{run.name}-{how}-j{original.id}",
            tasks=(original.task_id,),
            candidates=(original.candidate,),
            devices=(device,),
            cpu_slots=run.spec.get("cpu_slots"),
            max_retries=run.spec.get("max_retries", 2),
            tasks_dir=run.spec.get("tasks_dir") or self.tasks_dir,
        )
        planned = plan(spec)[0]
        run_id = self.store.create_run(spec.name, spec.to_json())
        job_id = self._add_copy(original, run_id, device, planned.candidate, planned.key, seed)
        return Queued(job_id, run_id, spec)


@dataclass
class LiveRun:
    """What a `RunControl` reaches of an executing run."""

    run_id: str
    devices: frozenset[str]
    attempts: dict[str, asyncio.Task]
    submit: Callable[
        [str, int, str, Path, str], None
    ]  # (scheduler key, store job id, task id, candidate, device)
