"""The CPU device (and a `sim:` device's correctness stages) runs what the GPU runs: production
Triton code written the way Liger and FlagGems write it passes, and a kernel that the
interpreter truly cannot run is reported as "cannot evaluate on this device" (an
infrastructure outcome, exit 3), never as a wrong answer."""

from __future__ import annotations

import pytest

from core.evaluation.evaluator import Evaluator
from core.model.result import EXIT_INFRASTRUCTURE
from core.tasks.discovery import find_task

KERNEL = """
import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice


@triton.autotune(configs=[triton.Config({{}}, num_warps=4), triton.Config({{}}, num_warps=8)], key=["H"], warmup=5, rep=20)
@triton.jit
def _kernel(x_ptr, res_ptr, w_ptr, out_ptr, res_out_ptr, H, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < H
    summed = (tl.load(x_ptr + row * H + cols, mask=mask, other=0.0).to(tl.float32)
              + tl.load(res_ptr + row * H + cols, mask=mask, other=0.0).to(tl.float32)).to(tl.bfloat16)
    tl.store(res_out_ptr + row * H + cols, summed, mask=mask)
    r = summed.to(tl.float32)
    rstd = {rstd}
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * H + cols, (r * rstd * w).to(tl.bfloat16), mask=mask)


def run(x, residual, weight, eps):
    T, H = x.shape
    out, res_out = torch.empty_like(x), torch.empty_like(residual)
    _kernel[(T,)](x.contiguous(), residual.contiguous(), weight, out, res_out, H, eps, BLOCK=triton.next_power_of_2(H))
    return out, res_out
"""
# Liger's RMSNorm idiom: libdevice.rsqrt of a sum plus the float argument eps, cast with .to()
LIGER_STYLE = KERNEL.format(rstd="libdevice.rsqrt(tl.sum(r * r, axis=0) / H + eps.to(tl.float32))")
# a libdevice function with no CPU implementation (a Bessel function) where the GPU has one
NOT_ON_CPU = KERNEL.format(rstd="libdevice.j0(tl.sum(r * r, axis=0) / H + eps)")


@pytest.fixture(scope="module")
def cpu():
    with Evaluator("cpu") as evaluator:
        yield evaluator


def test_liger_style_triton_passes_on_the_cpu_device(cpu, tmp_path):
    task = find_task("norm/add_rmsnorm")
    path = tmp_path / "liger_style.py"
    path.write_text(LIGER_STYLE)
    result = cpu.evaluate(task, path, performance=False)
    assert result.status == "passed", [s.message for s in result.stages if s.message]


def test_a_kernel_the_interpreter_cannot_run_is_not_a_wrong_answer(cpu, tmp_path):
    task = find_task("norm/add_rmsnorm")
    path = tmp_path / "not_on_cpu.py"
    path.write_text(NOT_ON_CPU)
    result = cpu.evaluate(task, path, performance=False)
    assert result.status == "infrastructure_error" and result.exit_code == EXIT_INFRASTRUCTURE
    messages = " ".join(s.message or "" for s in result.stages)
    assert (
        "cannot evaluate on this device: triton.language.extra.libdevice.j0 has no CPU implementation"
        in messages
    )
    assert "wrong" not in messages
