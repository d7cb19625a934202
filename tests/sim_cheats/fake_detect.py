"""Cheat: tell the counting pass from a real run. Handed fake tensors (the pass that counts a
pure-PyTorch candidate for free), it returns zeros (written, so the unwritten-output check is
satisfied) and is counted for that one fill; on real tensors it runs the real kernel, so every
correctness check passes.
Defense: a call whose fake pass is cheap is counted again on GPU-sized CPU tensors, and that run
is the one billed; a real run that launched kernels the fake pass did not is the proof that the
candidate tells the passes apart (`sim_fake_pass_differs`). fake_detect_sampling.py tests the
impossibility floor behind it."""

import torch
import triton
import triton.language as tl


@triton.jit
def _silu_mul(x_ptr, out_ptr, I, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < I
    gate = tl.load(x_ptr + row * 2 * I + cols, mask=mask, other=0.0).to(tl.float32)
    up = tl.load(x_ptr + row * 2 * I + I + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(
        out_ptr + row * I + cols, (gate / (1.0 + tl.exp(-gate)) * up).to(tl.bfloat16), mask=mask
    )


def run(x):
    T, inter = x.shape[0], x.shape[1] // 2
    if type(x).__name__ == "FakeTensor":
        return torch.zeros((T, inter), dtype=x.dtype)
    x = x.contiguous()
    out = torch.empty((T, inter), device=x.device, dtype=x.dtype)
    _silu_mul[(T, triton.cdiv(inter, 1024))](x, out, inter, BLOCK=1024)
    return out
