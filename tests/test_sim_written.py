"""A `sim:` device's counted call must write what it returns (docs/integrity.md, "Simulated
devices"): a candidate that tells the counting pass from a checked call (by its GPU-only sizes,
its fake tensors, the harness's frames) and does part of its work there fails the performance
stage with `sim_unwritten_output`; honest kernels, Triton and pure PyTorch, write all of theirs.
A pure PyTorch candidate is counted on fake tensors and, where that count is small, again on
GPU-sized CPU tensors: that run is billed and value-checked, and doing less on the fake tensors
is `sim_fake_pass_differs`.

Each candidate is counted as a candidate's worker counts it (sim_predict.predict_candidate), at
a GPU workload, in a subprocess with Triton's interpreter on."""

from __future__ import annotations

import pytest
import torch

from core.harness.sim import written as sim_written
from tests.conftest import ROOT
from tests.sim_counting import SIM_H200_SETUP, run_per_candidate

CHEATS = ROOT / "tests" / "sim_cheats"

COUNT = (
    """
import importlib.util, json, sys
from core.devices.device import sim_info
from core.evaluation.job import spec_json
from core.harness.sim import predict as sim_predict, stage as sim_stage
from core.devices.sim import sim_section
from core.tasks.discovery import find_task

"""
    + SIM_H200_SETUP
    + """
out = {}
for name, (path, task_name, axes) in json.loads(sys.argv[1]).items():
    task = find_task(task_name)
    workload = {"axes": axes, "shapes": {s.name: list(s.concrete_shape(axes)) for s in task.inputs + task.outputs if s.shape is not None}}
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    reply = sim_predict.predict_candidate(module.run, [spec_json(s) for s in task.inputs], workload, 7, None, compiler)
    values = reply["values"].get("outputs") or []
    out[name] = {"written": reply["written"], "outputs": [o.name for o in task.outputs],
                 "fake_count": reply.get("fake_count"), "known": [v and len(v["index"]) for v in values],
                 "differs": sim_stage.fake_pass_problem(reply, reply["launches"], reply["torch_ops"])}
print(json.dumps(out))
"""
)

SILU = ("activation/silu_mul", {"T": 2048, "I": 14336})
NORM = ("norm/add_rmsnorm", {"T": 2048, "H": 4096})
CANDIDATES = {
    "silu_starter": (ROOT / "tasks/activation/silu_mul/starter.py", *SILU),
    "silu_baseline": (
        ROOT / "tasks/activation/silu_mul/baseline.py",
        *SILU,
    ),  # pure PyTorch: counted on fake tensors
    "liger_swiglu": (ROOT / "tests/published/liger_swiglu.py", *SILU),
    "masked_middle": (
        CHEATS / "masked_middle.py",
        *SILU,
    ),  # its work is all there, in a loop's middle
    "big_half": (CHEATS / "big_half.py", *SILU),
    "frame_detect": (CHEATS / "frame_detect.py", *SILU),
    "fake_half": (CHEATS / "fake_half.py", *SILU),
    "norm_starter": (ROOT / "tasks/norm/add_rmsnorm/starter.py", *NORM),
    "norm_baseline": (ROOT / "tasks/norm/add_rmsnorm/baseline.py", *NORM),
    "liger_add_rmsnorm": (ROOT / "tests/published/liger_fused_add_rmsnorm.py", *NORM),
    "norm_skip_residual": (CHEATS / "norm_skip_residual.py", *NORM),
}


@pytest.fixture(scope="module")
def counted() -> dict:
    return run_per_candidate(COUNT, CANDIDATES)


@pytest.mark.parametrize(
    "name",
    [
        "silu_starter",
        "silu_baseline",
        "liger_swiglu",
        "masked_middle",
        "norm_starter",
        "norm_baseline",
        "liger_add_rmsnorm",
    ],
)
def test_honest_kernels_write_every_output_when_counted(counted, name):
    got = counted[name]
    assert got["written"] == [1.0] * len(got["outputs"]), got
    assert sim_written.problem(got["written"], got["outputs"]) is None


@pytest.mark.parametrize(
    ("name", "output", "share"),
    [
        ("big_half", "out", 0.6),  # Triton, GPU-sized inputs only: 60% of the rows
        ("frame_detect", "out", 0.7),  # Triton, the harness's frames: 70% of the rows
        (
            "norm_skip_residual",
            "residual_out",
            0.25,
        ),  # the second of two outputs, a quarter of it (estimated from 9 sampled programs)
    ],
)
def test_a_candidate_doing_less_when_counted_fails_on_what_it_left_unwritten(
    counted, name, output, share
):
    got = counted[name]
    shares = dict(zip(got["outputs"], got["written"]))
    assert shares[output] == pytest.approx(share, abs=0.05), got
    message = sim_written.problem(got["written"], got["outputs"])
    assert message and message.startswith("sim_unwritten_output:") and f"`{output}`" in message


@pytest.mark.parametrize("name", ["silu_baseline", "norm_baseline"])
def test_a_pure_pytorch_candidate_is_counted_again_on_real_memory_and_value_checked(counted, name):
    """Its fake pass is cheap: it runs again on GPU-sized CPU tensors, and that run, the one
    billed, counts the same work and leaves known elements for the value check."""
    got = counted[name]
    assert got["fake_count"] is not None and got["differs"] is None
    assert got["known"] and all(k and k >= 500 for k in got["known"]), got


def test_a_pure_pytorch_candidate_doing_less_on_fake_tensors_fails_on_the_difference(counted):
    """fake_half computes half the rows when handed fake tensors: the real run that is billed
    writes them all, and its count against the fake pass's is the proof."""
    got = counted["fake_half"]
    assert got["written"] == [1.0]
    assert got["differs"] and got["differs"].startswith("sim_fake_pass_differs:"), got


def test_an_output_updated_in_place_has_no_share_of_its_own_and_torch_writes_count():
    cache = torch.zeros(64, 8)
    spans: list = []
    sim_written.note(spans, [cache[:2]])  # a KV-cache write touches two slots of its input
    part = torch.empty(10, 4)
    sim_written.note(spans, [part[:5]])  # an op wrote half of a fresh output
    assert sim_written.shares((cache, part, 3), [cache], spans) == [None, 0.5, None]
