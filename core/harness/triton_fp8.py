"""Correct float -> fp8 casts in Triton's interpreter. Enabled by triton_cpu.enable_interpreter.

Triton 3.6.0's interpreter converts float32 to float8 bit by bit and drops the carry of its
rounding: a value whose mantissa rounds up past the binade's edge loses its exponent's step
(7.95 becomes 4.0, 127 becomes 64), and it neither rounds ties to even nor saturates. Production
fp8 kernels (vLLM's and SGLang's per-token-group quantization, DeepGEMM's casts) store
`y.to(tl.float8e4nv)`, which a GPU computes with one saturating round-to-nearest-even
instruction (cvt.rn.satfinite), so on this machine they were wrong at about 2% of their
elements. The cast now goes through torch's own conversion, which rounds to nearest even and
saturates at the format's largest finite value, as the GPU does. Imports only numpy, torch and
triton: the harness is shipped alone.
"""

from __future__ import annotations

import numpy as np

_MARK = "_triton_cpu_patched"


def _fix_fp8_casts() -> None:
    import torch
    import triton.language as tl
    from triton.runtime import interpreter as itp

    builder = itp.InterpreterBuilder
    original = builder.create_fp_to_fp
    if getattr(original, _MARK, False):
        return
    targets = {tl.float8e4nv: torch.float8_e4m3fn, tl.float8e5: torch.float8_e5m2}
    sources = {tl.float32, tl.float16, tl.bfloat16}

    def create_fp_to_fp(self, src, dst_type, rounding_mode):  # type: ignore[no-untyped-def]
        dst, kind = dst_type.scalar, src.dtype.scalar
        if dst not in targets or kind not in sources:
            return original(self, src, dst_type, rounding_mode)
        data = np.asarray(src.data)
        if kind == tl.bfloat16:  # kept as uint16 bit patterns
            values = (data.astype(np.uint32) << 16).view(np.float32)
        else:
            values = data.astype(np.float32)
        fp8 = torch.from_numpy(np.ascontiguousarray(values)).to(targets[dst])
        out = fp8.view(torch.uint8).numpy().reshape(data.shape)
        return itp.TensorHandle(out, dst)

    create_fp_to_fp.__dict__[_MARK] = True
    builder.create_fp_to_fp = create_fp_to_fp
