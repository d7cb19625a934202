"""The GEMM family's tasks and what makes each special: fp8 inputs that are truly block-
quantized and a check that needs every scale right; ragged groups with empty and hot
experts in torch._grouped_mm's offs convention; DeepGEMM's padded contiguous layout whose
padding rows are free; decode GEMMs that stay at M <= 64."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from core.tasks.spec import load_task
from tests.task_files import task_file, task_inputs

GEMM = Path(__file__).resolve().parents[2] / "tasks" / "gemm"
TASKS = [
    "bf16_gemm",
    "fp8_blockscale_gemm",
    "bf16_grouped_gemm",
    "fp8_blockscale_grouped_gemm",
    "small_m_gemm",
]


def _module(task: str, name: str):
    return task_file(GEMM / task, name)


def _inputs(task: str, seed: int = 0, **axes):
    return task_inputs(GEMM / task, axes, seed)


pytestmark = pytest.mark.usefixtures("triton_interpreter")


@pytest.mark.parametrize("task", TASKS)
def test_task_loads_with_model_workloads(task):
    t = load_task(GEMM / task)
    assert t.model_workloads
    assert all(
        len(v) <= 3 for s in t.model_workloads for v in s.axes.values() if isinstance(v, tuple)
    )


# --- fp8_blockscale_gemm ------------------------------------------------------------------


def test_fp8_inputs_are_block_quantized():
    a, a_scale, b, b_scale = _inputs("fp8_blockscale_gemm", M=5, N=200, K=320)
    assert (
        a.dtype == b.dtype == torch.float8_e4m3fn
        and a_scale.dtype == b_scale.dtype == torch.float32
    )
    assert a_scale.shape == (5, 3) and b_scale.shape == (2, 3)  # partial last blocks: ceil(./128)
    # scale = block absmax / 448: the largest |q| of every block is the e4m3 maximum, 448
    a_pad = torch.nn.functional.pad(a.float(), (0, 3 * 128 - 320)).view(5, 3, 128)
    assert torch.equal(a_pad.abs().amax(-1), torch.full((5, 3), 448.0))
    b_pad = torch.nn.functional.pad(b.float(), (0, 3 * 128 - 320, 0, 256 - 200)).view(
        2, 128, 3, 128
    )
    assert torch.equal(b_pad.abs().amax(dim=(1, 3)), torch.full((2, 3), 448.0))
    assert a_scale.std() / a_scale.mean() > 0.3  # per-block gains: the scales differ, each matters


def test_fp8_check_needs_every_scale_and_row():
    check, ref = (
        _module("fp8_blockscale_gemm", "check").check,
        _module("fp8_blockscale_gemm", "reference").run,
    )
    x = _inputs("fp8_blockscale_gemm", M=37, N=200, K=320)
    r = ref(*x)
    assert check([r.bfloat16()], [r], x)["y"]["passed"]
    assert check([_module("fp8_blockscale_gemm", "baseline").run(*x)], [r], x)["y"][
        "passed"
    ]  # bf16 dequantize composition
    assert check([_module("fp8_blockscale_gemm", "starter").run(*x)], [r], x)["y"]["passed"]
    assert not check([torch.zeros_like(r, dtype=torch.bfloat16)], [r], x)["y"]["passed"]
    assert not check([torch.full_like(r, float(r.mean()), dtype=torch.bfloat16)], [r], x)["y"][
        "passed"
    ]
    for i, factor in (
        (1, 1.25),
        (3, 1.25),
    ):  # one wrong block scale of a, then of b (its last, partial block)
        wrong = list(x)
        wrong[i] = x[i].clone()
        wrong[i][-1, -1] *= factor
        assert not check([ref(*wrong).bfloat16()], [r], x)["y"]["passed"]
    big = _inputs("fp8_blockscale_gemm", M=4096, N=128, K=256)
    rb = ref(*big)
    one_row = rb.bfloat16().clone()
    one_row[-1] = 0  # one wrong row of 4096 moves the global diff by ~2.4e-4 only
    verdict = check([one_row], [rb], big)["y"]
    assert verdict["diff"] < 1e-3 and not verdict["passed"] and "elementwise" in verdict["message"]


# --- bf16_grouped_gemm --------------------------------------------------------------------


def test_grouped_offsets_follow_grouped_mm_with_empty_and_hot_groups():
    a, b, offs = _inputs("bf16_grouped_gemm", M=2000, E=16, N=64, K=32, S=50)
    assert offs.dtype == torch.int32 and offs.shape == (16,) and int(offs[-1]) == 2000
    sizes = torch.diff(offs, prepend=offs.new_zeros(1))
    assert (sizes == 0).sum() == 16 // 8  # exactly E // 8 empty groups when M is large
    assert sizes.max() > 0.5 * 2000  # S = 50: the hot expert takes most rows
    uniform = torch.diff(
        _inputs("bf16_grouped_gemm", M=2000, E=16, N=64, K=32, S=1)[2], prepend=offs.new_zeros(1)
    )
    assert uniform.max() < 0.2 * 2000
    few = torch.diff(
        _inputs("bf16_grouped_gemm", M=5, E=16, N=64, K=32, S=1)[2], prepend=offs.new_zeros(1)
    )
    assert (few > 0).sum() == 5  # M < E: only M groups used
    ref = _module("bf16_grouped_gemm", "reference").run(a, b, offs)
    torch.testing.assert_close(
        torch._grouped_mm(a, b.transpose(-2, -1), offs=offs).float(), ref, atol=1e-2, rtol=1e-2
    )


def test_grouped_starter_handles_empty_groups():
    x = _inputs("bf16_grouped_gemm", M=5, E=16, N=80, K=72, S=20)
    ref = _module("bf16_grouped_gemm", "reference").run(*x)
    y = _module("bf16_grouped_gemm", "starter").run(*x)
    torch.testing.assert_close(y.float(), ref, atol=1e-2, rtol=1e-2)


# --- fp8_blockscale_grouped_gemm ----------------------------------------------------------


def test_contiguous_layout_contract():
    a, a_scale, b, b_scale, m = _inputs(
        "fp8_blockscale_grouped_gemm", B=40, E=32, N=128, K=256, S=1
    )
    assert a.shape == (40 * 128, 256) and m.dtype == torch.int32 and b_scale.shape == (32, 1, 2)
    blocks = m.view(40, 128)
    assert (blocks[:, 0] >= 0).all()  # the first row of every block is real
    for row in blocks:  # one expert per block, padding only at a block's end
        real = row[row >= 0]
        assert (real == row[0]).all() and (row[: len(real)] >= 0).all()
    experts = blocks[:, 0]
    changes = torch.nonzero(torch.diff(experts)).numel() + 1
    assert (
        changes == len(torch.unique(experts)) == min(40, 32 - 32 // 8)
    )  # segments are contiguous; some experts empty
    seg_end = torch.cat([torch.diff(experts) != 0, torch.tensor([True])])
    assert (blocks[~seg_end] >= 0).all()  # only a segment's last block may hold padding


def test_grouped_fp8_check_ignores_padding_but_not_wrong_experts():
    task = "fp8_blockscale_grouped_gemm"
    check, ref = _module(task, "check").check, _module(task, "reference").run
    x = _inputs(task, B=2, E=16, N=96, K=1000, S=50)
    r = ref(*x)
    pad = x[4] < 0
    assert pad.any()
    garbage = r.bfloat16().clone()
    garbage[pad] = 1e4
    assert check([garbage], [r], x)["out"]["passed"]  # padding rows are free
    assert check([_module(task, "baseline").run(*x)], [r], x)["out"]["passed"]
    assert check([_module(task, "starter").run(*x)], [r], x)["out"]["passed"]
    assert not check([torch.zeros_like(r, dtype=torch.bfloat16)], [r], x)["out"]["passed"]
    swapped = list(x)
    m = x[4].clone()
    first = int(m[0])
    m[m == first] = (first + 1) % 16  # the first segment computed with another expert's weight
    swapped[4] = m
    assert not check([ref(*swapped).bfloat16()], [r], x)["out"]["passed"]


# --- small_m_gemm -------------------------------------------------------------------------


def test_small_m_stays_decode_sized_and_bytes_bound():
    t = load_task(GEMM / "small_m_gemm")
    workloads = list(t.gpu.visible) + list(t.gpu.hidden.fixed)
    assert all(w.axes["M"] <= 64 for w in workloads)
    assert t.gpu.hidden.draw.ranges["M"][1] <= 64 and t.cpu.hidden.draw.ranges["M"][1] <= 64
    for w in workloads:  # on an H200 (989 TFLOP/s bf16, 4.8 TB/s) the bytes bound every shape
        assert t.bytes_for(w) / 4.8e12 > t.flops_for(w) / 989e12
