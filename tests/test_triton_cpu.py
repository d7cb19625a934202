"""Triton kernels on CPU tensors through the interpreter, with bf16 computed as on a GPU.

Out of the box, Triton 3.6.0's interpreter does numpy arithmetic on bf16's raw uint16 bit
patterns (triton-lang/triton#11584, #11604) and truncates fp32 -> bf16. `enable_interpreter()`
fixes both; these tests hold it to torch's CPU bf16 results."""

from __future__ import annotations

import contextlib
import functools
import os

import numpy as np
import pytest
import torch
import triton
import triton.language as tl
from triton.runtime import interpreter

from core.harness.triton_cpu import enable_interpreter

_UNSET = object()


@contextlib.contextmanager
def interpreter_on():
    """enable_interpreter() for a while: the switch is process-wide, and the other test modules
    (and the harness processes they spawn) must not inherit it."""
    env = os.environ.get("TRITON_INTERPRET")
    pinned = triton.knobs.runtime.__dict__.get("interpret", _UNSET)
    enable_interpreter()
    try:
        yield
    finally:
        if pinned is _UNSET:
            del triton.knobs.runtime.interpret
        else:
            triton.knobs.runtime.interpret = pinned
        if env is None:
            os.environ.pop("TRITON_INTERPRET", None)
        else:
            os.environ["TRITON_INTERPRET"] = env


@pytest.fixture(autouse=True, scope="module")
def _interpreter():
    with interpreter_on():
        yield


# triton (and tl.sum, tl.max, ... with it) is imported above, before the interpreter is on: the
# same order as the harness's warm parent, which imports triton and forks the candidate worker.
with interpreter_on():

    @triton.jit
    def add_mul_kernel(x_ptr, y_ptr, sum_ptr, prod_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask)
        y = tl.load(y_ptr + offs, mask=mask)
        tl.store(sum_ptr + offs, x + y, mask=mask)
        tl.store(prod_ptr + offs, x * y, mask=mask)

    @triton.jit
    def cast_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask)
        tl.store(out_ptr + offs, x.to(out_ptr.dtype.element_ty), mask=mask)

    @triton.jit
    def matmul_kernel(
        x_ptr,
        w_ptr,
        y_ptr,
        M,
        N,
        K,
        BLOCK_M: tl.constexpr,
        BLOCK_N: tl.constexpr,
        BLOCK_K: tl.constexpr,
    ):
        # y = x @ w.T with x [M, K], w [N, K], all contiguous
        rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
        rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k0 in range(0, K, BLOCK_K):
            rk = k0 + tl.arange(0, BLOCK_K)
            x_mask = (rm[:, None] < M) & (rk[None, :] < K)
            w_mask = (rn[:, None] < N) & (rk[None, :] < K)
            x = tl.load(x_ptr + rm[:, None] * K + rk[None, :], mask=x_mask, other=0.0)
            w = tl.load(w_ptr + rn[:, None] * K + rk[None, :], mask=w_mask, other=0.0)
            acc += tl.dot(x, tl.trans(w))
        y_mask = (rm[:, None] < M) & (rn[None, :] < N)
        tl.store(y_ptr + rm[:, None] * N + rn[None, :], acc.to(tl.bfloat16), mask=y_mask)

    @triton.jit
    def row_sum_kernel(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        cols = tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=0.0)
        tl.store(out_ptr + row, tl.sum(x, axis=0))

    @triton.jit
    def to_bf16_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask).to(tl.bfloat16), mask=mask)

    @triton.jit
    def rmsnorm_kernel(x_ptr, w_ptr, y_ptr, n_cols, eps, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        cols = tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / n_cols + eps)
        tl.store(y_ptr + row * n_cols + cols, (x * rstd * w).to(tl.bfloat16), mask=mask)

    @triton.jit
    def half_dot_kernel(a_ptr, b_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
        rm, rn, rk = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
        a = tl.load(a_ptr + rm[:, None] * K + rk[None, :]).to(tl.float16)
        b = tl.load(b_ptr + rk[:, None] * N + rn[None, :]).to(tl.float16)
        tl.store(c_ptr + rm[:, None] * N + rn[None, :], tl.dot(a, b))

    @triton.jit
    def _scaled(x, scale):
        return x * scale

    @triton.jit
    def helper_loop_kernel(x_ptr, out_ptr, n, STEPS: tl.constexpr, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        acc = tl.zeros((BLOCK,), dtype=tl.float32)
        for i in range(STEPS):
            acc += _scaled(tl.load(x_ptr + offs, mask=mask, other=0.0), i + 1.0)
        tl.store(out_ptr + offs, acc, mask=mask)

    @triton.autotune(
        configs=[triton.Config({"BLOCK": 32}), triton.Config({"BLOCK": 64})], key=["n"]
    )
    @triton.jit
    def autotuned_add_one_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + 1.0, mask=mask)

    # Production constructs (Liger's RMSNorm and SwiGLU, FlagGems' matmul) that the GPU runs and the
    # interpreter used to refuse: a float argument's `.to()`, libdevice math, autotune(warmup=, rep=).
    from triton.language.extra import libdevice

    @triton.jit
    def scalar_to_kernel(x_ptr, out_ptr, n, eps, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs, mask=offs < n)
        tl.store(out_ptr + offs, x + eps.to(tl.float32), mask=offs < n)

    @triton.jit
    def libdevice_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs, mask=offs < n, other=1.0).to(tl.float32)
        y = (
            libdevice.rsqrt(x)
            + libdevice.tanh(x) * libdevice.pow(x, 2.0)
            + libdevice.erf(x)
            + libdevice.fast_expf(-x)
        )
        tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=offs < n)

    @triton.jit
    def libdevice_unmapped_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(out_ptr + offs, libdevice.j0(tl.load(x_ptr + offs, mask=offs < n)), mask=offs < n)

    @triton.autotune(
        configs=[triton.Config({"BLOCK": 32}), triton.Config({"BLOCK": 64})],
        key=["n"],
        warmup=5,
        rep=20,
    )
    @triton.jit
    def autotuned_with_bench_settings_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2.0, mask=offs < n)


def _matmul(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    (M, K), (N, _) = x.shape, w.shape
    y = torch.empty(M, N, dtype=torch.bfloat16)
    grid = (triton.cdiv(M, 16), triton.cdiv(N, 32))
    matmul_kernel[grid](x, w, y, M, N, K, BLOCK_M=16, BLOCK_N=32, BLOCK_K=32)
    return y


def test_kernels_run_in_the_interpreter_with_the_bf16_fix_installed_once():
    assert isinstance(add_mul_kernel, interpreter.InterpretedFunction)
    enable_interpreter()  # idempotent: a second call wraps nothing twice
    for name in ("binary_op", "create_dot", "cast_impl"):
        method = getattr(interpreter.InterpreterBuilder, name)
        assert getattr(method, "_triton_cpu_patched", False), name
        assert not getattr(method.__wrapped__, "_triton_cpu_patched", False), name


def test_a_helper_called_inside_a_kernel_does_not_patch_the_language_again(monkeypatch):
    patched: list[str] = []
    original = interpreter._patch_lang.__wrapped__  # Triton's own, under triton_cpu's wrapper
    monkeypatch.setattr(
        interpreter,
        "_patch_lang",
        _once_per_launch(lambda fn: patched.append(fn.__name__) or original(fn)),
    )
    x = torch.randn(100)
    out = torch.empty(100)
    helper_loop_kernel[(4,)](x, out, 100, STEPS=5, BLOCK=32)
    torch.testing.assert_close(out, x * 15.0)
    # Neither the kernel's own helper nor Triton's tl.zeros (whose module sees tl.core, which the
    # launch patches too) patches again.
    assert patched == ["helper_loop_kernel"], "the launch patched once; the 20 helper calls did not"
    helper_loop_kernel[(1,)](x, out, 100, STEPS=1, BLOCK=32)
    assert patched == ["helper_loop_kernel"] * 2, "the next launch patches afresh"


def test_a_launch_leaves_both_language_modules_as_it_found_them():
    import triton.language as tl

    before = {module.__name__: dict(vars(module)) for module in (tl, tl.core, tl.math)}
    methods = dict(vars(tl.tensor))
    helper_loop_kernel[(4,)](torch.randn(100), torch.empty(100), 100, STEPS=2, BLOCK=32)
    for module in (tl, tl.core, tl.math):
        changed = [
            name
            for name, value in vars(module).items()
            if before[module.__name__].get(name) is not value
        ]
        assert not changed, f"{module.__name__} still patched after the launch: {changed[:5]}"
    assert [n for n, v in vars(tl.tensor).items() if methods.get(n) is not v] == []


def _once_per_launch(patch_lang):
    """triton_cpu's once-per-launch wrapper around `patch_lang` in place of Triton's own."""
    from core.harness import triton_cpu

    saved = interpreter._patch_lang
    interpreter._patch_lang = patch_lang
    try:
        triton_cpu._patch_language_once_per_launch()
        return interpreter._patch_lang
    finally:
        interpreter._patch_lang = saved


@pytest.mark.parametrize("dtype", [torch.float16, torch.float8_e4m3fn])
def test_an_fp16_or_fp8_dot_accumulates_in_fp32_like_torch(dtype):
    torch.manual_seed(0)
    a, b = torch.randn(64, 128).to(dtype), torch.randn(128, 32).to(dtype)
    c = torch.empty(64, 32)
    half_dot_kernel[(1,)](a, b, c, M=64, N=32, K=128)
    torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-5, atol=1e-4)


def test_numpy_dtypes_are_looked_up_with_the_interpreters_own_answers():
    original = interpreter._get_np_dtype.__wrapped__
    scalars = [
        v
        for v in vars(tl).values()
        if isinstance(v, tl.dtype) and not isinstance(v, (tl.pointer_type, tl.block_type))
    ]
    asked = [
        *scalars,
        tl.pointer_type(tl.float16),
        tl.block_type(tl.bfloat16, [8]),
        tl.block_type(tl.pointer_type(tl.int8), [2]),
    ]
    for ty in asked:
        try:
            expected = original(ty)
        except KeyError:
            with pytest.raises(KeyError):
                interpreter._get_np_dtype(ty)
            continue
        assert interpreter._get_np_dtype(ty) == expected, ty


def test_bf16_add_and_multiply_are_bit_exact():
    torch.manual_seed(0)
    n = 1000
    x, y = torch.randn(n, dtype=torch.bfloat16), torch.randn(n, dtype=torch.bfloat16)
    total, product = torch.empty_like(x), torch.empty_like(x)
    add_mul_kernel[(triton.cdiv(n, 256),)](x, y, total, product, n, BLOCK=256)
    assert torch.equal(total, x + y)
    assert torch.equal(product, x * y)


def test_masked_bf16_gemm_matches_fp32_reference():
    torch.manual_seed(0)
    M, N, K = 37, 50, 70  # none a multiple of the 16/32/32 blocks: every edge is masked
    x, w = torch.randn(M, K, dtype=torch.bfloat16), torch.randn(N, K, dtype=torch.bfloat16)
    expected = (x.float() @ w.float().T).to(torch.bfloat16)
    torch.testing.assert_close(_matmul(x, w), expected, atol=1e-2, rtol=1e-2)


def test_the_gemm_is_wrong_without_the_fix(monkeypatch):
    # The test above is not vacuous: Triton's own tl.dot multiplies the uint16 bit patterns.
    torch.manual_seed(0)
    x, w = torch.randn(37, 70, dtype=torch.bfloat16), torch.randn(50, 70, dtype=torch.bfloat16)
    builder = interpreter.InterpreterBuilder
    monkeypatch.setattr(builder, "create_dot", builder.create_dot.__wrapped__)
    error = (_matmul(x, w).float() - x.float() @ w.float().T).abs().max().item()
    assert error > 1e3


def test_bf16_row_sum_matches_fp32_accumulation():
    torch.manual_seed(0)
    rows, cols = 16, 100
    x = torch.randn(rows, cols, dtype=torch.bfloat16)
    out = torch.empty(rows, dtype=torch.bfloat16)
    row_sum_kernel[(rows,)](x, out, cols, BLOCK=128)
    # fp32 sums in a different order may round to a neighbouring bf16: allow one ulp (2**-7)
    torch.testing.assert_close(out, x.float().sum(dim=1).to(torch.bfloat16), atol=1e-5, rtol=2**-7)


def test_fp32_to_bf16_rounds_to_nearest_even_like_torch():
    torch.manual_seed(0)
    # exact ties (to even, both signs), one bit either side of a tie, the rounding that carries
    # into inf, subnormals
    bits = [
        0x3F808000,
        0x3F818000,
        0xBF808000,
        0xBF818000,
        0x3F807FFF,
        0x3F808001,
        0x7F7FFFFF,
        0x00018000,
    ]
    tricky = torch.from_numpy(np.array(bits, dtype=np.uint32).view(np.float32))
    special = torch.tensor([0.0, -0.0, float("inf"), -float("inf"), 1e-40, -3e38])
    x = torch.cat([torch.randn(4000) * 100, tricky, special])
    out = torch.empty(x.numel(), dtype=torch.bfloat16)
    to_bf16_kernel[(triton.cdiv(x.numel(), 512),)](x, out, x.numel(), BLOCK=512)
    assert torch.equal(out.view(torch.int16), x.to(torch.bfloat16).view(torch.int16))

    nan = torch.full((4,), float("nan"))
    out = torch.empty(4, dtype=torch.bfloat16)
    to_bf16_kernel[(1,)](nan, out, 4, BLOCK=4)
    assert out.isnan().all()


def test_bf16_rmsnorm_matches_torch():
    torch.manual_seed(0)
    rows, cols, eps = 19, 200, 1e-6
    x = torch.randn(rows, cols, dtype=torch.bfloat16)
    w = torch.randn(cols, dtype=torch.bfloat16)
    y = torch.empty_like(x)
    rmsnorm_kernel[(rows,)](x, w, y, cols, eps, BLOCK=256)
    xf = x.float()
    expected = (xf * torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps) * w.float()).to(
        torch.bfloat16
    )
    torch.testing.assert_close(y, expected, atol=1e-2, rtol=1e-2)


def test_autotune_needs_no_gpu_driver():
    x = torch.randn(100)
    out = torch.empty_like(x)
    autotuned_add_one_kernel[lambda meta: (triton.cdiv(100, meta["BLOCK"]),)](x, out, 100)
    assert torch.equal(out, x + 1)


def test_a_python_float_argument_is_an_fp32_scalar_with_to():
    x = torch.randn(100)
    out = torch.empty_like(x)
    scalar_to_kernel[(2,)](x, out, 100, 0.25, BLOCK=64)
    assert torch.equal(out, x + 0.25)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_libdevice_math_runs_on_numpy_like_torch(dtype):
    x = (torch.rand(300) + 0.1).to(dtype)
    out = torch.empty_like(x)
    libdevice_kernel[(triton.cdiv(300, 128),)](x, out, 300, BLOCK=128)
    xf = x.float()
    expected = torch.rsqrt(xf) + torch.tanh(xf) * xf.pow(2) + torch.erf(xf) + torch.exp(-xf)
    tol = 1e-5 if dtype == torch.float32 else 2e-2
    torch.testing.assert_close(out.float(), expected.to(dtype).float(), atol=tol, rtol=tol)


def test_a_libdevice_function_without_a_cpu_implementation_cannot_be_evaluated_here():
    from core.harness.triton_cpu import unsupported_reason

    x = torch.rand(64)
    with pytest.raises(Exception) as caught:
        libdevice_unmapped_kernel[(1,)](x, torch.empty_like(x), 64, BLOCK=64)
    assert "libdevice.j0 has no CPU implementation" in (unsupported_reason(caught.value) or "")
    assert unsupported_reason(ValueError("the kernel's own bug")) is None, (
        "a kernel's own failure is never an unsupported construct"
    )


def test_autotune_with_custom_benchmark_settings_needs_no_gpu_driver():
    x = torch.randn(100)
    out = torch.empty_like(x)
    autotuned_with_bench_settings_kernel[lambda meta: (triton.cdiv(100, meta["BLOCK"]),)](
        x, out, 100
    )
    assert torch.equal(out, x * 2)


@pytest.mark.parametrize("src", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("dst", [torch.float8_e4m3fn, torch.float8_e5m2])
def test_a_cast_to_fp8_rounds_to_nearest_even_and_saturates_like_the_gpu(src, dst):
    # Out of the box the interpreter drops the carry of its rounding at a binade's edge (7.95
    # became 4.0, 127 became 64) and neither rounds ties to even nor saturates; production fp8
    # quantization kernels store y.to(tl.float8e4nv), which a GPU rounds and saturates.
    edges = [7.95, 127.0, 15.9, 0.0, -3.3, 1e-4, 300.0, 447.0, 500.0, -1000.0, 2.0**-9]
    x = torch.cat([torch.tensor(edges), torch.randn(1000) * 50]).to(src)
    out = torch.empty(x.shape, dtype=dst)
    cast_kernel[(triton.cdiv(x.numel(), 256),)](x, out, x.numel(), BLOCK=256)
    finite = torch.finfo(dst).max
    assert torch.equal(out.float(), x.float().clamp(-finite, finite).to(dst).float())


IMPORTED_BEFORE = """
import sys
sys.path.insert(0, {root!r})
import torch, triton, triton.language as tl
from triton.language.extra.libdevice import rsqrt  # bound before the interpreter, as Liger does

@triton.jit
def kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, rsqrt(tl.load(x_ptr + offs, mask=offs < n)), mask=offs < n)

from core.harness.triton_cpu import enable_interpreter
enable_interpreter()
x = torch.rand(8) + 0.5
out = torch.empty_like(x)
kernel[(1,)](x, out, 8, BLOCK=8)
print(torch.allclose(out, torch.rsqrt(x), rtol=1e-5))
"""


def test_libdevice_names_bound_before_the_interpreter_still_compute() -> None:
    """A task library the harness preloads into every worker (preload.py) is imported before
    the CPU worker switches the interpreter on, so its `from ... libdevice import rsqrt` held
    the stub, which returned None there: Liger's fused add + RMSNorm, the add_rmsnorm baseline
    on `sim:` devices, failed with "cannot convert None ... to tensor"."""
    import subprocess
    import sys
    from pathlib import Path

    root = str(Path(__file__).resolve().parent.parent)
    out = subprocess.run(
        [sys.executable, "-c", IMPORTED_BEFORE.format(root=root)],
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.stdout.strip() == "True", out.stderr[-2000:]


with interpreter_on():

    @triton.jit
    def int_affine_kernel(x_ptr, out_ptr, k, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(out_ptr + offs, tl.load(x_ptr + offs) * k + 7)


def test_int32_arithmetic_wraps_as_on_a_gpu_without_the_dead_overflow_checks(monkeypatch):
    from core.harness.sim import hooks

    compares: list[int] = []
    original = interpreter.InterpreterBuilder.create_icmpSLE
    monkeypatch.setattr(
        interpreter.InterpreterBuilder,
        "create_icmpSLE",
        lambda self, *a: compares.append(1) or original(self, *a),
    )
    x = torch.tensor([1, -3, 2**30, 2**31 - 1], dtype=torch.int32)
    out = torch.empty_like(x)
    int_affine_kernel[(1,)](x, out, 4, BLOCK=4)
    # int32 wraps (the GPU's two's complement), and the overflow checks, whose assert does
    # nothing without debug, computed nothing (they compare against int32's max in int64).
    assert out.tolist() == (x.to(torch.int64) * 4 + 7).to(torch.int32).tolist()
    assert compares == []
    # Where a `sim:` device hooks the interpreter to count its operations, they run: its stored
    # anchors were counted with them.
    load = interpreter.InterpreterBuilder.create_masked_load
    hooked = functools.wraps(load)(lambda self, *a, **k: load(self, *a, **k))
    setattr(hooked, hooks._MARK, True)
    monkeypatch.setattr(interpreter.InterpreterBuilder, "create_masked_load", hooked)
    int_affine_kernel[(1,)](x, out, 4, BLOCK=4)
    assert len(compares) == 2  # the `*` and the `+`
