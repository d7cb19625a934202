"""A task may judge its outputs with its own check.py (order-free top-k ids, sampling by
distribution, fp8 by a global error) instead of the elementwise rule. These tests use a copy of
the axpy fixture whose check accepts the rows of `y` in any order."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from core.harness import checking
from core.tasks.spec import load_task

ROW_ORDER_FREE = """
import torch
from core.harness.compare import compare


def check(outputs, expected, inputs):
    got, want = outputs[0], expected[0]
    # Rows may come in any order: compare the rows sorted by their first element.
    got = got[torch.argsort(got[:, 0])]
    want = want[torch.argsort(want[:, 0])]
    return {"y": compare(got, want, 1e-5, 1e-5, 1.0)}
"""

REVERSED_ROWS = """
import torch


def run(x, b):
    return torch.flip(2 * x + b, dims=[0])
"""


@pytest.fixture()
def order_free_axpy(tmp_path: Path, fixture_tasks: Path):
    folder = tmp_path / "elementwise" / "axpy"
    shutil.copytree(fixture_tasks / "elementwise" / "axpy", folder)
    (folder / "check.py").write_text(ROW_ORDER_FREE)
    return load_task(folder)


def test_a_task_check_accepts_what_the_elementwise_rule_would_reject(
    cpu_evaluator, order_free_axpy, tmp_path: Path
):
    candidate = tmp_path / "reversed.py"
    candidate.write_text(REVERSED_ROWS)
    result = cpu_evaluator.evaluate(order_free_axpy, candidate, seed=7)
    assert result.status == "passed", result.to_json()


def test_a_task_check_still_rejects_wrong_values_with_its_message(
    cpu_evaluator, order_free_axpy, candidates: Path
):
    result = cpu_evaluator.evaluate(order_free_axpy, candidates / "axpy_wrong.py", seed=7)
    assert result.failed_stage == "correctness"
    assert "outside atol" in result.stage("correctness").message


def test_without_check_py_the_elementwise_rule_judges():
    rule = {"atol": 1e-3, "rtol": 0.0, "min_match": 1.0}
    specs = [{"name": "y"}]
    verdict = checking.judge(specs, [torch.ones(3)], [torch.ones(3) + 1e-4], [], rule, None)
    assert verdict["y"]["passed"]
    verdict = checking.judge(specs, [torch.ones(3)], [torch.ones(3) + 1e-2], [], rule, None)
    assert not verdict["y"]["passed"]


def test_a_check_that_forgets_an_output_is_the_tasks_fault_not_the_candidates():
    with pytest.raises(checking.CheckError, match="one verdict per declared output"):
        checking.judge(
            [{"name": "y"}, {"name": "z"}],
            [torch.ones(1)] * 2,
            [torch.ones(1)] * 2,
            [],
            {},
            lambda o, e, i: {"y": {"passed": True}},
        )


@pytest.mark.parametrize("n", [1, 2, 4097, 14_680_064])
def test_the_input_independence_sample_stays_inside_large_outputs(n: int):
    # A float32 linspace of indices rounded past the end on an H200 for 512 x 28672 outputs
    # (a device-side assert that failed every honest GEMM); the indices are integer now.
    from core.harness.workers import INDEPENDENT_SAMPLE, _sample

    sample = _sample(torch.arange(n, dtype=torch.float64))
    assert sample.numel() == min(n, INDEPENDENT_SAMPLE)
    assert sample[0] == 0 and sample[-1] == n - 1


def test_a_rule_that_tolerates_outliers_tolerates_at_least_one():
    """min_match 0.999 on 640 elements (fused_moe's CPU size) allows one outlier, not none;
    min_match 1.0 still allows none, and two outliers out of 640 still fail."""
    from core.harness.compare import compare

    want = torch.linspace(-4, 4, 640)
    one, two = want.clone(), want.clone()
    one[7] += 1.0
    two[7] += 1.0
    two[9] += 1.0
    assert compare(one, want, 1e-3, 0.0, 0.999)["passed"]
    assert not compare(one, want, 1e-3, 0.0, 1.0)["passed"]
    assert not compare(two, want, 1e-3, 0.0, 0.999)["passed"]
    assert compare(two, want, 1e-3, 0.0, 0.99)["passed"]  # 6.4 elements allowed


def test_an_outputs_fingerprint_changes_with_any_byte_and_only_with_its_bytes(monkeypatch):
    """Input independence compares fingerprints of outputs across seeds: computed where the
    output lies (a keyed checksum on a GPU, BLAKE2b on the host), never by copying it out."""
    from core.harness import trusted_checks
    from core.harness.trusted_checks import fingerprint, keyed_checksum

    monkeypatch.setattr(trusted_checks, "FINGERPRINT_CHUNK", 1000)  # several chunks below
    out = torch.randn(37, 129).to(torch.bfloat16)
    raw = out.reshape(-1).view(torch.uint8)
    assert keyed_checksum(raw) == keyed_checksum(raw.clone())
    assert fingerprint(out) == fingerprint(out.clone())
    for flat_index in (0, 999, 1000, out.numel() - 1):  # each side of a chunk's edge
        changed = out.clone()
        changed.view(torch.int16).view(-1)[flat_index] ^= 1  # one bit
        assert keyed_checksum(changed.reshape(-1).view(torch.uint8)) != keyed_checksum(raw)
        assert fingerprint(changed) != fingerprint(out)
    swapped = out.clone().reshape(-1)
    swapped[[0, 1]] = swapped[[1, 0]]  # the same bytes, elsewhere: a plain sum would agree
    if not torch.equal(swapped[:2], out.reshape(-1)[:2]):
        assert keyed_checksum(swapped.view(torch.uint8)) != keyed_checksum(raw)
    odd = torch.arange(3, dtype=torch.uint8)  # not a whole number of 32-bit words
    assert keyed_checksum(odd) == keyed_checksum(odd.clone()) != keyed_checksum(odd + 1)
    assert fingerprint(out.float()) != fingerprint(out)  # the dtype is part of it
