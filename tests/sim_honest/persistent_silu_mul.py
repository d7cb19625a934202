"""Honest: a persistent silu_mul written for a GPU, as the Triton tutorial's persistent matmul
sizes its grid: one program per SM, asked of torch (`multi_processor_count`), each walking the
rows with a stride of the program count. On a `sim:` device torch answers with the simulated
GPU's figures (core/harness/sim/gpu_queries.py); on the CPU device it cannot be evaluated."""

import torch
import triton
import triton.language as tl


@triton.jit
def _silu_mul_rows(
    x_ptr, out_ptr, T, I, stride_xt, stride_out, PROGRAMS: tl.constexpr, BLOCK: tl.constexpr
):
    for row in range(tl.program_id(0), T, PROGRAMS):
        for start in range(0, I, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            mask = cols < I
            gate = tl.load(x_ptr + row * stride_xt + cols, mask=mask, other=0.0).to(tl.float32)
            up = tl.load(x_ptr + row * stride_xt + I + cols, mask=mask, other=0.0).to(tl.float32)
            out = gate / (1.0 + tl.exp(-gate)) * up
            tl.store(out_ptr + row * stride_out + cols, out.to(out_ptr.dtype.element_ty), mask=mask)


def run(x: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    T, inter = x.shape[0], x.shape[1] // 2
    out = torch.empty((T, inter), device=x.device, dtype=x.dtype)
    programs = torch.cuda.get_device_properties(x.device).multi_processor_count
    _silu_mul_rows[(programs,)](
        x, out, T, inter, x.stride(0), out.stride(0), PROGRAMS=programs, BLOCK=1024
    )
    return out
