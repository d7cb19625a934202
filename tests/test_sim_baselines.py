"""A `sim:` speedup divides by the baseline's *measured* time on the target where the arena has
one (core/data/sim_baselines.json), and by a per-task model fitted to those measurements for a
shape it lacks; the job and the result say which."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

from core.devices.device import sim_info
from core.devices.sim.baselines import (
    TABLE_FILE,
    axes_key,
    baseline_for,
    baseline_on,
    fit_task_model,
    load_table,
)
from core.evaluation.job import build_job
from core.tasks.discovery import find_task

ROOT = Path(__file__).resolve().parent.parent


def test_a_measured_workload_gets_its_measured_time_and_no_band():
    table = load_table()["gpus"]["h200"]["activation/silu_mul"]["torch"]["workloads"]
    known = baseline_for(
        "h200", "activation/silu_mul", None, {"T": 1, "I": 14336}, roofline_us=0.02
    )
    assert known is not None and known["source"] == "measured" and known["band"] == 0
    assert (
        known["median_us"] == table[axes_key({"I": 14336, "T": 1})]["median_us"]
    )  # axes order does not matter


def test_a_shape_the_table_lacks_gets_the_task_model_with_its_error_as_band():
    modelled = baseline_for(
        "h200", "activation/silu_mul", "torch", {"T": 5, "I": 5}, roofline_us=10.0
    )
    assert modelled is not None and modelled["source"] == "model" and 0 < modelled["band"] < 1
    bigger = baseline_for(
        "h200", "activation/silu_mul", "torch", {"T": 5, "I": 5}, roofline_us=100.0
    )
    assert bigger["median_us"] > modelled["median_us"]
    assert (
        baseline_for(
            "h200", "activation/silu_mul", "a-library-never-measured", {"T": 1, "I": 14336}, 1.0
        )
        is None
    )
    assert baseline_for("b200", "activation/silu_mul", None, {"T": 1, "I": 14336}, 1.0) is None


def test_the_fit_recovers_a_launch_floor_and_a_slope():
    points = [(r, 6.0 + 1.5 * r) for r in (0.01, 0.1, 1, 5, 20, 80, 200)]
    model = fit_task_model(points)
    assert model is not None and model.points == 7
    assert math.isclose(model.intercept_us, 6.0, rel_tol=0.1) and math.isclose(
        model.slope, 1.5, rel_tol=0.1
    )
    assert model.error < 0.05


def test_the_shipped_table_is_what_the_bench_script_makes_from_the_committed_runs():
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "sim_baselines", ROOT / "bench" / "sim_baselines.py"
    )
    bench = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("sim_baselines", bench)  # its dataclasses look their module up
    spec.loader.exec_module(bench)  # type: ignore[union-attr]
    shipped = json.loads(TABLE_FILE.read_text())
    paths = [ROOT / p for p in shipped["sources"]]
    found = {k: v for k, v in bench.collect(paths).items() if k[1] == "norm/add_rmsnorm"}
    rebuilt = json.loads(json.dumps(bench.build(found, shipped["sources"]), sort_keys=True))
    assert (
        rebuilt["gpus"]["h200"]["norm/add_rmsnorm"] == shipped["gpus"]["h200"]["norm/add_rmsnorm"]
    )


def test_a_sim_job_carries_the_baseline_time_for_each_gpu_workload(tmp_path):
    task = find_task("norm/add_rmsnorm")
    job = build_job(task, task.file("starter.py"), sim_info("sim:h200"), "cpu", 1, tmp_path)
    performance = job["stages"]["performance"]
    assert performance and all(
        w["measured_baseline"]["source"] == "measured" for w in performance if not w["hidden"]
    )
    assert all(w["measured_baseline"]["median_us"] > 0 for w in performance)
    # an uncalibrated GPU has no measurements: its baseline is predicted from counts, as before
    b200 = build_job(task, task.file("starter.py"), sim_info("sim:b200"), "cpu", 1, tmp_path)
    assert not any("measured_baseline" in w for w in b200["stages"]["performance"])


def test_a_sim_gpu_divides_by_the_implementation_that_gpu_runs():
    # task.yaml's order of preference: the first measured on the H200 (Liger's kernel, not torch)
    known = baseline_on(
        "h200", "norm/add_rmsnorm", ["liger", "torch"], {"T": 1, "H": 4096}, roofline_us=1.0
    )
    assert known is not None and known["impl"] == "liger" and known["source"] == "measured"
    assert (
        known["median_us"]
        < baseline_for("h200", "norm/add_rmsnorm", "torch", {"T": 1, "H": 4096}, 1.0)["median_us"]
    )
    assert (
        baseline_on("h200", "norm/add_rmsnorm", ["liger", "torch"], {"T": 3, "H": 3}, 1.0)["impl"]
        == "liger"
    )  # its model
    # a library never measured there is skipped; no `baselines:` means the torch composition
    assert (
        baseline_on("h200", "norm/add_rmsnorm", ["flashinfer", "torch"], {"T": 1, "H": 4096}, 1.0)[
            "impl"
        ]
        == "torch"
    )
    assert baseline_on("h200", "norm/add_rmsnorm", [], {"T": 1, "H": 4096}, 1.0)["impl"] == "torch"
    # the baseline picks per shape (torch-bmm where B·HKV <= 32): a measured workload uses the one selected there
    order = [b.impl for b in find_task("attention/decode_paged_gqa").baselines]
    small = {"B": 1, "L": 32768, "P": 16, "HQ": 32, "HKV": 8, "D": 128}
    assert (
        baseline_on("h200", "attention/decode_paged_gqa", order, small, 1.0)["impl"] == "torch-bmm"
    )
    assert (
        baseline_on(
            "h200", "attention/decode_paged_gqa", order, {**small, "B": 32, "L": 8192}, 1.0
        )["impl"]
        == "torch"
    )
