"""Runs with agents: offline attempts through the scheduler into the store, end to end on the
CPU; Ctrl-C (cancellation) stops the agents and a resumed run finishes what was left, redoing
nothing that was done; the run file's agents, variants and parallelism; `arena run`, `arena runs
show` and `arena runs transcript`."""

from __future__ import annotations

import asyncio
import json
import shutil
import time
from pathlib import Path

import pytest

import core.agents
from arena_tui.cli import main
from core.agents.base import AgentConfig
from core.orchestration.planning import plan_attempts
from core.orchestration.runfile import DEFAULT_RUN, DEMO_TASKS, RunFileError, RunSpec, load_run_file
from core.orchestration.runs import execute
from core.store.db import Store
from core.tasks.discovery import task_ids
from tests.conftest import ROOT
from tests.test_agent_runner import FakeCli, processes_with, write_fake

BUNDLED = ("activation/silu_mul", "norm/add_rmsnorm")


@pytest.fixture
def tasks_dir(tmp_path, fixture_tasks) -> Path:
    """The fixture task and two small bundled tasks, copied: other tasks being edited elsewhere
    cannot break these tests."""
    root = tmp_path / "tasks"
    shutil.copytree(fixture_tasks / "elementwise" / "axpy", root / "elementwise" / "axpy")
    for task_id in BUNDLED:
        shutil.copytree(
            ROOT / "tasks" / task_id, root / task_id, ignore=shutil.ignore_patterns("__pycache__")
        )
    return root


@pytest.fixture
def store(tmp_path):
    with Store.open(tmp_path / "db" / "arena.db") as s:
        yield s


def spec_with(tasks_dir: Path, agents: tuple[AgentConfig, ...], **overrides) -> RunSpec:
    base = dict(
        name="agents",
        tasks=("*",),
        candidates=(),
        devices=("cpu",),
        cpu_slots=2,
        tasks_dir=str(tasks_dir),
        agents=agents,
    )
    return RunSpec(**{**base, **overrides})


def test_an_offline_run_of_three_tasks_records_attempts_transcripts_and_results(store, tasks_dir):
    spec = spec_with(
        tasks_dir,
        (AgentConfig("ref", "reference", options={"solution": "baseline"}),),
        parallelism=3,
    )
    run_id = store.create_run(spec.name, spec.to_json())
    reports = []
    outcome = asyncio.run(execute(store, run_id, spec, on_attempt=reports.append))
    assert not outcome.failed_jobs
    attempts = store.attempts(run_id)
    assert [a.task_id for a in attempts] == [
        "activation/silu_mul",
        "elementwise/axpy",
        "norm/add_rmsnorm",
    ]
    assert all(
        a.state == "done" and a.stop_reason == "finished" and a.exit_status == 0 and a.checks == 1
        for a in attempts
    )
    results = {r.job_id: r for r in store.results(run_id)}
    for a in attempts:
        assert results[a.job_id].status == "passed", (a.task_id, results[a.job_id].result)
        job = store.get_job(a.job_id)
        assert job.agent == "ref" and job.variant == "default"
        steps = store.transcript(a.id)
        assert [e.seq for e in steps] == list(range(1, len(steps) + 1))
        assert [e.kind for e in steps] == [
            "text",
            "tool_call",
            "tool_result",
            "tool_call",
            "tool_result",
            "final",
        ]
        assert "arena check" in json.dumps(steps[3].arguments) and "correctness" in steps[4].text
    assert {r.state for r in reports} == {"running", "done"}
    assert store.get_run(run_id).status == "finished"


def test_cancelling_a_run_stops_its_agents_and_resume_finishes_it(
    store, tasks_dir, tmp_path, monkeypatch
):
    """A CLI agent that hangs until a file exists: cancelled mid-attempt (its processes die, the
    attempt is recorded cancelled), then the resumed run reruns it and never redoes the
    attempt that was done."""
    release = tmp_path / "release"
    marker = "arena-resume-fake"
    script = write_fake(
        tmp_path / "bin",
        f"""
        import json, os, time
        print(json.dumps({{"kind": "text", "text": "started"}}), flush=True)
        while not os.path.exists({str(release)!r}):
            time.sleep(0.1)
        open("solution.py", "a").write("# released" + chr(10))
        print(json.dumps({{"kind": "final", "text": "released"}}), flush=True)
    """,
    )
    # The hanging fake reads `release` from the host's /tmp: run it unsandboxed (the sandbox's
    # own test is in test_agent_runner.py).
    monkeypatch.setenv("ARENA_SANDBOX", "off")
    monkeypatch.setitem(core.agents._FACTORIES, "claude", lambda: FakeCli(script))
    agents = (
        AgentConfig("ref", "reference"),
        AgentConfig("cli", "claude", options={"marker": marker}, budget_s=120.0),
    )
    spec = spec_with(tasks_dir, agents, tasks=("elementwise/axpy",), parallelism=1)
    run_id = store.create_run(spec.name, spec.to_json())

    async def cancel_when_the_cli_agent_runs() -> None:
        task = asyncio.ensure_future(execute(store, run_id, spec))
        while not processes_with(marker):
            assert not task.done(), task.exception() if task.done() else ""
            await asyncio.sleep(0.1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancel_when_the_cli_agent_runs())
    time.sleep(0.3)
    assert processes_with(marker) == [], "the agent died with the run"
    first, second = store.attempts(run_id)
    assert (
        first.state == "done" and second.state == "cancelled" and second.stop_reason == "cancelled"
    )
    assert store.get_run(run_id).status == "interrupted"
    done_at = first.finished_at
    release.write_text("go")
    store.resume_run(run_id)
    outcome = asyncio.run(execute(store, run_id, RunSpec.from_json(store.get_run(run_id).spec)))
    assert [r.attempt_id for r in outcome.attempts] == [second.id], (
        "only the cancelled attempt ran again"
    )
    first, second = store.attempts(run_id)
    assert first.finished_at == done_at
    assert second.state == "done" and second.stop_reason == "finished"
    assert [e.text for e in store.transcript(second.id)] == ["started", "released"], (
        "the rerun's transcript replaces the cancelled one's"
    )
    assert len(store.results(run_id)) == 2


def test_run_files_with_agents_variants_and_parallelism(tmp_path, tasks_dir):
    path = tmp_path / "run.yaml"
    path.write_text(
        "name: ab\ntasks: [elementwise/axpy]\nagents:\n  - {name: ref, kind: reference, options: {solution: baseline}, budget_s: 60}\n"
        "  - {name: claude, kind: claude, model: sonnet, max_cost_usd: 2, max_tokens: 100000}\n"
        "variants: [{name: plain}, {name: sheet, cheatsheet: true, prompt: Be brief.}]\niterations: 2\nparallelism: 3\n"
    )
    spec = load_run_file(path, tasks_dir)
    assert spec.candidates == (), "a run of agents evaluates no candidates unless it lists some"
    assert (
        spec.parallelism == 3
        and [v.name for v in spec.variants] == ["plain", "sheet"]
        and spec.variants[1].cheatsheet
    )
    attempts = plan_attempts(spec)
    assert len(attempts) == 2 * 2 * 2 and len({a.key for a in attempts}) == 8
    assert attempts[0].agent.options["solution"].endswith("elementwise/axpy/baseline.py")
    assert RunSpec.from_json(json.loads(json.dumps(spec.to_json()))) == spec, (
        "a stored spec resumes as it was"
    )


@pytest.mark.parametrize(
    ("text", "field", "fix"),
    [
        ("agents: [claude]\n", "agents[0]", "name and kind"),
        ("agents: [{name: a, kind: gpt}]\n", "agents[0].kind", "use one of"),
        ("agents: [{name: a, kind: claude, budget_s: -1}]\n", "agents[0].budget_s", "positive"),
        (
            "agents: [{name: a, kind: claude}, {name: a, kind: codex}]\n",
            "agents[1].name",
            "its own name",
        ),
        ("agents: [{name: a, kind: claude, budget: 3}]\n", "agents[0].budget", "use only"),
        (
            "agents: [{name: a, kind: reference, options: {solution: nope.py}}]\n",
            "agents",
            "does not exist",
        ),
        (
            "agents: [{name: a, kind: claude}]\nvariants: [{name: x, cheatsheet: maybe}]\n",
            "variants[0].cheatsheet",
            "true",
        ),
    ],
)
def test_bad_agent_entries_name_the_file_the_field_and_the_fix(
    tmp_path, tasks_dir, text, field, fix
):
    path = tmp_path / "run.yaml"
    path.write_text("tasks: [elementwise/axpy]\n" + text)
    with pytest.raises(RunFileError) as caught:
        load_run_file(path, tasks_dir)
    message = str(caught.value)
    assert "run.yaml" in message and f"`{field}`" in message and fix in message, message


def test_the_default_run_is_the_reference_agent_on_three_quick_bundled_tasks():
    assert DEFAULT_RUN.candidates == () and [a.kind for a in DEFAULT_RUN.agents] == ["reference"]
    assert DEFAULT_RUN.devices == ("cpu",) and DEFAULT_RUN.tasks == DEMO_TASKS
    assert set(DEMO_TASKS) <= set(task_ids()) and len({t.split("/")[0] for t in DEMO_TASKS}) == 3


def test_arena_run_with_agents_then_show_and_transcript(tmp_path, tasks_dir, capsys):
    db = tmp_path / "cli.db"
    path = tmp_path / "run.yaml"
    path.write_text(
        "name: cli-agents\ntasks: [elementwise/axpy]\nagents: [{name: ref, kind: reference}]\n"
        "variants: [{name: plain}, {name: sheet, cheatsheet: true}]\nparallelism: 2\n"
    )
    assert main(["--db", str(db), "--tasks-dir", str(tasks_dir), "run", str(path)]) == 0
    out = capsys.readouterr().out
    assert "2 agent attempts" in out and "agent attempts of run" in out
    assert out.count("(the unchanged starter)") == 2, (
        "the reference agent submits the starter on purpose: labelled so"
    )
    with Store.open(db) as s:
        run_id = s.list_runs()[0].id
        attempts = s.attempts(run_id)
    assert {a.variant for a in attempts} == {"plain", "sheet"} and all(
        a.state == "done" for a in attempts
    )
    sheet = next(a for a in attempts if a.variant == "sheet")
    assert (Path(sheet.folder) / "workspace" / "CHEATSHEET.md").is_file()
    assert main(["--db", str(db), "runs", "show", run_id]) == 0
    out = capsys.readouterr().out
    assert "agent attempts" in out and "finished" in out and "sheet" in out and "(starter)" in out
    assert main(["--db", str(db), "runs", "transcript", f"{run_id}/1"]) == 0
    out = capsys.readouterr().out
    assert "reference agent" in out and "tool_call" in out and "arena check" in out
    assert main(["--db", str(db), "runs", "transcript", f"{run_id}/1", "--jsonl"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["seq"] for line in lines] == list(range(1, len(lines) + 1)) and lines[0][
        "type"
    ] == "transcript"
    assert main(["--db", str(db), "runs", "transcript", f"{run_id}/9"]) == 2
    assert "unknown attempt" in capsys.readouterr().err


def test_the_replay_agent_replays_a_recorded_transcript_and_candidate(store, tasks_dir, tmp_path):
    recorded = tmp_path / "recorded.jsonl"
    recorded.write_text(
        "\n".join(
            json.dumps(x)
            for x in (
                {"kind": "text", "text": "I will vectorise."},
                {"kind": "usage", "input_tokens": 100, "output_tokens": 20, "cost_usd": 0.01},
                "not an event",
            )
        )
        + "\n"
    )
    candidate = ROOT / "tests" / "fixtures" / "candidates" / "axpy_torch.py"
    agents = (
        AgentConfig(
            "rep", "replay", options={"transcript": str(recorded), "solution": str(candidate)}
        ),
    )
    spec = spec_with(tasks_dir, agents, tasks=("elementwise/axpy",))
    run_id = store.create_run(spec.name, spec.to_json())
    asyncio.run(execute(store, run_id, spec))
    (attempt,) = store.attempts(run_id)
    steps = store.transcript(attempt.id)
    assert [e.kind for e in steps][:3] == ["text", "usage", "text"] and steps[
        0
    ].text == "I will vectorise."
    assert attempt.cost_usd == pytest.approx(0.01) and attempt.input_tokens == 100
    assert Path(attempt.submission).read_bytes() == candidate.read_bytes()
    assert store.results(run_id)[0].status == "passed"


def test_a_store_from_before_attempts_migrates_and_keeps_its_data(tmp_path, monkeypatch):
    """A version-1 store (no attempts yet) opens with this code: its runs and results read as
    before, and attempts can be added to its runs."""
    from core.store import migrations
    from core.store.migrations import MIGRATIONS
    from tests.test_store import make_result

    db = tmp_path / "old.db"
    monkeypatch.setattr(migrations, "MIGRATIONS", MIGRATIONS[:1])
    with Store.open(db) as s:
        run_id = s.create_run("old")
        s.record_result(
            s.add_job(run_id, task_id="elementwise/axpy", device_id="cpu"), make_result()
        )
        assert s.schema_version == 1
    monkeypatch.setattr(migrations, "MIGRATIONS", MIGRATIONS)
    with Store.open(db) as s:
        assert s.schema_version == len(MIGRATIONS) >= 2
        assert [r.status for r in s.results(run_id)] == ["passed"] and s.attempts(run_id) == []
        attempt_id = s.add_attempt(
            run_id,
            1,
            key="k",
            agent="a",
            agent_kind="reference",
            model=None,
            task_id="elementwise/axpy",
            device_id="cpu",
            variant="default",
        )
        assert s.get_attempt(attempt_id).state == "queued"
