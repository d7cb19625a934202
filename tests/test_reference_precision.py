"""The trusted worker computes the reference in full float32 and times the baseline with
PyTorch's defaults, as the candidate's worker runs: TF32 is off only inside reference calls."""

import torch

from core.harness.workers import full_fp32


def _flags() -> tuple[bool, bool]:
    return torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32


def test_the_reference_runs_without_tf32_and_everything_else_keeps_the_defaults():
    before = _flags()
    assert full_fp32(_flags)() == (False, False)
    assert (
        _flags() == before
    )  # the baseline, timed in the same worker, sees what the candidate sees


def test_the_flags_come_back_when_the_reference_raises():
    before = _flags()

    def broken() -> None:
        raise ValueError("a reference that fails")

    try:
        full_fp32(broken)()
    except ValueError:
        pass
    assert _flags() == before
