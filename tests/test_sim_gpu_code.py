"""Code written for a GPU, evaluated on a `sim:` device as it would run there: a kernel that
sizes its grid by asking torch for the GPU's SM count is launched with the simulated GPU's
(core/harness/sim/gpu_queries.py), an autotuner's trials cost nothing billed, not even the
copies its `restore_value` makes (core/harness/sim/torch_ops.py, `unbilled`). The CPU device
has no GPU to describe: there such a kernel cannot be evaluated, and says so, where it used to
fail as a wrong answer."""

from __future__ import annotations

import pytest

from core.evaluation.evaluator import Evaluator
from core.tasks.discovery import find_task
from tests.conftest import ROOT

HONEST = ROOT / "tests" / "sim_honest"
TASK = "activation/silu_mul"


@pytest.fixture(scope="module")
def on_sim() -> dict:
    task = find_task(TASK)
    with Evaluator("sim:h200") as ev:
        return {
            name: ev.evaluate(task, HONEST / f"{name}.py", seed=2, profile="train")
            for name in ("persistent_silu_mul", "restore_value_silu_mul")
        }


def test_a_kernel_sized_by_the_gpus_sm_count_launches_as_many_programs_as_the_simulated_gpu(
    on_sim,
):
    result = on_sim["persistent_silu_mul"]
    assert result.status == "passed", result.stages
    for w in result.workloads:
        kernels = [k for k in w.candidate["kernels"] if k.get("kernel")]
        assert [k["grid"][0] for k in kernels] == [132]  # an H200's SMs


def test_an_autotuners_restore_value_copies_are_not_billed(on_sim):
    result = on_sim["restore_value_silu_mul"]
    assert result.status == "passed", result.stages
    for w in result.workloads:
        assert any("trial launch(es)" in note for note in w.notes)
        billed = [k.get("op") for k in w.candidate["kernels"] if k.get("op")]
        assert "clone" not in billed and "copy_" not in billed, billed


def test_only_the_autotuners_own_copies_in_a_trial_are_unbilled():
    """A hook of the candidate's that computes in a trial (an autotuner's `pre_hook` doing the
    kernel's work in torch) is billed as any torch work of the candidate's."""
    import torch

    from core.harness.sim.torch_ops import TorchCalls, unbilled

    x = torch.randn(64, 128)
    out = torch.empty(64, 64)
    with TorchCalls() as calls:
        torch.add(x, 1.0)  # before the trial: billed
        unbill = unbilled()
        saved = out.clone()  # the autotuner's restore_value, around the trial
        torch.mul(torch.nn.functional.silu(x[:, :64]), x[:, 64:], out=out)  # a hook's work
        out.copy_(saved)
        unbill()
    assert [op["name"] for op in calls.ops] == ["add", "silu", "mul"]


def test_on_the_cpu_device_a_kernel_that_asks_for_the_gpu_cannot_be_evaluated():
    task = find_task(TASK)
    with Evaluator("cpu") as ev:
        result = ev.evaluate(task, HONEST / "persistent_silu_mul.py", seed=2, profile="train")
    assert result.status == "infrastructure_error", result.stages
    message = next(s.message for s in result.stages if s.status not in ("passed", "skipped"))
    assert "asks torch for a CUDA GPU" in message and "sim:" in message
