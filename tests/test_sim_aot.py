"""A `sim:` device compiles each Triton kernel for the target ahead of time (core/harness/sim/aot.py).
A kernel that the target's own compiler refuses, or that asks for more shared memory than the
target has, would fail on that GPU at its first launch: the simulated evaluation says so and
fails, instead of predicting a time for a kernel that cannot run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import triton
import triton.language as tl

from core.devices.device import sim_info
from core.devices.sim import sim_section
from core.harness.sim import aot as sim_aot
from core.harness.sim.stage import refused_launch


@triton.jit
def _row_max_used_twice(x_ptr, out_ptr, N, ROWS: tl.constexpr, BLOCK: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK)[None, :]
    m = tl.full((ROWS,), -float("inf"), tl.float32)
    for start in range(0, N, BLOCK):
        x = tl.load(
            x_ptr + rows[:, None] * N + start + cols, mask=start + cols < N, other=-float("inf")
        )
        m = tl.maximum(m, tl.max(x, axis=1))  # a reduction carried by the loop ...
    tl.store(out_ptr + rows, m)
    tl.store(out_ptr + ROWS + rows, m * 2.0)  # ... and used twice after it


@triton.jit
def _row_sum(x_ptr, out_ptr, N, ROWS: tl.constexpr, BLOCK: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK)[None, :]
    total = tl.zeros((ROWS, BLOCK), tl.float32)
    for start in range(0, N, BLOCK):
        total += tl.load(x_ptr + rows[:, None] * N + start + cols, mask=start + cols < N, other=0.0)
    tl.store(out_ptr + rows, tl.sum(total, axis=1))  # reduced across warps: through shared memory


@triton.jit
def _copy(x_ptr, out_ptr, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < N), mask=offs < N)


@triton.jit
def _python_min_max(x_ptr, out_ptr, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    n = min(N, 200)  # Python's min on a runtime scalar: the code generator's builtin, not Python's
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * max(2, 3), mask=offs < n)


ROOT = Path(__file__).resolve().parents[1]
H200 = sim_section(sim_info("sim:h200"))["aot"]
ROW_MAX = {"x_ptr": torch.empty(4), "out_ptr": torch.empty(4), "N": 4096, "ROWS": 1, "BLOCK": 512}
COPY = {"x_ptr": torch.empty(4), "out_ptr": torch.empty(4), "N": 4096, "BLOCK": 256}


def _compiled_in_a_fresh_process(kernel: str, bound: str, target: str = "t.H200") -> dict:
    """compile_launch as a sim: worker runs it: in a process whose Triton was imported with the
    interpreter off (test modules that switch it on at import turn Triton's own helpers, tl.max
    among them, into interpreted functions for this whole test process)."""
    code = (
        "import json; from tests import test_sim_aot as t; from core.harness.sim import aot as sim_aot; "
        f"print(json.dumps(sim_aot.compile_launch(t.{kernel}.fn, t.{bound}, {{}}, {target}).to_json()))"
    )
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(
    not triton.__version__.startswith("3.6."),
    reason=f"the refusal is Triton 3.6's (this is {triton.__version__})",
)
def test_a_kernel_that_the_targets_compiler_refuses_is_reported_as_refused_with_the_failing_pass():
    # The shape of the sampling starter's row max until 2026-11-29, which never built for a GPU.
    found = _compiled_in_a_fresh_process("_row_max_used_twice", "ROW_MAX")
    assert not found["ok"] and found["rejected"]
    assert "TritonGPUOptimizeThreadLocality" in found["error"] and "hasOneUse" in found["error"]


def test_a_kernel_that_builds_is_not_refused():
    found = _compiled_in_a_fresh_process("_row_sum", "ROW_MAX")
    assert (
        found["ok"] and not found["rejected"] and found["registers"] and found["shared_bytes"] > 0
    )


def test_only_the_back_end_s_own_failures_count_as_refusals(monkeypatch):
    def fails_in_a_pass(*_args, **_kwargs):
        os.write(
            2, b"note: Pipeline failed while executing [`SomePass` on 'builtin.module' operation]\n"
        )
        raise RuntimeError("PassManager::run failed")

    monkeypatch.setattr(triton, "compile", fails_in_a_pass)
    refused = sim_aot.compile_launch(_copy.fn, COPY, {}, H200)
    assert refused.rejected and "in the pass SomePass" in refused.error

    def this_path_s_limit(*_args, **_kwargs):
        raise TypeError("an argument the AOT path does not take")

    monkeypatch.setattr(triton, "compile", this_path_s_limit)
    limited = sim_aot.compile_launch(_copy.fn, COPY, {}, H200)
    assert not limited.ok and not limited.rejected, (
        "a limit of the simulator is never held against the kernel (the stage says it cannot evaluate it)"
    )


def test_a_kernel_needing_more_shared_memory_than_the_target_has_is_refused():
    found = _compiled_in_a_fresh_process(
        "_row_sum", "ROW_MAX", '{**t.H200, "shared_per_unit": 64}'
    )  # a GPU of 64 bytes
    assert found["rejected"] and "out of shared memory" in found["error"]


def test_the_performance_stage_names_the_kernel_the_target_refused():
    reply = {
        "launches": [
            {"kernel": "_fine", "resources": {"ok": True}},
            {
                "kernel": "_sample_kernel",
                "resources": {
                    "ok": False,
                    "rejected": True,
                    "error": "RuntimeError: PassManager::run failed (in the pass P)",
                },
            },
        ]
    }
    message = refused_launch(reply)
    assert (
        message is not None
        and "`_sample_kernel` does not build for the target" in message
        and "in the pass P" in message
    )
    assert (
        refused_launch(
            {"launches": [{"kernel": "_k", "resources": {"ok": False, "error": "TypeError: ..."}}]}
        )
        is None
    )


def test_a_kernel_using_python_min_and_max_compiles_whatever_the_import_order():
    # Triton's code generator copies `min`/`max` out of triton.language.core when first
    # imported; imported while the interpreter's patches were on, it kept the interpreter's, and
    # every kernel using min or max failed its AOT compile (the prediction silently assumed
    # occupancy). Here it is first imported under those patches, as a candidate's worker may.
    code = (
        "import json, torch; from core.harness import triton_cpu; triton_cpu.enable_interpreter(); "
        "from triton.runtime import interpreter; from tests import test_sim_aot as t; from core.harness.sim import aot as sim_aot; "
        "scope = interpreter._patch_lang(t._python_min_max.fn); import triton.compiler.code_generator; scope.restore(); "
        "bound = {'x_ptr': torch.empty(4), 'out_ptr': torch.empty(4), 'N': 256, 'BLOCK': 64}; "
        "print(json.dumps(sim_aot.compile_launch(t._python_min_max.fn, bound, {}, t.H200).to_json()))"
    )
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["ok"], found["error"]
