"""The gated pipeline on the CPU device: each stage passes, and fails for the right reason.

These use the small `elementwise/axpy` fixture task so they run in seconds."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from core.evaluation.evaluator import BadCandidate, check_candidate
from core.model.task import Limits
from core.tasks.spec import load_task

SHORT = Limits(compile_s=20, correctness_s=20, performance_s=20)


@pytest.fixture(scope="module")
def axpy(fixture_tasks: Path):
    return load_task(fixture_tasks / "elementwise" / "axpy")


def test_correct_candidate_passes_every_stage_with_cpu_timing(cpu_evaluator, axpy, candidates):
    seen = []
    result = cpu_evaluator.evaluate(axpy, candidates / "axpy_torch.py", on_event=seen.append)
    assert result.status == "passed", result.stages
    assert [s.status for s in result.stages] == ["passed"] * 4
    assert result.exit_code == 0
    assert result.timing_kind == "cpu" and result.sol_fraction is None
    # Visible and fixed hidden workloads are timed, the drawn hidden one only checked.
    assert [w.hidden for w in result.workloads] == [False, False, True]
    for w in result.workloads:
        assert w.candidate["n"] >= 3 and w.baseline["n"] >= 3
        assert w.candidate["median_us"] > 0 and w.speedup > 0
    assert result.points == pytest.approx(120 + 100 * result.speedup)
    correctness = result.stage("correctness").workloads
    assert len(correctness) == 2 and all(w["passed"] for w in correctness)
    assert len(result.stage("generalization").workloads) == 2
    assert {"torch", "triton", "python", "arena"} <= set(result.versions)
    assert [type(e).__name__ for e in seen][0] == "EvaluationStarted"


def test_triton_starter_runs_in_the_interpreter(cpu_evaluator, axpy):
    result = cpu_evaluator.evaluate(axpy, axpy.file("starter.py"))
    assert result.status == "passed", result.stages


def test_wrong_candidate_fails_correctness_with_the_worst_element(cpu_evaluator, axpy, candidates):
    result = cpu_evaluator.evaluate(axpy, candidates / "axpy_wrong.py")
    assert result.status == "failed" and result.failed_stage == "correctness"
    assert result.exit_code == 1 and result.points == 20
    first = result.stage("correctness").workloads[0]
    assert not first["passed"] and "worst at" in first["message"]
    assert result.stage("generalization").status == "skipped"
    assert result.workloads == [] and result.speedup == 0.0


def test_nan_never_passes(cpu_evaluator, axpy, candidates):
    result = cpu_evaluator.evaluate(axpy, candidates / "axpy_nan.py")
    assert result.failed_stage == "correctness"
    assert "NaN/Inf" in result.stage("correctness").message


def test_wrong_dtype_is_named(cpu_evaluator, axpy, candidates):
    result = cpu_evaluator.evaluate(axpy, candidates / "axpy_wrong_dtype.py")
    assert result.failed_stage == "correctness"
    assert (
        "dtype torch.float64; the task declares torch.float32"
        in result.stage("correctness").message
    )


def test_power_of_two_only_candidate_fails_generalization(cpu_evaluator, axpy, candidates):
    result = cpu_evaluator.evaluate(axpy, candidates / "axpy_pow2_only.py")
    assert result.stage("correctness").status == "passed"
    assert result.failed_stage == "generalization"


def test_syntax_error_fails_compile_with_the_compiler_output(cpu_evaluator, axpy, candidates):
    result = cpu_evaluator.evaluate(axpy, candidates / "axpy_syntax_error.py")
    assert result.failed_stage == "compile" and result.points == 0
    assert "SyntaxError" in result.stage("compile").message


def test_crashing_candidate_is_a_candidate_fault(cpu_evaluator, axpy, candidates):
    result = cpu_evaluator.evaluate(axpy, candidates / "axpy_crash.py")
    assert result.status == "failed" and result.exit_code == 1
    stage = result.stage(result.failed_stage)
    assert stage.status == "crashed" and "SIGSEGV" in stage.message


def _leftover(marker: str) -> list[str]:
    out = subprocess.run(
        ["ps", "-eo", "pid,args"], capture_output=True, text=True, check=False
    ).stdout
    return [line for line in out.splitlines() if marker in line and "ps -eo" not in line]


def test_hanging_candidate_is_killed_at_its_limit_with_everything_it_started(
    cpu_evaluator, axpy, candidates
):
    limits = Limits(compile_s=3, correctness_s=3, performance_s=3)
    start = time.monotonic()
    result = cpu_evaluator.evaluate(axpy, candidates / "axpy_hang.py", limits=limits)
    assert time.monotonic() - start < 30
    assert result.status == "failed"
    assert result.stage(result.failed_stage).status == "timeout"
    time.sleep(0.5)
    assert _leftover("arena-hang-child") == []


def test_candidate_without_run_is_bad_input(candidates):
    with pytest.raises(BadCandidate, match="defines no `run`"):
        check_candidate(candidates / "axpy_no_run.py")
    with pytest.raises(BadCandidate, match="does not exist"):
        check_candidate(candidates / "missing.py")
    assert len(check_candidate(candidates / "axpy_torch.py")) == 64


def test_the_same_seed_gives_the_same_hidden_workloads(cpu_evaluator, axpy, candidates):
    a = cpu_evaluator.evaluate(axpy, candidates / "axpy_torch.py", seed=11)
    b = cpu_evaluator.evaluate(axpy, candidates / "axpy_torch.py", seed=11)
    labels = lambda r: [w["label"] for w in r.stage("generalization").workloads]
    assert labels(a) == labels(b)
