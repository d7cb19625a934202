"""Runs: a run file through the scheduler into the store; an interrupted run resumes with
nothing lost and nothing done twice; infrastructure faults are retried, candidate faults not."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from arena_tui.cli import main
from core.evaluation.executors import HarnessError, LocalExecutor
from core.orchestration.planning import plan
from core.orchestration.runfile import RunFileError, RunSpec, load_run_file
from core.orchestration.runs import execute
from core.store.db import Store


def write_run(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "run.yaml"
    path.write_text(text)
    return path


@pytest.fixture
def store(tmp_path):
    with Store.open(tmp_path / "arena.db") as s:
        yield s


def spec_for(fixture_tasks: Path, folder: Path, **overrides) -> RunSpec:
    base = dict(
        name="test",
        tasks=("elementwise/axpy",),
        candidates=("starter", str(folder / "axpy_torch.py"), str(folder / "axpy_wrong.py")),
        devices=("cpu",),
        cpu_slots=1,
        tasks_dir=str(fixture_tasks),
    )
    return RunSpec(**{**base, **overrides})


@pytest.mark.parametrize(
    ("text", "field", "fix"),
    [
        ("name: x\n", "tasks", "list the tasks"),
        ("tasks: [gemm/nope]\n", "tasks", "arena tasks list"),
        ("tasks: [elementwise/axpy]\ncandidates: [missing.py]\n", "candidates", "does not exist"),
        ("tasks: [elementwise/axpy]\nagent: [claude]\n", "agent", "use only"),
        ("tasks: [elementwise/axpy]\niterations: 0\n", "iterations", "positive integer"),
    ],
)
def test_bad_run_files_name_the_file_the_field_and_the_fix(
    tmp_path, fixture_tasks, text, field, fix
):
    with pytest.raises(RunFileError) as caught:
        load_run_file(write_run(tmp_path, text), fixture_tasks)
    message = str(caught.value)
    assert "run.yaml" in message and f"`{field}`" in message and fix in message


def test_run_file_selects_tasks_by_id_family_and_glob(tmp_path, fixture_tasks, candidates):
    path = write_run(
        tmp_path,
        f"name: n\ntasks: [elementwise]\ncandidates: [starter, {candidates}/axpy_torch.py]\niterations: 2\n",
    )
    spec = load_run_file(path, fixture_tasks)
    jobs = plan(spec)
    assert len(jobs) == 4 and {j.task.id for j in jobs} == {"elementwise/axpy"}
    assert len({j.key for j in jobs}) == 4


def test_a_run_records_every_result_and_scores_each_candidate(store, fixture_tasks, candidates):
    spec = spec_for(fixture_tasks, candidates)
    run_id = store.create_run(spec.name, spec.to_json())
    outcome = asyncio.run(execute(store, run_id, spec))
    assert not outcome.failed_jobs and len(outcome.results) == 3
    by_candidate = {
        store.get_job(r.job_id).key.split("|")[1].rsplit("/", 1)[-1]: r
        for r in store.results(run_id)
    }
    assert by_candidate["starter"].status == "passed"
    assert by_candidate["axpy_torch.py"].status == "passed"
    assert (
        by_candidate["axpy_wrong.py"].status == "failed"
        and by_candidate["axpy_wrong.py"].failed_stage == "correctness"
    )
    assert store.get_run(run_id).status == "finished"
    assert any(e.type == "job_state_changed" for e in store.events(run_id))


def test_an_interrupted_run_resumes_with_nothing_lost_and_nothing_done_twice(
    store, fixture_tasks, candidates
):
    spec = spec_for(fixture_tasks, candidates)
    run_id = store.create_run(spec.name, spec.to_json())

    async def interrupt_after_first_result() -> None:
        task = asyncio.ensure_future(execute(store, run_id, spec))
        while not store.results(run_id):
            await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(interrupt_after_first_result())
    kept = {r.job_id: r.created_at for r in store.results(run_id)}
    assert 1 <= len(kept) < 3 and store.get_run(run_id).status == "interrupted"
    store.resume_run(run_id)
    outcome = asyncio.run(execute(store, run_id, spec))
    assert len(outcome.results) == 3 - len(kept), "only the missing jobs ran"
    results = store.results(run_id)
    assert len(results) == 3 and len({r.job_id for r in results}) == 3
    assert all(r.created_at == kept[r.job_id] for r in results if r.job_id in kept), (
        "kept results untouched"
    )


class FlakyExecutor(LocalExecutor):
    """Fails its first job as a lost host would."""

    failures = 0

    async def run(self, job, job_dir, deadline_s, on_event):
        if FlakyExecutor.failures == 0:
            FlakyExecutor.failures += 1
            raise HarnessError("connection lost")
        return await super().run(job, job_dir, deadline_s, on_event)


def test_an_infrastructure_fault_is_retried_and_the_job_finished_once(
    store, fixture_tasks, candidates
):
    spec = spec_for(fixture_tasks, candidates, candidates=("starter",), cpu_slots=2)
    run_id = store.create_run(spec.name, spec.to_json())
    outcome = asyncio.run(execute(store, run_id, spec, executor_factory=FlakyExecutor))
    assert FlakyExecutor.failures == 1
    assert [r.status for r in outcome.results] == ["passed"]
    assert len(store.results(run_id)) == 1
    states = [e.event["state"] for e in store.events(run_id) if e.type == "job_state_changed"]
    assert "retrying" in states and states[-1] == "done"


def test_arena_run_and_resume_from_the_command_line(tmp_path, fixture_tasks, candidates, capsys):
    db = tmp_path / "cli.db"
    path = write_run(
        tmp_path,
        f"name: cli\ntasks: [elementwise/axpy]\ncandidates: [starter, {candidates}/axpy_wrong.py]\n",
    )
    code = main(["--db", str(db), "--tasks-dir", str(fixture_tasks), "run", str(path)])
    out = capsys.readouterr().out
    assert code == 1, "a wrong candidate fails its evaluation"
    assert "passed" in out and "failed" in out
    assert "[1/2]" in out and "[2/2]" in out, "one line per finished job, also into a pipe"
    with Store.open(db) as s:
        run_id = s.list_runs()[0].id
    assert main(["--db", str(db), "run", "--resume", run_id]) == 1
    assert "2 already done" in capsys.readouterr().out
    assert main(["--db", str(db), "run", "--resume", "r-nope"]) == 2


def test_the_example_run_file_in_the_repo_is_valid():
    from tests.conftest import ROOT

    spec = load_run_file(ROOT / "runs" / "example.yaml")
    assert {p.candidate_label for p in plan(spec)} == {"starter", "baseline"}
