"""Acting on a run (core/orchestration/runs.py `RunControl`), on the real CPU harness and the axpy fixture:
re-run a job with its stored secret seed (the same hidden workloads), requeue it on another
device, cancel one attempt while the others finish; the secret seed never reaches an agent;
a person's infrastructure mark persists and takes the result off the leaderboard."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest

from arena_tui.cli import main
from core.agents.base import AgentConfig
from core.evaluation.executors import LocalExecutor
from core.model import events
from core.orchestration.runfile import RunSpec
from core.orchestration.runs import RunControl, execute
from core.store import leaderboard
from core.store.db import Store
from tests.conftest import ROOT
from tests.test_store import make_result

AXPY = "elementwise/axpy"


@pytest.fixture
def tasks_dir(tmp_path, fixture_tasks) -> Path:
    root = tmp_path / "tasks"
    shutil.copytree(fixture_tasks / "elementwise" / "axpy", root / "elementwise" / "axpy")
    return root


@pytest.fixture
def store(tmp_path):
    with Store.open(tmp_path / "db" / "arena.db") as s:
        yield s


def hidden_labels(store: Store, job_id: int) -> list[str]:
    """What the generalization stage drew from the seed: the hidden workloads it checked."""
    (row,) = [r for r in store.results(store.get_job(job_id).run_id) if r.job_id == job_id]
    (stage,) = [s for s in row.result["stages"] if s["name"] == "generalization"]
    return [json.dumps(w, sort_keys=True) for w in stage["workloads"]]


def one_cpu(device: str, root: Path) -> LocalExecutor:
    """Every device of the run is this machine's CPU: `box2/cpu` stands for another device."""
    return LocalExecutor("cpu", root)


def test_rerun_replays_the_stored_seed_and_requeue_runs_on_another_device_live(store, tasks_dir):
    spec = RunSpec(
        name="ctl",
        tasks=(AXPY,),
        candidates=("starter",),
        devices=("cpu", "box2/cpu"),
        cpu_slots=1,
        tasks_dir=str(tasks_dir),
    )
    run_id = store.create_run(spec.name, spec.to_json())
    control = RunControl(store)
    queued = []

    def on_event(job_id, event):  # the first job's result is in: act on it while the run is live
        if (
            isinstance(event, events.JobStateChanged)
            and event.state == "done"
            and event.job_id.endswith("|cpu|0")
            and not queued
        ):
            original = store.jobs(run_id)[0].id
            queued.append(
                (original, control.rerun(original), control.requeue(original, "box2/cpu"))
            )
            with pytest.raises(ValueError, match="not one of this run"):
                control.requeue(original, "cuda:7")

    outcome = asyncio.run(execute(store, run_id, spec, one_cpu, on_event=on_event, control=control))
    assert not outcome.failed_jobs and not control.live
    ((original, rerun, requeue),) = queued
    assert (
        rerun.spec is None and rerun.run_id == run_id
    )  # live: a job of the same run, not a follow-up
    jobs = {j.id: j for j in store.jobs(run_id)}
    assert len(jobs) == 4 and all(j.state == "done" for j in jobs.values())
    assert (
        jobs[rerun.job_id].seed == jobs[original].seed is not None
        and jobs[rerun.job_id].device_id == "cpu"
    )
    assert (
        jobs[requeue.job_id].device_id == "box2/cpu"
        and jobs[requeue.job_id].seed != jobs[original].seed
    )
    assert hidden_labels(store, rerun.job_id) == hidden_labels(store, original)

    # After the run: a follow-up run of that one job, named after the original, same seed.
    follow = control.rerun(original)
    assert (
        follow.spec is not None
        and follow.run_id != run_id
        and store.get_run(follow.run_id).name == f"ctl-rerun-j{original}"
    )
    asyncio.run(execute(store, follow.run_id, follow.spec, one_cpu))
    assert store.get_job(follow.job_id).seed == jobs[original].seed
    assert hidden_labels(store, follow.job_id) == hidden_labels(store, original)


def test_cancel_one_attempt_while_the_others_finish_and_the_seed_stays_secret(
    store, tasks_dir, tmp_path
):
    recorded = tmp_path / "recorded.jsonl"
    recorded.write_text(
        "".join(json.dumps({"kind": "text", "text": f"step {i}"}) + "\n" for i in range(20))
    )
    candidate = ROOT / "tests" / "fixtures" / "candidates" / "axpy_torch.py"
    slow = {"transcript": str(recorded), "solution": str(candidate), "check": False, "delay_s": 0.5}
    agents = (
        AgentConfig("slow", "replay", options=slow),
        AgentConfig("quick", "replay", options={**slow, "delay_s": 0.01}),
    )
    spec = RunSpec(
        name="cancel",
        tasks=(AXPY,),
        candidates=(),
        devices=("cpu",),
        cpu_slots=1,
        tasks_dir=str(tasks_dir),
        agents=agents,
        parallelism=2,
    )
    run_id = store.create_run(spec.name, spec.to_json())
    control = RunControl(store)
    cancelled = []

    def on_attempt(report):
        if report.agent == "slow" and report.state == "running":
            asyncio.get_running_loop().call_later(
                1.0, lambda: cancelled.append(control.cancel_attempt(report.attempt_id))
            )

    outcome = asyncio.run(execute(store, run_id, spec, on_attempt=on_attempt, control=control))
    assert (
        cancelled == [True]
        and not outcome.interrupted
        and store.get_run(run_id).status == "finished"
    )
    states = {a.agent: a for a in store.attempts(run_id)}
    assert states["slow"].state == "cancelled" and states["slow"].stop_reason == "cancelled"
    assert states["quick"].state == "done" and len(store.transcript(states["slow"].id)) < 20
    assert not control.cancel_attempt(states["quick"].id)  # the run is over: nothing to cancel
    seed = store.get_job(states["quick"].job_id).seed
    assert seed is not None
    seen = [
        e.to_json() if hasattr(e, "to_json") else events.to_json(e)
        for e in store.transcript(states["quick"].id)
    ]
    seen += [r.result for r in store.results(run_id)]
    folder = Path(states["quick"].folder)
    seen += [p.read_bytes().decode(errors="replace") for p in folder.rglob("*") if p.is_file()]
    assert str(seed) not in json.dumps(seen)


def test_an_infrastructure_mark_persists_keeps_the_result_and_leaves_the_leaderboard(
    tmp_path, capsys
):
    db = tmp_path / "arena.db"
    with Store.open(db) as s:
        run_id = s.create_run("marks")
        good = s.add_job(
            run_id, task_id="gemm/a", device_id="cuda:0", candidate=None, agent="ref", key="a"
        )
        bad = s.add_job(
            run_id, task_id="gemm/a", device_id="cuda:0", candidate=None, agent="flaky", key="b"
        )
        s.record_result(good, make_result(speedup=2.0))
        s.record_result(bad, make_result(speedup=0.1))
        before = next(iter(leaderboard.boards(s, run=run_id).values()))
        assert before.infrastructure_errors == 0 and {e.agent for e in before.entries} == {
            "ref",
            "flaky",
        }
        s.mark_infrastructure(bad, "the GPU fell off the bus")
        s.record_result(
            bad, make_result(speedup=0.1)
        )  # recorded again (a resumed run): the mark stays
    with Store.open(db) as s:
        row = {r.job_id: r for r in s.results(run_id)}[bad]
        assert (
            row.infrastructure_marks == ("the GPU fell off the bus",)
            and row.status == "passed"
            and row.speedup == 0.1
        )
        after = next(iter(leaderboard.boards(s, run=run_id).values()))
        assert after.infrastructure_errors == 1 and {e.agent for e in after.entries} == {"ref"}
    assert main(["--db", str(db), "runs", "show", run_id]) == 0
    assert (
        "marked infrastructure fault: gemm/a on cuda:0: the GPU fell off the bus"
        in capsys.readouterr().out
    )
    with Store.open(db) as s:
        s.mark_infrastructure(bad, marked=False)
        assert not {r.job_id: r for r in s.results(run_id)}[bad].infrastructure_marks
        with pytest.raises(Exception, match="no result to mark"):
            s.mark_infrastructure(s.add_job(run_id, task_id="gemm/a", device_id="cuda:0", key="c"))


def test_a_store_from_before_seeds_migrates_its_jobs_have_none_and_rerun_says_why(
    tmp_path, monkeypatch
):
    from core.store import migrations
    from core.store.migrations import MIGRATIONS

    db = tmp_path / "old.db"
    monkeypatch.setattr(migrations, "MIGRATIONS", MIGRATIONS[:2])
    with Store.open(db) as s:
        run_id = s.create_run("old")
        job = s.add_job(
            run_id,
            task_id=AXPY,
            device_id="cpu",
            candidate=ROOT / "tests" / "fixtures" / "candidates" / "axpy_torch.py",
        )
        s.record_result(job, make_result())
    monkeypatch.setattr(migrations, "MIGRATIONS", MIGRATIONS)
    with Store.open(db) as s:
        assert s.schema_version == len(MIGRATIONS) >= 3 and s.get_job(job).seed is None
        assert [r.status for r in s.results(run_id)] == ["passed"]
        with pytest.raises(ValueError, match="no stored seed"):
            RunControl(s).rerun(job)
        assert s.set_job_seed(job, 7) == 7 and s.set_job_seed(job, 8) == 7  # kept once, then reused
