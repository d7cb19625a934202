"""Every bundled task works end to end on the CPU device: its starter (portable Triton, run in
the interpreter with the bf16 correction) and its baseline pass every stage, and a bf16 GEMM
that is subtly wrong does not."""

from __future__ import annotations

import pytest

from core.tasks import discover

TASKS = discover()


@pytest.mark.parametrize("task", TASKS, ids=[t.id for t in TASKS])
@pytest.mark.parametrize("role", ["starter", "baseline"])
def test_bundled_candidates_pass_on_the_cpu_device(cpu_evaluator, task, role):
    result = cpu_evaluator.evaluate(task, task.file(f"{role}.py"))
    assert result.status == "passed", [(s.name, s.status, s.message) for s in result.stages]
    # Zero false alarms: no integrity flag, not even a review note (docs/integrity.md).
    assert result.integrity_flags == [] and result.review_notes == [], (result.integrity_flags, result.review_notes)
    assert result.timing_kind == "cpu" and result.sol_fraction is None
    assert len(result.workloads) == len(task.cpu.visible) + len(task.cpu.hidden.fixed)


def test_a_gemm_that_drops_the_last_k_block_fails_on_the_cpu_device(cpu_evaluator, tmp_path):
    task = next(t for t in TASKS if t.id == "gemm/bf16_gemm")
    wrong = tmp_path / "solution.py"
    # Drops the last partial tile of K: right whenever K is a multiple of 32, wrong otherwise.
    wrong.write_text(task.file("starter.py").read_text().replace("range(0, K, BLOCK_K)", "range(0, K - BLOCK_K + 1, BLOCK_K)"))
    assert wrong.read_text() != task.file("starter.py").read_text(), "the starter's K loop changed; update this test"
    result = cpu_evaluator.evaluate(task, wrong)
    assert result.stage("correctness").status == "passed", "the visible CPU workloads have K = 128 and 256"
    assert result.failed_stage == "generalization"
