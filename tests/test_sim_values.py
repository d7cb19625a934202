"""A `sim:` device's counted call must compute what it returns (docs/integrity.md, "Simulated
devices"): the elements its exact programs stored (and what torch ops wrote from known values)
are compared with the reference at the same GPU-sized inputs, computed in the trusted worker
(sim_values, sim_reference). A candidate that fills the rows it skips when counted with a
constant fails with `sim_wrong_output`; an output updated in place must be written where the
reference changes it (`sim_unwritten_output`). Honest kernels, Triton and pure PyTorch, pass.

Each candidate is counted as a candidate's worker counts it (sim_predict.predict_candidate), at
a GPU workload, and judged as the trusted worker and the harness parent judge it, in one
subprocess with Triton's interpreter on."""

from __future__ import annotations

import time

import pytest
import torch

from core.harness.sim import reference as sim_reference
from core.harness.sim import written as sim_written
from tests.conftest import ROOT
from tests.sim_counting import run_per_candidate

CHEATS = ROOT / "tests" / "sim_cheats"

JUDGE = """
import importlib.util, json, sys
from core.devices.device import sim_info
from core.devices.sim import sim_section
from core.evaluation.job import spec_json
from core.harness.sim import predict as sim_predict, reference as sim_reference, written as sim_written
from core.harness.workers import _entry, _module_from_source, full_fp32
from core.tasks.discovery import find_task

compiler = sim_predict.CompileCache(sim_section(sim_info("sim:h200"))["aot"], None)  # before the interpreter
from core.harness.triton_cpu import enable_interpreter
enable_interpreter()
out = {}
for name, (path, task_name, axes) in json.loads(sys.argv[1]).items():
    task = find_task(task_name)
    workload = {"axes": axes, "shapes": {s.name: list(s.concrete_shape(axes)) for s in task.inputs + task.outputs if s.shape is not None}}
    specs, outs = [spec_json(s) for s in task.inputs], [spec_json(s) for s in task.outputs]
    sources = {n: task.file(n).read_bytes() if task.file(n).exists() else None for n in ("reference.py", "inputs.py")}
    custom = sources["inputs.py"] and _module_from_source(sources["inputs.py"], "task_inputs", str(task.file("inputs.py"))).make_inputs
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    reply = sim_predict.predict_candidate(module.run, specs, workload, 7, custom or None, compiler)
    reference = full_fp32(_entry(_module_from_source(sources["reference.py"], "ref", str(task.file("reference.py"))), "reference.py"))
    entry = sim_reference.reference_entry(reference, specs, outs, workload, 7, custom or None, sources)
    rule = {"atol": task.correctness.atol, "rtol": task.correctness.rtol, "min_match": task.correctness.min_match}
    got = sim_reference.judge(entry, reply["values"], outs, rule)
    names = [o["name"] for o in outs]
    out[name] = {**got, "unwritten": sim_written.problem(reply["written"], names),
                 "inplace": sim_written.inplace_problem(got["changed_bytes"], reply["values"]["written_bytes"], names)}
print(json.dumps(out))
"""

SILU = ("activation/silu_mul", {"T": 2048, "I": 14336})
NORM = ("norm/add_rmsnorm", {"T": 2048, "H": 4096})
ROPE = ("elementwise/rope", {"T": 2048, "Hq": 32, "Hkv": 8, "d": 128, "P": 131072})
KV = ("elementwise/kv_cache_write", {"T": 64, "Hkv": 4, "d": 128, "NB": 2048, "BS": 16})
CANDIDATES = {
    "silu_starter": (ROOT / "tasks/activation/silu_mul/starter.py", *SILU),
    "silu_baseline": (ROOT / "tasks/activation/silu_mul/baseline.py", *SILU),  # pure PyTorch
    "liger_swiglu": (ROOT / "tests/published/liger_swiglu.py", *SILU),
    "constant_rows": (CHEATS / "constant_rows.py", *SILU),
    "norm_starter": (ROOT / "tasks/norm/add_rmsnorm/starter.py", *NORM),
    "liger_add_rmsnorm": (ROOT / "tests/published/liger_fused_add_rmsnorm.py", *NORM),
    "rope_starter": (ROOT / "tasks/elementwise/rope/starter.py", *ROPE),  # in place
    "rope_fewer_rows": (CHEATS / "rope_fewer_rows.py", *ROPE),
    "kv_starter": (
        ROOT / "tasks/elementwise/kv_cache_write/starter.py",
        *KV,
    ),  # in place, a few slots
}


@pytest.fixture(scope="module")
def judged() -> dict:
    return run_per_candidate(JUDGE, CANDIDATES)


@pytest.mark.parametrize(
    "name",
    [
        "silu_starter",
        "liger_swiglu",
        "norm_starter",
        "liger_add_rmsnorm",
        "rope_starter",
        "kv_starter",
    ],
)
def test_honest_triton_kernels_compute_what_the_reference_does_when_counted(judged, name):
    got = judged[name]
    assert got["wrong"] is None and got["skipped"] is None and got["malformed"] is None, got
    assert got["checked"] >= 500, "elements of its exact programs compared"
    assert got["unwritten"] is None and got["inplace"] is None, got


def test_a_pure_pytorch_candidate_is_value_checked_through_its_real_run(judged):
    """Its fake pass is cheap, so it is counted again on GPU-sized CPU tensors (the run that is
    billed): its torch ops write densely, so every element they write is known."""
    got = judged["silu_baseline"]
    assert got["wrong"] is None and got["skipped"] is None, got
    assert got["checked"] >= 500


def test_rows_filled_with_a_constant_when_counted_are_wrong_output(judged):
    got = judged["constant_rows"]
    assert got["unwritten"] is None, "it writes every element: the write check cannot see it"
    assert got["wrong"].startswith("sim_wrong_output: the counted call's output `out` differs")
    assert "got 0" in got["wrong"]


def test_an_in_place_output_must_be_written_where_the_reference_changes_it(judged):
    got = judged["rope_fewer_rows"]
    assert got["wrong"] is None, "what it did compute is right"
    assert got["inplace"].startswith(
        "sim_unwritten_output: the counted call wrote 60% as many bytes"
    )
    assert "`q_out`" in got["inplace"]
    assert all(n and n > 0 for n in judged["kv_starter"]["changed_bytes"]), "a few slots changed"


def _entry(tmp_path, run, seed=1):
    specs = [{"name": "x", "dtype": "float32", "shape": ["N"], "init": None, "value": None}]
    outs = [{"name": "y", "dtype": "float32", "shape": ["N"], "inplace_of": None}]
    workload = {"axes": {"N": 64}, "shapes": {"x": [64], "y": [64]}}
    sources = {"reference.py": b"def run(x): return x * 2", "inputs.py": None}
    return sim_reference.reference_entry(run, specs, outs, workload, seed, None, sources, tmp_path)


def test_the_reference_is_cached_and_a_corrupt_or_stale_entry_is_recomputed(tmp_path):
    sim_reference._MEMORY.clear()
    calls = []

    def run(x):
        calls.append(1)
        return x * 2

    first = _entry(tmp_path, run)
    assert _entry(tmp_path, run)["outputs"][0].equal(first["outputs"][0]) and len(calls) == 1
    sim_reference._MEMORY.clear()  # a new trusted worker: from disk
    assert _entry(tmp_path, run)["outputs"][0].equal(first["outputs"][0]) and len(calls) == 1
    (path,) = (tmp_path / "reference").glob("*.pt")
    raw = bytearray(path.read_bytes())
    raw[-8] ^= 0xFF  # corrupt
    path.write_bytes(bytes(raw))
    sim_reference._MEMORY.clear()
    assert _entry(tmp_path, run)["outputs"][0].equal(first["outputs"][0]) and len(calls) == 2
    assert sim_reference._load(path, "another key") is None, "stale: another key's entry"


def test_a_reference_over_its_budget_is_skipped_and_says_why(tmp_path, monkeypatch):
    sim_reference._MEMORY.clear()
    monkeypatch.setenv("ARENA_SIM_REFERENCE_S", "0.2")

    def slow(x):
        time.sleep(2)
        return x

    entry = _entry(tmp_path, slow, seed=2)
    assert entry["skipped"].startswith("the reference at this size takes over 0.2 s")
    reply = sim_reference.judge(entry, {"outputs": [None]}, [{"name": "y"}], {"atol": 0, "rtol": 0})
    assert reply["skipped"] and reply["wrong"] is None


def test_a_sim_jobs_performance_limit_holds_the_value_checks_of_every_gpu_workload(
    tmp_path, monkeypatch
):
    """The trusted side's reference at GPU size is the arena's work: on two slow cores ten of
    them filled fp8_blockscale_grouped_gemm's 300 s stage before any count was slow, and the
    starter ended `infrastructure_error`. The stage's limit (and the job's) grows by the
    references' budgets; a GPU's does not."""
    from core.devices.device import sim_info
    from core.evaluation.job import VALUE_CHECK_BUDGETS, build_job, job_deadline_s
    from core.tasks.discovery import find_task

    monkeypatch.setenv("ARENA_SIM_REFERENCE_S", "10")
    task = find_task("gemm/fp8_blockscale_grouped_gemm")
    job = build_job(task, task.file("starter.py"), sim_info("sim:h200"), "cpu", 1, tmp_path)
    timed = len(job["stages"]["performance"])
    assert timed >= 10
    allowance = VALUE_CHECK_BUDGETS * 10 * timed
    assert job["limits"]["performance_s"] == task.limits.performance_s + allowance
    assert job_deadline_s(job) >= task.limits.performance_s + allowance
    visible = build_job(
        task, task.file("starter.py"), sim_info("sim:h200"), "cpu", 1, tmp_path, performance=False
    )
    assert visible["limits"]["performance_s"] == task.limits.performance_s


def test_values_outside_the_output_are_malformed():
    entry = {"outputs": [torch.zeros(4)], "changed": [None]}
    bad = {"outputs": [{"index": [0, 9], "value": [0.0, 0.0]}]}
    reply = sim_reference.judge(entry, bad, [{"name": "y"}], {"atol": 0, "rtol": 0})
    assert reply["malformed"] and "`y`" in reply["malformed"]


def test_in_place_outputs_are_judged_against_the_bytes_the_reference_changed():
    assert sim_written.inplace_problem([1000, None], [900.0, 0.0], ["q", "y"]) is None
    message = sim_written.inplace_problem([1000, None], [500.0, 0.0], ["q", "y"])
    assert message and "50% as many bytes of in-place output `q`" in message


class _Evaluation:
    """What sim_stage.check_values uses of the harness parent's Evaluation."""

    def __init__(self, outputs: list[dict], reply: dict):
        self.job, self.reply, self.asked = {"outputs": outputs}, reply, []

    def _trusted_call(self, msg: dict, deadline: float) -> dict:
        self.asked.append(msg["op"])
        return self.reply


def test_the_stage_fails_on_the_trusted_workers_finding_and_notes_a_pass_or_a_skip():
    from core.harness.runner import StageFailed
    from core.harness.sim.stage import check_values

    w = {"label": "T=2048", "axes": {"T": 2048}, "shapes": {}, "seed": 5}
    values = {"outputs": [{"index": [0], "value": [1.0]}], "written_bytes": [8.0]}
    wrong = {"wrong": "sim_wrong_output: the counted call's output `out` differs", "checked": 1}
    with pytest.raises(StageFailed, match="T=2048: sim_wrong_output"):
        check_values(_Evaluation([{"name": "out"}], wrong), w, {"values": values}, 5, 1e9)
    fine = _Evaluation([{"name": "out"}], {"checked": 1, "changed_bytes": [None]})
    note = check_values(fine, w, {"values": values}, 5, 1e9)
    assert note == "value check: 1 elements of the counted call match the reference"
    nothing = _Evaluation([{"name": "out"}], {})
    empty = {"values": {"outputs": [{"index": [], "value": []}]}}
    assert check_values(nothing, w, empty, 5, 1e9).startswith("value check skipped: no known")
    assert nothing.asked == [], "no reference computed when there is nothing to compare"
