"""A `sim:` device never skips a check silently (docs/integrity.md, "Simulated devices", issue
37): what it cannot count, resolve or check fails the stage. Each cheat of tests/sim_cheats/
named here games one blind spot the simulator had, and is counted as a candidate's worker
counts it (sim_predict.predict_candidate), checked as the harness parent checks it
(sim_stage.count_problems) and judged against the reference as the trusted worker judges it,
in one subprocess with Triton's interpreter on. Honest kernels, Triton and pure PyTorch, pass
every one of the new checks."""

from __future__ import annotations

import pytest

from tests.conftest import ROOT
from tests.sim_counting import SIM_H200_SETUP, run_per_candidate

CHEATS = ROOT / "tests" / "sim_cheats"

JUDGE = (
    """
import importlib.util, json, sys
from core.devices.device import sim_info
from core.devices.sim import sim_section
from core.evaluation.job import spec_json
from core.evaluation.sim_scaled import scaled_json
from core.harness import checking
from core.harness.sim import hybrid as sim_hybrid, predict as sim_predict, reference as sim_reference, stage as sim_stage
from core.harness.sim.model import Constants, Target
from core.harness.workers import _entry, _module_from_source, full_fp32
from core.model.workload import Workload
from core.tasks.discovery import find_task

"""
    + SIM_H200_SETUP
    + """
out = {}
for name, (path, task_name, axes) in json.loads(sys.argv[1]).items():
    task = find_task(task_name)
    w = Workload(axes)
    workload = {"axes": axes, "shapes": {s.name: list(s.concrete_shape(axes)) for s in task.inputs + task.outputs if s.shape is not None}}
    specs, outs = [spec_json(s) for s in task.inputs], [spec_json(s) for s in task.outputs]
    sources = {n: task.file(n).read_bytes() if task.file(n).exists() else None for n in ("reference.py", "inputs.py")}
    custom = sources["inputs.py"] and _module_from_source(sources["inputs.py"], "task_inputs", str(task.file("inputs.py"))).make_inputs
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    scaled = scaled_json(task, w)
    exact = sim_hybrid.values_compared({"check.py": task.file("check.py").read_bytes()} if task.file("check.py").exists() else {})
    reply = sim_predict.predict_candidate(module.run, specs, workload, 7, custom or None, compiler, exact=exact, outputs=outs, scaled=scaled)
    launches = sim_stage.checked_launches(reply)
    ops = sim_stage.checked_ops(reply.get("torch_ops", []), "candidate")
    formula = {"flops": task.flops_for(w), "bytes": task.bytes_for(w), "dtype": task.peak}
    check_source = task.file("check.py").read_bytes() if task.file("check.py").exists() else None
    check = check_source and checking.check_from_source(check_source, str(task.file("check.py")))
    judged = sim_hybrid.values_compared({"check.py": check_source} if check_source else {})
    problem, side, notes = sim_stage.count_problems(reply, launches, ops, {"inputs": specs, "outputs": outs}, formula, target, constants, judged)
    got = {"wrong": None, "checked": 0}
    if problem is None:
        where = reply["values"].get("workload") or workload
        reference = full_fp32(_entry(_module_from_source(sources["reference.py"], "ref", str(task.file("reference.py"))), "reference.py"))
        rule = {"atol": task.correctness.atol, "rtol": task.correctness.rtol, "min_match": task.correctness.min_match}
        job = {"inputs": specs, "outputs": outs, "correctness": rule}
        got = sim_reference.serve(reference, job, custom or None, check or None, {**sources, "check.py": check_source}, {"workload": where, "seed": 7, "values": reply["values"]})
    out[name] = {"problem": problem, "wrong": got["wrong"], "checked": got["checked"], "us": side["median_us"], "notes": notes}
print(json.dumps(out))
"""
)

SILU = ("activation/silu_mul", {"T": 2048, "I": 14336})
NORM = ("norm/add_rmsnorm", {"T": 2048, "H": 4096})
GEMM = ("gemm/bf16_gemm", {"M": 1000, "N": 4096, "K": 4096})
GEMM_BIG = ("gemm/bf16_gemm", {"M": 4096, "N": 5120, "K": 2048})  # above the real run's budget
FP8 = (
    "gemm/fp8_blockscale_gemm",
    {"M": 64, "N": 2048, "K": 4096},
)  # its check.py judges; under 64 MB: filled
TASKS = ROOT / "tasks"
CANDIDATES = {
    "silu_starter": (TASKS / "activation/silu_mul/starter.py", *SILU),
    "silu_baseline": (TASKS / "activation/silu_mul/baseline.py", *SILU),
    "norm_starter": (TASKS / "norm/add_rmsnorm/starter.py", *NORM),
    "gemm_starter": (TASKS / "gemm/bf16_gemm/starter.py", *GEMM),
    "gemm_baseline_big": (TASKS / "gemm/bf16_gemm/baseline.py", *GEMM_BIG),
    "stray_scratch": (CHEATS / "stray_scratch.py", *SILU),
    "stray_wild": (CHEATS / "stray_wild.py", *SILU),
    "atomic_max_skip": (CHEATS / "atomic_max_skip.py", *NORM),
    "atomic_output": (CHEATS / "atomic_output.py", *SILU),
    "exact_probe_dot": (CHEATS / "exact_probe_dot.py", *GEMM),
    "exact_probe_loop": (CHEATS / "exact_probe_loop.py", *NORM),
    "chain_dummy": (CHEATS / "chain_dummy.py", *GEMM),
    "torch_half_k_big": (CHEATS / "torch_half_k_big.py", *GEMM_BIG),
    "torch_fake_half": (CHEATS / "torch_fake_half.py", *GEMM_BIG),
    "foreach_silu": (CHEATS / "foreach_silu.py", *SILU),
    "numpy_offload": (CHEATS / "numpy_offload.py", *SILU),
    "cdist_gemm": (CHEATS / "cdist_gemm.py", *GEMM),
    "fp8_starter": (TASKS / "gemm/fp8_blockscale_gemm/starter.py", *FP8),
    "fp8_gemm_short_k": (CHEATS / "fp8_gemm_short_k.py", *FP8),
}


@pytest.fixture(scope="module")
def judged() -> dict:
    return run_per_candidate(JUDGE, CANDIDATES)


@pytest.mark.parametrize(
    "name",
    [
        "silu_starter",
        "silu_baseline",
        "norm_starter",
        "gemm_starter",
        "gemm_baseline_big",
        "fp8_starter",
    ],
)
def test_honest_kernels_pass_every_check_and_are_value_checked(judged, name):
    got = judged[name]
    assert got["problem"] is None and got["wrong"] is None, got
    assert got["checked"] > 0, "some of its elements were compared with the reference"


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("stray_wild", "sim_stray_access: kernel `_silu_mul` stored"),
        ("exact_probe_dot", "sim_exact_differs: program"),
        ("exact_probe_loop", "sim_exact_differs: program"),
        ("chain_dummy", "sim_unchecked_output: no element of output `y`"),
        ("atomic_output", "sim_unchecked_output: no element of output `out`"),
        ("torch_half_k_big", "sim_less_work: the counted call computes"),
        ("torch_fake_half", "sim_fake_pass_differs: at M=4096, N=5120, K=128"),
        ("numpy_offload", "sim_"),
        ("cdist_gemm", "sim_unknown_op: the call runs `_euclidean_dist`"),
    ],
)
def test_a_blind_spot_gamed_fails_the_stage(judged, name, problem):
    got = judged[name]
    assert got["problem"] and got["problem"].startswith(problem), got


def test_a_task_with_an_elementwise_check_py_is_value_checked_by_it(judged):
    """fp8_blockscale_gemm's check.py judges every element on its own: the counted call's known
    elements, set into the reference, are judged by it, and 85% of the K loop fails."""
    got = judged["fp8_gemm_short_k"]
    assert got["problem"] is None, "within the formulas' margin: only the values show it"
    assert got["wrong"] and "fails the task's check.py" in got["wrong"], got


@pytest.mark.parametrize("name", ["stray_scratch", "atomic_max_skip"])
def test_a_stray_store_or_an_atomic_no_longer_hides_the_other_stores(judged, name):
    """The store it resolves into the call's own scratch, the atomic's address: only those leave
    the known set; what it skipped shows in the values."""
    got = judged[name]
    assert got["problem"] is None and got["wrong"], got
    assert got["wrong"].startswith("sim_wrong_output: the counted call's output")


def test_work_in_foreach_ops_is_billed(judged):
    """Three `_foreach_*` ops and a clone, each billed by its bytes and a launch: no faster than
    the torch baseline's two ops."""
    assert judged["foreach_silu"]["problem"] is None
    assert judged["foreach_silu"]["us"] >= 0.95 * judged["silu_baseline"]["us"], judged
