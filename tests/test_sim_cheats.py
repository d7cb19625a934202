"""The simulated device counts what would run, not what it is shown: each cheat in
tests/sim_cheats/ games a `sim:` device's counting one way, and the defense named in its
docstring (and in docs/integrity.md, "Simulated devices") stops it. Candidates for
activation/silu_mul, counted at its GPU workload T=2048, I=14336 as a candidate's worker counts
them (sim_predict), then checked and predicted as the harness parent does (sim_stage, sim_model)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from core.evaluation.evaluator import Evaluator
from core.harness.sim.stage import uncounted_launch
from core.tasks.discovery import find_task
from tests.conftest import ROOT
from tests.sim_counting import SIM_H200_SETUP

CHEATS = ROOT / "tests" / "sim_cheats"

COUNT = (
    """
import importlib.util, json, sys
from core.devices.device import sim_info
from core.evaluation.job import spec_json
from core.harness.sim import predict as sim_predict, stage as sim_stage
from core.harness.sim.model import Constants, Target, predict_side
from core.devices.sim import sim_section
from core.tasks.discovery import find_task

"""
    + SIM_H200_SETUP
    + """
task = find_task("activation/silu_mul")
axes = {"T": 2048, "I": 14336}
workload = {"axes": axes, "shapes": {s.name: list(s.concrete_shape(axes)) for s in task.inputs + task.outputs}}
specs = [spec_json(s) for s in task.inputs]
out = {}
for name, path in json.loads(sys.argv[1]).items():
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    reply = sim_predict.predict_candidate(module.run, specs, workload, 7, None, compiler)
    side = predict_side(sim_stage.checked_launches(reply), sim_stage.checked_ops(reply["torch_ops"], "c"), target, constants)
    out[name] = {"us": side["median_us"], "launches": len(reply["launches"]), "notes": reply["notes"], "uncounted": sim_stage.uncounted_launch(reply),
                 "stages": [k.get("num_stages") for k in side["kernels"]], "grids": [l["grid"] for l in reply["launches"]]}
out["launch_us"] = constants.launch_us
print(json.dumps(out))
"""
)


@pytest.fixture(scope="module")
def counted() -> dict:
    files = {
        name: str(CHEATS / f"{name}.py")
        for name in (
            "honest_loop",
            "masked_middle",
            "launch_flood",
            "host_python",
            "stages_inflated",
            "stages_default",
            "zero_pages",
            "autotuned",
        )
    }
    files["starter"] = str(find_task("activation/silu_mul").file("starter.py"))
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(COUNT), json.dumps(files)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_work_hidden_in_a_loops_middle_iterations_is_counted(counted):
    honest, cheat = counted["honest_loop"]["us"], counted["masked_middle"]["us"]
    assert cheat > 0.8 * honest, (
        f"the masked-prologue loop predicted {cheat:.1f} µs against {honest:.1f} µs for the same work"
    )


def test_launches_past_the_cap_are_billed(counted):
    flood, starter = counted["launch_flood"], counted["starter"]
    assert flood["launches"] == 256 and any(
        "billed as one merged entry" in n for n in flood["notes"]
    )
    launches = 255 + 32  # empty ones, then the rows in 32 launches
    billed_work = flood["us"] - launches * counted["launch_us"]
    assert billed_work > 0.8 * (starter["us"] - counted["launch_us"]), (
        "the real work, launched after 255 empty launches, is billed"
    )


def test_a_kernel_calling_host_python_is_not_predicted(counted):
    message, fault = counted["host_python"]["uncounted"]
    assert fault == "candidate" and "calls host Python" in message and "_do_the_work" in message
    assert counted["starter"]["uncounted"] is None and counted["honest_loop"]["uncounted"] is None


def test_host_python_in_a_kernels_decorators_is_not_a_call_from_its_body(tmp_path):
    """`@triton.autotune(configs=_configs())`, the Triton tutorial's pattern, runs `_configs`
    once at import, on a GPU too: the kernel is counted. A call in its body still is not."""
    import importlib.util

    from core.harness.sim.host import host_calls

    path = tmp_path / "tutorial_style.py"
    path.write_text(
        textwrap.dedent(
            """
            import triton
            import triton.language as tl

            def _configs():
                return [triton.Config({"BLOCK": b}) for b in (16, 32)]

            def _helper(x):
                return x

            @triton.autotune(configs=_configs(), key=["n"])
            @triton.jit
            def tuned(x_ptr, n, BLOCK: tl.constexpr):
                i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
                tl.store(x_ptr + i, tl.load(x_ptr + i, mask=i < n), mask=i < n)

            @triton.autotune(configs=_configs(), key=["n"])
            @triton.jit
            def calls_home(x_ptr, n, BLOCK: tl.constexpr):
                _helper(BLOCK)
            """
        )
    )
    spec = importlib.util.spec_from_file_location("tutorial_style", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for kernel in (module.tuned, module.tuned.fn):  # the autotuner, and the kernel it launches
        assert host_calls(kernel) == []
    for kernel in (module.calls_home, module.calls_home.fn):
        assert host_calls(kernel) == ["tutorial_style._helper"]


def test_inflated_num_stages_on_a_loop_free_kernel_buys_nothing(counted):
    assert counted["stages_inflated"]["stages"] == [64], "the compiled kernel's own parameter"
    assert counted["stages_inflated"]["us"] == pytest.approx(
        counted["stages_default"]["us"], rel=0.02
    )


def test_large_inputs_are_drawn_so_zero_pages_do_not_reveal_the_count(counted):
    # It does all its rows (the input was not zero); its check for zeros is billed as the
    # arithmetic it is (issue 37: `tl.abs` and friends), a few percent over the starter.
    assert counted["zero_pages"]["us"] == pytest.approx(counted["starter"]["us"], rel=0.1), (
        "it did all its rows: the input was not zero"
    )


def test_autotune_trials_are_predicted_to_choose_and_never_billed(counted):
    tuned = counted["autotuned"]
    assert tuned["launches"] == 1, (
        "four trials and the chosen launch: only the chosen launch is billed"
    )
    assert any(n.startswith("autotune: 4 trial launch(es)") for n in tuned["notes"])
    assert tuned["grids"] == [[2048, 14336 // 1024, 1]], (
        "BLOCK=1024 is predicted fastest (the fewest waves of programs)"
    )


def test_a_failed_aot_compile_is_never_forgiven():
    reply = {
        "launches": [
            {
                "kernel": "_k",
                "resources": {
                    "ok": False,
                    "rejected": False,
                    "error": "TypeError: an argument type the AOT path does not map",
                },
            }
        ]
    }
    message, fault = uncounted_launch(reply)  # type: ignore[misc]
    assert fault == "infrastructure" and message.startswith(
        "cannot evaluate on this device: the simulator's AOT compile of kernel `_k` failed"
    )


def test_a_candidate_that_does_nothing_on_fake_tensors_is_counted_on_real_ones_and_caught():
    """fake_detect returns zeros when handed fake tensors and launches its kernel on real ones:
    the real run is the one billed, and the two counts differ (`sim_fake_pass_differs`)."""
    task = find_task("activation/silu_mul")
    with Evaluator("sim:h200") as evaluator:
        result = evaluator.evaluate(task, CHEATS / "fake_detect.py")
    assert result.status == "failed" and result.failed_stage == "performance"
    (stage,) = [s for s in result.stages if s.name == "performance"]
    assert "sim_fake_pass_differs: on GPU-sized tensors the call launched 1 Triton kernel" in (
        stage.message or ""
    )


def test_a_count_that_missed_the_work_fails_the_task_formulas_before_the_floor():
    """On a task whose own check.py judges the outputs (sampling), the counted call's values are
    never compared and a pure PyTorch candidate is counted on fake tensors alone: zeros there
    move a sliver of the bytes the task's formula says any implementation moves
    (`sim_less_work`, issue 37); behind that, such a count predicts a time below the
    speed-of-light floor (`faster_than_speed_of_light`)."""
    task = find_task("sampling/top_k_top_p_sampling")
    with Evaluator("sim:h200") as evaluator:
        result = evaluator.evaluate(task, CHEATS / "fake_detect_sampling.py")
    assert result.status == "failed"
    (stage,) = [s for s in result.stages if s.name == "performance"]
    flags = [f for f in result.integrity_flags if f.startswith("faster_than_speed_of_light")]
    assert "sim_less_work: the counted call moves" in (stage.message or "") or (
        flags and "was predicted at" in flags[0]
    ), (stage.message, result.integrity_flags)


def test_rows_filled_with_a_constant_when_counted_fail_the_stage_as_wrong_output():
    """End to end: the trusted worker's reference at the GPU workload against the counted call
    (tests/test_sim_values.py has the rows of honest kernels and the in-place cheat)."""
    task = find_task("activation/silu_mul")
    with Evaluator("sim:h200") as evaluator:
        result = evaluator.evaluate(task, CHEATS / "constant_rows.py")
    assert result.status == "failed" and result.failed_stage == "performance"
    (stage,) = [s for s in result.stages if s.name == "performance"]
    # Its constant rows read nothing: below the byte formula (sim_less_work) before its
    # values are even compared (sim_wrong_output: tests/test_sim_values.py).
    message = stage.message or ""
    assert (
        "sim_wrong_output: the counted call's output `out` differs" in message
        or "sim_less_work: the counted call moves" in message
    ), message
