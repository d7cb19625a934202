"""The identity on `sim:`: a task's baseline.py as the candidate is predicted as the H200 runs
it. Liger's baselines take their GPU (Triton) branch on a simulated GPU; a torch call is priced
by what the vendor kernel behind it does (a GEMM at cuBLAS's rate, a sort's passes, ...); where
the GPU runs a library the CPU cannot, the result says which implementation was predicted
against which. docs/simulation.md, "The identity"."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from core.evaluation.verdict import _implementations_note
from core.harness.sim import predict as sim_predict
from core.harness.sim.model import Constants, glue_kind, glue_time, predict_side
from core.model import events
from tests.sim_target import H200

ROOT = Path(__file__).resolve().parent.parent


def test_a_liger_baseline_takes_the_gpus_triton_branch_on_a_simulated_gpu():
    if os.environ.get("CI") != "true":  # CI installs the dev extra, liger-kernel with it
        pytest.importorskip("liger_kernel")
    script = """
import os, torch
from core.harness.triton_cpu import enable_interpreter
enable_interpreter()
import importlib.util
spec = importlib.util.spec_from_file_location("b", "tasks/norm/add_rmsnorm/baseline.py")
b = importlib.util.module_from_spec(spec); spec.loader.exec_module(b)
x, r = torch.randn(4, 64, dtype=torch.bfloat16), torch.randn(4, 64, dtype=torch.bfloat16)
w = torch.ones(64, dtype=torch.bfloat16)
b.run(x, r, w, 1e-6)
print(b.IMPL)
os.environ["ARENA_SIM_GPU"] = "sim:h200"  # what a sim: device's candidate worker sets
b.run(x, r, w, 1e-6)
print(b.IMPL)
"""
    env = {k: v for k, v in os.environ.items() if k != "ARENA_SIM_GPU"}
    ran = subprocess.run(
        [sys.executable, "-c", script],
        check=False,
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert ran.stdout.split()[-2:] == ["torch", "liger"], ran.stderr[-2000:]


def test_a_torch_call_is_priced_by_the_kind_of_kernel_behind_it():
    assert [glue_kind(n) for n in ("matmul", "_grouped_mm", "scaled_dot_product_attention")] == [
        "gemm",
        "gemm",
        "attention",
    ]
    assert [glue_kind(n) for n in ("sort", "topk", "amax", "mul", "rms_norm")] == [
        "sort",
        "sort",
        "reduce",
        "other",
        "other",
    ]
    c = Constants(glue_launch_us=4.0, gemm_eff=0.9, gemm_fixed_us=1.0)
    gemm = {"name": "matmul", "flops": 2 * 4096**3, "bytes": 3 * 2 * 4096**2, "dtype": "bf16"}
    t = glue_time(gemm, H200, c).time_us
    assert t == pytest.approx(4.0 + 1.0 + 2 * 4096**3 / (788e12 * 0.9) * 1e6)
    slow_sort = glue_time({"name": "sort", "bytes": 1e6}, H200, c.with_values(sort_mem_eff=0.1))
    assert slow_sort.time_us > glue_time({"name": "mul", "bytes": 1e6}, H200, c).time_us


def test_in_a_graph_the_kernels_after_the_first_start_back_to_back():
    ops = [{"name": "mul", "bytes": 8.0, "glue": True} for _ in range(8)]
    c = Constants(glue_launch_us=4.0, glue_graph_us=3.0, next_graph_us=1.5)
    assert predict_side([], ops, H200, c)["median_us"] == pytest.approx(8 * 4.0, rel=1e-3)
    assert predict_side([], ops, H200, c, graph=True)["median_us"] == pytest.approx(
        3.0 + 7 * 1.5, rel=1e-3
    )


def test_an_unmeasured_baseline_is_counted_call_by_call_as_a_candidate_is():
    import importlib.util

    from core.evaluation.job import spec_json
    from core.tasks.discovery import find_task

    task = find_task("gemm/bf16_gemm")
    spec = importlib.util.spec_from_file_location("bf16_baseline", task.file("baseline.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    axes = {"M": 512, "N": 28672, "K": 4096}
    shapes = {"x": [512, 4096], "w": [28672, 4096], "y": [512, 28672]}
    reply = sim_predict.predict_baseline(
        module.run,
        [spec_json(s) for s in task.inputs],
        {"axes": axes, "shapes": shapes},
        1,
        None,
        {"flops": 0, "bytes": 0},
    )
    assert reply["source"] == "counted"
    assert [(o["name"], o["glue"]) for o in reply["torch_ops"] if o["flops"]] == [("matmul", True)]


def _timed(candidate: dict, baseline: dict) -> events.WorkloadTimed:
    return events.WorkloadTimed("w", {"B": 1}, "predicted", 0, candidate, baseline)


def test_the_result_says_which_implementation_was_predicted_against_which():
    note = _implementations_note(
        _timed({"impl": "torch"}, {"impl": "torch-bmm", "source": "measured"})
    )
    assert note and "`torch`" in note[0] and "`torch-bmm`" in note[0]
    assert _implementations_note(_timed({"impl": "liger"}, {"impl": "liger"})) == []
    assert _implementations_note(_timed({}, {"impl": "liger"})) == [], (
        "a candidate that says nothing"
    )


def test_reading_the_simulated_gpu_is_not_noted_but_any_other_environment_read_is():
    from core.evaluation.scan import scan_source

    offered = (
        'import os\ndef run(x):\n    return x.is_cuda or bool(os.environ.get("ARENA_SIM_GPU"))\n'
    )
    assert scan_source(offered) == [], "what a sim: device offers, no more than x.is_cuda tells"
    other = (
        'import os\ndef run(x):\n    return os.environ.get("ARENA_SIM_GPU") or os.getenv("SEED")\n'
    )
    assert any(n.startswith("scan:environment") for n in scan_source(other))
