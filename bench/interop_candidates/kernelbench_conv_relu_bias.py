"""KernelBench level 2 problem 1 (kernelbench/l2_001_conv2d_relu_biasadd), written for
bench/interop_gpu.py: cuDNN's convolution (with its own bias), then the ReLU and the second bias
fused in one Triton pass instead of two eager ones."""

import torch
import triton
import triton.language as tl


@triton.jit
def _relu_bias(y_ptr, bias_ptr, n, hw, channels, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    c = (offs // hw) % channels
    y = tl.load(y_ptr + offs, mask=mask)
    b = tl.load(bias_ptr + c, mask=mask)
    tl.store(y_ptr + offs, tl.maximum(y, 0.0) + b, mask=mask)


def run(x, bias, conv_weight, conv_bias):
    y = torch.nn.functional.conv2d(x, conv_weight, conv_bias).contiguous()
    n, channels, h, w = y.shape
    _relu_bias[(triton.cdiv(y.numel(), 2048),)](
        y, bias.contiguous(), y.numel(), h * w, channels, BLOCK=2048
    )
    return y
