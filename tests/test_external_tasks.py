"""External tasks (core/tasks/external.py): another benchmark's task that runs its own compile,
correctness and performance commands in this arena's sandbox, in a fresh workspace per attempt,
and is scored by its own rules (AgentKernelArena's) under the timing kind `external`.

The fixture task (tests/fixtures/external_tasks/) is written for these tests: its commands are
small Python scripts that run on any device, and three candidates pass, fail its own check, and
hang."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from arena_tui.cli import main
from core.evaluation import external_rules as rules
from core.evaluation.evaluator import Evaluator
from core.evaluation.validate import validate_task
from core.evaluation.validate_report import ValidateOptions
from core.importers.aka_external import write_external
from core.store.standings import LABELS, RANKED_KINDS, TIMING_KINDS
from core.tasks.fields import TaskError
from core.tasks.spec import load_task

FIXTURES = Path(__file__).parent / "fixtures"
TASKS = FIXTURES / "external_tasks"
TASK = TASKS / "agentkernelarena" / "fake_kernel"
CANDIDATES = TASKS / "candidates"


@pytest.fixture(scope="module")
def evaluator():
    with Evaluator("cpu") as ev:
        yield ev


def test_an_external_task_loads_with_its_commands_and_no_workloads():
    task = load_task(TASK)
    assert task.external.rules == "agentkernelarena" and task.external.editable == ("kernel.py",)
    assert task.external.commands["correctness"] == ("python3 scripts/check.py",)
    assert task.axes == {} and task.gpu.visible == () and task.limits.correctness_s == 4


def test_a_faster_candidate_passes_and_is_scored_by_the_tasks_own_rules(evaluator):
    result = evaluator.evaluate(load_task(TASK), CANDIDATES / "faster.py")
    assert result.status == "passed" and result.timing_kind == "external"
    # two cases from the task's own report, matched to the untouched source's by their params
    assert [(w.label, w.speedup) for w in result.workloads] == [
        ('params={"n": 1}', 2.0),
        ('params={"n": 4}', 2.0),
    ]
    assert (
        result.speedup == 2.0 and result.points == 120 + 100 * 2.0
    )  # AgentKernelArena's 20 + 100 + 100 x speedup
    assert result.sol_fraction is None and "its own commands" in result.review_notes[0]
    assert result.stage("generalization").status == "skipped"


def test_a_candidate_its_own_check_rejects_fails_correctness(evaluator):
    # scripts/check.py prints FAIL and exits 0: the task's rules read the words
    result = evaluator.evaluate(load_task(TASK), CANDIDATES / "wrong.py")
    assert (result.status, result.failed_stage) == ("failed", "correctness")
    assert (
        "FAIL" in result.stage("correctness").log and result.points == 20 and result.exit_code == 1
    )


def test_a_command_that_hangs_is_killed_at_the_stages_timeout(evaluator):
    result = evaluator.evaluate(load_task(TASK), CANDIDATES / "hangs.py")
    stage = result.stage("correctness")
    assert (result.failed_stage, stage.status) == ("correctness", "timeout")
    assert 4 <= stage.seconds < 30 and "4 s" in stage.message


def test_a_hip_task_cannot_be_evaluated_off_amd_devices(tmp_path, evaluator):
    task_dir = tmp_path / "agentkernelarena" / "hip_kernel"
    shutil.copytree(TASK, task_dir)
    spec = yaml.safe_load((task_dir / "task.yaml").read_text())
    spec["external"]["requires"] = "amd"
    (task_dir / "task.yaml").write_text(yaml.safe_dump(spec))
    result = evaluator.evaluate(load_task(task_dir), CANDIDATES / "faster.py")
    assert (
        result.status == "infrastructure_error" and result.exit_code == 3
    )  # cannot evaluate on this device
    assert "needs an AMD GPU" in result.stage("compile").message


def test_arena_eval_prints_the_external_result(capsys):
    code = main(
        [
            "--tasks-dir",
            str(TASKS),
            "eval",
            "--task",
            "agentkernelarena/fake_kernel",
            "--candidate",
            str(CANDIDATES / "faster.py"),
            "--device",
            "cpu",
            "--json",
            "--no-store",
        ]
    )
    data = json.loads(capsys.readouterr().out)
    assert code == 0 and data["timing_kind"] == "external" and data["speedup"] == 2.0


def test_validate_checks_the_commands_and_the_files_they_name(tmp_path):
    assert validate_task(TASK, ValidateOptions(evaluate=False)).passed
    broken = tmp_path / "agentkernelarena" / "broken"
    shutil.copytree(TASK, broken)
    (broken / "files" / "scripts" / "perf.py").unlink()
    report = validate_task(broken, ValidateOptions(evaluate=False))
    assert not report.passed and "scripts/perf.py" in report.check("external_files").message


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("rules", "kernelbench"),
        ("editable", ["../../outside.py"]),
        ("requires", "tpu"),
        ("correctness", []),
    ],
)
def test_a_bad_external_section_names_the_field(tmp_path, key, value):
    bad = tmp_path / "agentkernelarena" / "bad"
    shutil.copytree(TASK, bad)
    spec = yaml.safe_load((bad / "task.yaml").read_text())
    spec["external"][key] = value
    (bad / "task.yaml").write_text(yaml.safe_dump(spec))
    with pytest.raises(TaskError, match=f"external.{key}"):
        load_task(bad)


def test_imported_external_tasks_carry_the_task_folder_and_its_timing_helpers(tmp_path):
    aka = FIXTURES / "agentkernelarena" / "tasks"
    for folder, name in (
        (aka / "hip2hip" / "others" / "gelu", "hip2hip_others_gelu"),
        (aka / "triton2triton" / "vllm" / "triton_offtemplate", "vllm_offtemplate"),
    ):
        write_external(
            folder,
            str(folder.relative_to(aka.parent)),
            tmp_path,
            name,
            "agentkernelarena",
            "Apache-2.0",
            "a test",
        )
    hip = load_task(tmp_path / "agentkernelarena" / "hip2hip_others_gelu")
    assert (
        hip.external.requires.value == "amd" and (hip.path / "files" / "hip" / "gelu.hip").is_file()
    )
    assert (hip.path / "starter.py").read_text() == (
        hip.path / "files" / "hip" / "gelu.hip"
    ).read_text()
    triton = load_task(tmp_path / "agentkernelarena" / "vllm_offtemplate")
    assert triton.external.requires.value == "gpu"
    runner = (triton.path / "files" / "scripts" / "task_runner.py").read_text()
    assert (
        "the materialized helper" in runner and "were not materialized" not in runner
    )  # as AgentKernelArena's setup does
    assert validate_task(triton.path, ValidateOptions(evaluate=False)).passed


def test_the_rules_read_outputs_as_agentkernelarena_does():
    assert rules.correctness_passed(0, "Correctness: PASS") and not rules.correctness_passed(
        0, "FAIL: wrong"
    )
    assert not rules.correctness_passed(1, "PASS")
    assert rules.cases_from_output("Performance: 1.5 ms\nPerformance: 2.5 ms") == [
        rules.Case("case=0", 1.5),
        rules.Case("case=1", 2.5),
    ]
    # wall-clock keys are host time: refused, as at home
    assert rules.cases_from_report([{"params": {"n": 1}, "wall_time_ms": 3.0}]) == []
    pairs, why = rules.match([rules.Case("a", 1.0), rules.Case("b", 1.0)], [rules.Case("a", 0.5)])
    assert pairs == [] and "every case must match" in why


def test_external_results_have_their_own_board():
    assert (
        "external" in TIMING_KINDS and "external" not in RANKED_KINDS
    )  # never ranked with the arena's protocol
    assert "own rules" in LABELS["external"]


def test_a_run_file_evaluates_external_tasks_and_the_board_keeps_them_apart(tmp_path):
    import asyncio

    from core.orchestration.runfile import RunSpec
    from core.orchestration.runs import execute
    from core.store.db import Store
    from core.store.leaderboard import boards

    spec = RunSpec(
        name="external",
        tasks=("agentkernelarena/fake_kernel",),
        candidates=("starter", str(CANDIDATES / "faster.py")),
        devices=("cpu",),
        cpu_slots=1,
        tasks_dir=str(TASKS),
    )
    with Store.open(tmp_path / "arena.db") as store:
        run_id = store.create_run(spec.name, spec.to_json())
        outcome = asyncio.run(execute(store, run_id, spec))
        assert not outcome.failed_jobs and sorted(r.speedup for r in outcome.results) == [1.0, 2.0]
        found = boards(store)
    assert (
        list(found) == ["external"]
        and "own rules" in found["external"].label
        and not found["external"].ranked
    )


def test_an_agents_workspace_holds_the_tasks_files_and_its_commands(tmp_path):
    from core.agents.workspace import Variant, make_workspace

    ws = make_workspace(tmp_path / "attempt", load_task(TASK), "cpu", Variant(), 600)
    assert (ws.path / "solution.py").read_text() == (TASK / "starter.py").read_text()
    assert (
        ws.path / "task" / "scripts" / "check.py"
    ).is_file()  # nothing of an external task is hidden
    assert (
        "python3 scripts/check.py" in ws.prompt
        and "replaces `kernel.py`" in ws.prompt
        and "run(" not in ws.prompt
    )


def test_arena_check_shows_the_tasks_own_output_when_it_fails(evaluator):
    from core.agents.check_server import report_text

    text = report_text(evaluator.evaluate(load_task(TASK), CANDIDATES / "wrong.py"))
    assert "FAIL: answer() is wrong" in text and "FAILED at correctness" in text
