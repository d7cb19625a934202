"""A `sim:` device's count must not show a narrower multiply than the task allows
(docs/integrity.md, "Simulated devices"): a bf16 GEMM that casts its tiles to float8 only at
GPU sizes (the counted pass; checked calls run at CPU sizes, in bf16) is billed fp8 dots at
twice the bf16 rate; `sim_narrow_dot` fails it. Tasks that declare 8-bit tensors may use them."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from core.harness.sim import narrow as sim_narrow
from tests.conftest import ROOT
from tests.sim_counting import SIM_H200_SETUP

COUNT = (
    """
import importlib.util, json, sys
from core.devices.device import sim_info
from core.evaluation.job import spec_json
from core.harness.sim import narrow as sim_narrow, predict as sim_predict, stage as sim_stage
from core.harness.sim.model import Constants, Target, predict_side
from core.devices.sim import sim_section
from core.tasks.discovery import find_task

"""
    + SIM_H200_SETUP
    + """
task = find_task("gemm/bf16_gemm")
axes = {"M": 1024, "N": 1024, "K": 1024}
workload = {"axes": axes, "shapes": {s.name: list(s.concrete_shape(axes)) for s in task.inputs + task.outputs}}
declared = [s.dtype for s in task.inputs + task.outputs]
out = {}
for name in ("cheat", "honest"):
    spec = importlib.util.spec_from_file_location(name, sys.argv[1])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.SHORTCUT = name == "cheat"
    reply = sim_predict.predict_candidate(module.run, [spec_json(s) for s in task.inputs], workload, 7, None, compiler)
    launches = sim_stage.checked_launches(reply)
    ops = sim_stage.checked_ops(reply["torch_ops"], "c")
    side = predict_side(launches, ops, target, constants)
    out[name] = {"us": side["median_us"], "problem": sim_narrow.problem([s for s, _ in launches], ops, declared)}
print(json.dumps(out))
"""
)


def test_a_gemm_that_multiplies_in_fp8_only_when_counted_fails_and_its_honest_twin_does_not():
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            textwrap.dedent(COUNT),
            str(ROOT / "tests/sim_cheats/fp8_when_counted.py"),
        ],
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["cheat"]["us"] < 0.9 * got["honest"]["us"], (
        got
    )  # what it would have gained: fp8 dots billed faster
    assert got["cheat"]["problem"].startswith(
        "sim_narrow_dot: kernel `_gemm_kernel` multiplies in fp8e4nv"
    ), got
    assert got["honest"]["problem"] is None


def test_eight_bit_multiplies_are_allowed_where_the_task_declares_eight_bit_tensors():
    launch = {"kernel": "k", "per_program": {"dot_flops": {"fp8e4nv": 1.0}}}
    assert sim_narrow.problem([launch], [], ["float8_e4m3fn", "float32", "bfloat16"]) is None
    assert sim_narrow.problem([launch], [], ["bfloat16"]).startswith("sim_narrow_dot:")
    assert sim_narrow.problem(
        [], [{"name": "_scaled_mm", "flops": 8.0, "dtype": "fp8e4nv"}], ["bfloat16"]
    ).startswith("sim_narrow_dot: torch op")
    assert (
        sim_narrow.problem(
            [{"kernel": "k", "per_program": {"dot_flops": {"bf16": 1.0, "fp32": 2.0}}}],
            [],
            ["bfloat16"],
        )
        is None
    )
