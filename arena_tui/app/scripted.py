"""A scripted run: the engine's callbacks and store writes replayed from a script, no harness.

Tests drive the app with it and `tools/app_screenshots.py` draws the screens from it. It writes
to the store exactly what `core.orchestration.runs.execute` would (attempts, final jobs, results,
transcripts) before it reports each step, so the app sees what it would see in a real run.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from arena_tui.app.source import RunSource
from core.agents.runner import attempt_key
from core.model import events
from core.model.keys import final_key
from core.model.result import Result, StageResult, WorkloadFigures
from core.orchestration.runs import AttemptReport, OnAttempt, OnRunEvent
from core.store.db import Store

STAGES = ("compile", "correctness", "generalization", "performance")
Step = Callable[[OnRunEvent, OnAttempt], None]


def scripted_result(
    task: str,
    failed_stage: str | None = None,
    speedups: tuple[float, ...] = (1.6, 0.9, 2.4),
    log: str = "",
    flags: tuple[str, ...] = (),
    device: str = "cpu",
    base_us: float = 100.0,
    seconds: float = 2.0,
) -> Result:
    """A plausible result: passed, or failed at `failed_stage` (later stages skipped), on
    `device` (`cpu`: interpreted times; `sim:…`: predicted, with bands; else measured), the
    baseline taking `base_us` per workload."""
    kind = "cpu" if device == "cpu" else "predicted" if device.startswith("sim:") else "measured"
    stages, failed = [], False
    for name in STAGES:
        if failed:
            stages.append(StageResult(name))
            continue
        status = "failed" if name == failed_stage else "passed"
        workloads = []
        if name in ("correctness", "generalization"):
            err = 0.75 if status == "failed" else 3e-7
            workloads = [
                {
                    "label": f"n={n}",
                    "axes": {"n": n},
                    "passed": status == "passed" or i > 0,
                    "message": None,
                    "worst": {"max_abs_err": err if i == 0 else 2e-7},
                }
                for i, n in enumerate((1000, 4097))
            ]
        message = (
            {
                "compile": "SyntaxError: invalid syntax (solution.py, line 12)",
                "correctness": "n=1000: 812 of 1000 elements differ",
            }.get(name)
            if status == "failed"
            else None
        )
        stages.append(
            StageResult(name, status, 0.4, message, log if name == "compile" else "", workloads)
        )
        failed = status == "failed"
    passed = failed_stage is None and not flags

    def side(median: float, iqr: float) -> dict[str, float]:
        if kind == "predicted":  # a prediction's band; the baseline measured on the GPU itself
            return (
                {"median_us": median, "band": 0.15}
                if median != base_us
                else {"median_us": median, "band": 0.0, "source": "measured"}
            )
        return {"median_us": median, "iqr_us": iqr, "spread": iqr / median}

    timed = (
        [
            WorkloadFigures(
                f"n={n}",
                {"n": n},
                i == 2,
                "predicted" if kind == "predicted" else None,
                side(base_us / s, 2.0),
                side(base_us, 1.5),
                s,
                None if kind == "cpu" else base_us * 0.3,
                None if kind == "cpu" else min(1.0, 0.3 * s),
                band=0.15 if kind == "predicted" else None,
            )
            for i, (n, s) in enumerate(zip((1000, 65536, 4097), speedups))
        ]
        if failed_stage is None
        else []
    )
    geo = 1.0
    for s in speedups:
        geo *= s
    speedup = geo ** (1 / len(speedups)) if timed else 0.0
    model = {"cpu": "cpu", "predicted": "NVIDIA H200 (simulated)"}.get(kind, "NVIDIA H200")
    sols = [w.sol_fraction for w in timed if w.sol_fraction is not None]
    return Result(
        task,
        "0" * 64,
        {"id": device, "model": model, "vendor": "cpu" if kind == "cpu" else "nvidia"},
        kind,
        "passed" if passed else "failed",
        failed_stage or ("performance" if flags else None),
        stages,
        timed,
        speedup,
        (sum(sols) / len(sols)) if sols and passed else None,
        "measured" if sols and passed else None,
        (120 + 100 * speedup) if passed else (20 if failed_stage != "compile" else 0),
        list(flags),
        [],
        {},
        seconds,
    )


@dataclass
class ScriptedRun:
    """Agents × tasks on the CPU device, plus one plain evaluation job, scripted step by step.

    Outcomes by agent index: the first passes, the second fails correctness, the third fails to
    compile; the evaluation job passes. `gate`, when set, holds the script half-way (agents
    running) until the test releases it."""

    store: Store
    tasks: tuple[str, ...]
    agents: tuple[str, ...] = ("ref", "cli")
    starter: Path | None = None  # the task's starter.py: candidates are written from it
    folder: Path = Path(".")
    pace_s: float = 0.0
    gate: asyncio.Event | None = None
    device: str = "cpu"
    speedups: tuple[float, ...] = (1.6, 0.9, 2.4)  # the passing attempts' per workload
    base_us: float = 100.0  # the baseline's time per workload
    seconds: float = 2.0  # each evaluation's
    eval_label: str = "starter"  # the plain evaluation's candidate, as a run file names it
    run_id: str = ""
    attempt_ids: dict[tuple[str, str], str] = field(default_factory=dict)
    eval_job: int = 0
    steps: list[Step] = field(default_factory=list)
    half: int = 0  # index of the step the gate holds before

    def __post_init__(self) -> None:
        self.run_id = self.store.create_run(
            "scripted", {"tasks": list(self.tasks), "agents": list(self.agents)}
        )
        counter = itertools.count(1)
        for task in self.tasks:
            for agent in self.agents:
                key = attempt_key(agent, task, self.device, "default", 0)
                self.attempt_ids[(agent, task)] = self.store.add_attempt(
                    self.run_id,
                    next(counter),
                    key=key,
                    agent=agent,
                    agent_kind="reference",
                    model=None,
                    task_id=task,
                    device_id=self.device,
                    variant="default",
                )
        self.eval_key = f"{self.tasks[0]}|{self.eval_label}|{self.device}|0"
        self.eval_job = self.store.add_job(
            self.run_id,
            task_id=self.tasks[0],
            device_id=self.device,
            candidate=self.starter,
            key=self.eval_key,
        )
        self._script()

    # -- the script -------------------------------------------------------------------------

    def _script(self) -> None:
        seqs: dict[str, itertools.count] = {}

        def say(aid: str, agent: str, kind: str, **kw) -> Step:  # type: ignore[no-untyped-def]
            def step(on_event: OnRunEvent, on_attempt: OnAttempt) -> None:
                event = events.TranscriptEvent(
                    aid, next(seqs.setdefault(aid, itertools.count(1))), kind, agent, **kw
                )
                self.store.append_transcript(event)
                on_event(None, event)

            return step

        def report(
            aid: str,
            agent: str,
            task: str,
            state: str,
            result: Result | None = None,
            candidate: Path | None = None,
        ) -> Step:
            def step(on_event: OnRunEvent, on_attempt: OnAttempt) -> None:
                if state == "running":
                    self.store.start_attempt(aid, self.folder / aid.replace("/", "_"))
                if result is not None:
                    job = self.store.add_job(
                        self.run_id,
                        task_id=task,
                        device_id=self.device,
                        candidate=candidate,
                        agent=agent,
                        variant="default",
                        key=final_key(attempt_key(agent, task, self.device, "default", 0)),
                    )
                    self.store.record_result(job, result)
                    self.store.set_attempt_state(aid, "done", job_id=job, stop_reason="final")
                on_attempt(
                    AttemptReport(
                        aid,
                        agent,
                        task,
                        self.device,
                        "default",
                        state,
                        "final" if result else None,
                        result,
                    )
                )

            return step

        def job_state(
            key: str, state: str, job_id: int | None = None, result: Result | None = None
        ) -> Step:
            def step(on_event: OnRunEvent, on_attempt: OnAttempt) -> None:
                if result is not None and job_id is not None:
                    self.store.record_result(job_id, result)
                    self.store.set_job_state(job_id, "done")
                on_event(job_id, events.JobStateChanged(key, state, self.device, 0, 1))

            return step

        def stage(job_id: int, name: str, status: str | None = None) -> Step:
            def step(on_event: OnRunEvent, on_attempt: OnAttempt) -> None:
                on_event(
                    job_id,
                    events.StageStarted(name)
                    if status is None
                    else events.StageFinished(name, status, 0.4),
                )

            return step

        first, second = [], []
        first += [
            job_state(self.eval_key, "running", self.eval_job),
            stage(self.eval_job, "compile"),
            stage(self.eval_job, "compile", "passed"),
            stage(self.eval_job, "correctness"),
        ]
        for task in self.tasks:
            for i, agent in enumerate(self.agents):
                aid = self.attempt_ids[(agent, task)]
                first += [
                    report(aid, agent, task, "running"),
                    say(aid, agent, "text", text=f"Reading the task {task} and the starter."),
                    say(
                        aid,
                        agent,
                        "tool_call",
                        tool="bash",
                        arguments={"command": "cat solution.py"},
                        call_id="c1",
                    ),
                    say(
                        aid,
                        agent,
                        "tool_result",
                        text="\n".join(f"line {n} of solution.py" for n in range(1, 15)),
                        call_id="c1",
                    ),
                ]
                outcome = (None, "correctness", "compile")[i % 3]
                candidate = self._candidate(aid, broken=outcome is not None)
                log = (
                    '  File "solution.py", line 12\n    def run(x, y\n              ^\nSyntaxError: invalid syntax'
                    if outcome == "compile"
                    else ""
                )
                second += [
                    say(
                        aid,
                        agent,
                        "tool_call",
                        tool="bash",
                        arguments={"command": "arena check"},
                        call_id="c2",
                    ),
                    say(
                        aid,
                        agent,
                        "tool_result",
                        text="compile ✓ correctness ✗" if outcome else "compile ✓ correctness ✓",
                        call_id="c2",
                        is_error=bool(outcome),
                    ),
                    say(aid, agent, "final", text="Submitted solution.py."),
                    report(aid, agent, task, "done", self._result(task, outcome, log), candidate),
                ]
        second += [
            stage(self.eval_job, "correctness", "passed"),
            job_state(
                self.eval_key,
                "done",
                self.eval_job,
                self._result(self.tasks[0], None, "", speedups=(1.0, 1.0, 1.0)),
            ),
        ]
        self.steps, self.half = first + second, len(first)

    def _result(
        self, task: str, outcome: str | None, log: str, speedups: tuple[float, ...] | None = None
    ) -> Result:
        return scripted_result(
            task,
            outcome,
            speedups or self.speedups,
            log=log,
            device=self.device,
            base_us=self.base_us,
            seconds=self.seconds,
        )

    def _candidate(self, aid: str, broken: bool) -> Path | None:
        if self.starter is None:
            return None
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / f"{aid.replace('/', '_')}_solution.py"
        text = self.starter.read_text()
        path.write_text(
            text
            + (
                "\n# agent's edit: reorders the loads\nBLOCK = 128\n"
                if broken
                else "\n# agent's edit: a larger block\nBLOCK = 1024\n"
            )
        )
        return path

    # -- running it ---------------------------------------------------------------------------

    async def play(self, on_event: OnRunEvent, on_attempt: OnAttempt) -> None:
        for i, step in enumerate(self.steps):
            if i == self.half and self.gate is not None:
                await self.gate.wait()
            step(on_event, on_attempt)
            await asyncio.sleep(self.pace_s)
        self.store.finish_run(self.run_id, "finished")

    def play_into_store(self) -> None:
        """Run the whole script with nobody listening: a finished run, as the store keeps it."""
        for step in self.steps:
            step(lambda *a: None, lambda *a: None)
        self.store.finish_run(self.run_id, "finished")

    def source(self, tasks_dir: Path | None = None, live: bool = True) -> RunSource:
        return RunSource(self.store, self.run_id, None, self.play if live else None, tasks_dir)
