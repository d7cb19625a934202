"""`arena tasks validate`: every bundled task is sound (CI runs this on every task), and each
way a task can be broken is caught with a message that says what to fix.

The broken tasks are variants of the axpy fixture, each broken in one way (tests/task_variants.py);
one warm CPU harness serves every evaluation."""

from __future__ import annotations

from pathlib import Path

import pytest

from arena_tui.cli import main
from core.evaluation.validate import validate_task
from core.evaluation.validate_report import CHECK_NAMES, ValidateOptions
from core.tasks.discovery import task_ids, tasks_root
from tests.task_variants import variant_dir, variants_root

FAST = ValidateOptions(evaluate=False)  # the checks that need no harness: a fraction of a second


@pytest.mark.parametrize("task_id", task_ids())
def test_every_bundled_task_validates(task_id: str, cpu_evaluator):
    # Every stage, performance included: the starter and the baseline pass with no flag and
    # no review note (zero false alarms). The CPU budget is measured, but against a loose bound:
    # CI machines are shared, and speed targets belong in benchmarks, not in timed tests.
    report = validate_task(
        tasks_root() / task_id, ValidateOptions(performance=True, cpu_budget_s=300), cpu_evaluator
    )
    assert [c.name for c in report.checks] == list(CHECK_NAMES)
    failed = "\n".join(f"{c.name}: {c.message}" for c in report.failed)
    assert report.passed, f"{task_id}:\n{failed}"


def test_a_wrong_baseline_is_caught_by_the_real_harness(cpu_evaluator):
    report = validate_task(variant_dir("wrong_baseline"), ValidateOptions(), cpu_evaluator)
    assert [c.name for c in report.failed] == ["baseline_passes"]
    message = report.check("baseline_passes").message
    assert "baseline.py failed at correctness" in message and "outside atol" in message
    assert report.check("starter_passes").passed


def test_an_input_the_output_ignores_is_caught():
    report = validate_task(variant_dir("ignores_input"), FAST)
    assert [c.name for c in report.failed] == ["inputs_matter"]
    assert (
        "`b` change no output when replaced by a fresh draw"
        in report.check("inputs_matter").message
    )


def test_a_hidden_set_of_powers_of_two_is_caught_by_the_schema():
    report = validate_task(variant_dir("pow2_hidden"), FAST)
    assert [c.name for c in report.checks] == ["schema"] and not report.passed
    message = report.check("schema").message
    assert (
        "pow2_hidden/task.yaml" in message
        and "`workloads.cpu.hidden.fixed`" in message
        and "not a power of two" in message
    )


def test_a_formula_that_is_not_positive_is_caught():
    report = validate_task(variant_dir("bad_formula"), FAST)
    assert [c.name for c in report.failed] == ["formulas"]
    message = report.check("formulas").message
    assert (
        "`flops: 2 * N * (D - 128)` is -1848 at workloads.hidden N=33,D=100" in message
        and "flops non-negative on every workload" in message
    )


def test_a_tolerance_that_lets_zeros_pass_is_caught():
    report = validate_task(variant_dir("loose_tolerance"), FAST)
    assert {c.name for c in report.failed} == {"zeros_fail", "constant_fail", "random_fail"}
    assert (
        "an all-zeros output passes the correctness rule for output(s) `y`"
        in report.check("zeros_fail").message
    )
    assert "tighten atol/rtol/min_match" in report.check("zeros_fail").message


def test_a_check_py_that_accepts_anything_is_caught(tmp_path: Path, fixture_tasks: Path):
    import shutil

    folder = tmp_path / "elementwise" / "axpy"
    shutil.copytree(fixture_tasks / "elementwise" / "axpy", folder)
    (folder / "check.py").write_text(
        "def check(outputs, expected, inputs):\n    return {'y': {'passed': True}}\n"
    )
    report = validate_task(folder, FAST)
    assert {c.name for c in report.failed} == {"zeros_fail", "constant_fail", "random_fail"}
    assert "passes check.py" in report.check("zeros_fail").message


def test_cli_exit_codes_and_one_line_per_failed_check(capsys):
    broken = variants_root("bad_formula", "ignores_input")
    code = main(
        [
            "--tasks-dir",
            str(broken),
            "tasks",
            "validate",
            "--no-eval",
            "elementwise/bad_formula",
            "elementwise/ignores_input",
        ]
    )
    out, _ = capsys.readouterr()
    assert code == 1
    assert (
        "elementwise/bad_formula" in out and "✗ formulas" in out and "0 of 2 task(s) valid" in out
    )
    code = main(["--tasks-dir", str(broken), "tasks", "validate", "--no-eval", "elementwise/nope"])
    _, err = capsys.readouterr()
    assert (
        code == 2
        and "unknown task `elementwise/nope`" in err
        and len(err.strip().splitlines()) == 1
    )


def test_the_cpu_budget_counts_the_cpu_seconds_of_the_evaluation_not_the_wall_time_load_stretches():
    """On a loaded machine a starter's evaluation takes longer in wall time, not in CPU time:
    the budget reads the harness's CPU seconds where the executor can tell, else says it used
    the wall time."""
    from dataclasses import replace

    from core.evaluation.validate import check_cpu_budget
    from core.tasks.spec import load_task
    from tests.conftest import FIXTURES
    from tests.test_store import make_result

    task = load_task(FIXTURES / "tasks" / "elementwise" / "axpy")
    loaded = replace(make_result(device="cpu"), seconds=240.0)  # 4 × a quiet machine's time
    options = ValidateOptions(cpu_budget_s=60)
    fine = check_cpu_budget(task, loaded, options, cpu_s=12.0)
    assert fine.passed and "12.0 CPU s" in fine.message, fine.message
    blind = check_cpu_budget(task, loaded, options, cpu_s=None)
    assert not blind.passed and "240.0 s of wall time" in blind.message, blind.message


def test_the_cpu_seconds_of_a_process_tree_count_its_reaped_children():
    import subprocess
    import sys

    from core.evaluation.cpu_time import tree_cpu_seconds

    burn = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.4: pass"
    root = subprocess.Popen(
        ["sh", "-c", f'"{sys.executable}" -c "{burn}"; echo done; sleep 30'],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert root.stdout is not None and root.stdout.readline() == "done\n"
        used = tree_cpu_seconds(root.pid)
        assert used is not None and 0.35 <= used < 5, used
    finally:
        root.kill()
        root.wait()
    assert tree_cpu_seconds(root.pid) is None  # gone
