"""A bundled task's subtle bug is caught on the CPU device: a bf16 GEMM that drops the last
partial K block passes the visible workloads and fails the hidden ones.

That every bundled task's starter and baseline pass every stage with no flag and no review
note is `arena tasks validate`'s check, run on each task by tests/test_validate.py."""

from __future__ import annotations

from core.tasks.discovery import discover

TASKS = discover()


def test_a_gemm_that_drops_the_last_k_block_fails_on_the_cpu_device(cpu_evaluator, tmp_path):
    task = next(t for t in TASKS if t.id == "gemm/bf16_gemm")
    wrong = tmp_path / "solution.py"
    # Drops the last partial tile of K: right whenever K is a multiple of 32, wrong otherwise.
    wrong.write_text(
        task.file("starter.py")
        .read_text()
        .replace("range(0, K, BLOCK_K)", "range(0, K - BLOCK_K + 1, BLOCK_K)")
    )
    assert wrong.read_text() != task.file("starter.py").read_text(), (
        "the starter's K loop changed; update this test"
    )
    result = cpu_evaluator.evaluate(task, wrong)
    assert result.stage("correctness").status == "passed", (
        "the visible CPU workloads have K = 128 and 256"
    )
    assert result.failed_stage == "generalization"
