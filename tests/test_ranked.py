"""Multi-rank tasks: a task declares the world sizes it runs on, the harness starts one process
per rank (gloo on the CPU), gives every rank inputs of its own, checks every rank's outputs
against `reference.run_all`, times the slowest rank, and reports bus bandwidth.

The fixture task `comm/allsum` is an all-reduce: every rank gets the sum of every rank's x.
"""

from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path

import pytest

from core.devices.device import DeviceInfo, Peaks, parse_device
from core.evaluation import scoring
from core.evaluation.job import WorldSizeError, bandwidth_figures, world_size_for
from core.evaluation.validate import validate_task
from core.evaluation.validate_report import ValidateOptions
from core.model.task import Collective, Limits
from core.model.workload import Workload
from core.tasks.fields import TaskError
from core.tasks.spec import load_task

ALLSUM = Path(__file__).resolve().parent / "fixtures" / "ranked_tasks" / "comm" / "allsum"
SHORT = Limits(compile_s=60, correctness_s=6, performance_s=30)


@pytest.fixture(scope="module")
def allsum():
    return load_task(ALLSUM)


def _info(device_id: str, kind: str = "cuda") -> DeviceInfo:
    return DeviceInfo(
        id=device_id,
        type=kind,
        vendor="nvidia",
        model="NVIDIA H200",
        arch="sm_90",
        memory_gb=141,
        units=132,
        versions={},
    )


# -- the task format ------------------------------------------------------------------------------


def test_a_multi_rank_task_declares_its_world_sizes_and_what_it_moves(allsum):
    assert (
        allsum.multi_rank and allsum.world_size.sizes == (1, 2, 3, 4) and allsum.world_size.cpu == 2
    )
    assert allsum.collective == Collective("all_reduce", "4 * N * D")
    at_four = allsum.at_world(Workload({"N": 64, "D": 128}), 4)
    assert at_four.axes == {"N": 64, "D": 128, "W": 4} and at_four.label == "N=64,D=128,W=4"
    assert allsum.collective_bytes(at_four) == 4 * 64 * 128
    assert allsum.flops_for(at_four) == 3 * 64 * 128  # formulas may use W


def _write_variant(tmp_path: Path, edit) -> Path:
    folder = tmp_path / "comm" / "variant"
    folder.mkdir(parents=True)
    for f in ALLSUM.iterdir():
        (folder / f.name).write_bytes(f.read_bytes())
    spec = folder / "task.yaml"
    spec.write_text(edit(spec.read_text()))
    return folder


@pytest.mark.parametrize(
    ("edit", "field", "fix"),
    [
        (lambda t: t.replace("axes:\n", "axes:\n  W: ranks\n"), "axes", "remove `W`"),
        (lambda t: t.replace("cpu: 2}", "cpu: 5}"), "world_size.cpu", "among `sizes`"),
        (
            lambda t: t.replace("world_size: {sizes: [1, 2, 3, 4], cpu: 2}\n", ""),
            "flops",
            "declares `world_size:`",
        ),
        (
            lambda t: t.replace("world_size: {sizes: [1, 2, 3, 4], cpu: 2}\n", "").replace(
                "(W - 1) * ", ""
            ),
            "collective",
            "add `world_size",
        ),
        (
            lambda t: t.replace("kind: all_reduce", "kind: broadcast"),
            "collective.kind",
            "all_gather",
        ),
        (lambda t: t.replace("peak: link", "peak: fp32"), "peak", "peak: link"),
    ],
)
def test_a_bad_multi_rank_declaration_names_the_field_and_the_fix(tmp_path, edit, field, fix):
    with pytest.raises(TaskError) as caught:
        load_task(_write_variant(tmp_path, edit))
    assert caught.value.field == field and fix in caught.value.fix


def test_the_world_size_comes_from_the_task_the_device_and_the_user(allsum):
    cpu = _info("cpu", "cpu")
    assert world_size_for(allsum, cpu) == 2  # the task's CPU default
    assert world_size_for(allsum, cpu, 4) == 4
    with pytest.raises(WorldSizeError, match="runs on 1, 2, 3, 4 ranks, not 5"):
        world_size_for(allsum, cpu, 5)
    assert world_size_for(allsum, _info("cuda:0")) == 1  # one GPU: a world of one
    assert world_size_for(allsum, _info("cuda:4-7")) == 4  # a device group: all of its GPUs
    with pytest.raises(WorldSizeError, match="name a device group such as `cuda:0-3`"):
        world_size_for(allsum, _info("cuda:0"), 4)
    single = load_task(
        Path(__file__).resolve().parent / "fixtures" / "tasks" / "elementwise" / "axpy"
    )
    assert world_size_for(single, cpu) is None
    with pytest.raises(WorldSizeError, match="runs on one device"):
        world_size_for(single, cpu, 2)


def test_a_device_group_makes_all_of_its_gpus_visible_to_one_harness():
    assert parse_device("cuda:2-5").visibility_env(rocm=False) == {
        "CUDA_VISIBLE_DEVICES": "2,3,4,5"
    }
    assert parse_device("cuda:0-1").visibility_env(rocm=True) == {"HIP_VISIBLE_DEVICES": "0,1"}
    assert parse_device("cuda:3").visibility_env(rocm=False) == {"CUDA_VISIBLE_DEVICES": "3"}


# -- bandwidth ------------------------------------------------------------------------------------


def test_bus_bandwidth_uses_the_nccl_tests_factors():
    assert Collective("all_reduce", "1").bus_factor(8) == pytest.approx(2 * 7 / 8)
    for kind in ("all_gather", "reduce_scatter", "all_to_all"):
        assert Collective(kind, "1").bus_factor(8) == pytest.approx(7 / 8)
    assert Collective("all_reduce", "1").bus_factor(1) == 0.0  # one rank moves nothing over a link
    algbw, busbw = scoring.bus_bandwidth_gbps(1e9, 1.75, 10_000.0)  # 1 GB in 10 ms
    assert algbw == pytest.approx(100.0) and busbw == pytest.approx(175.0)


def test_a_collectives_speed_of_light_is_its_link_bandwidth_per_direction(allsum):
    h200 = Peaks(source="spec", link_gbps=900)  # NVLink 4: 900 GB/s bidirectional, 450 each way
    w = allsum.at_world(Workload({"N": 4096, "D": 8192}), 8)
    size = 4 * 4096 * 8192
    assert scoring.link_roofline_us(size, 1.75, h200) == pytest.approx(size * 1.75 / 450e9 * 1e6)
    figures = bandwidth_figures(allsum, w, candidate_us=1000.0, baseline_us=2000.0, peaks=h200)
    assert figures["link_gbps"] == 450
    assert figures["candidate_busbw_gbps"] == pytest.approx(size / 1e-3 / 1e9 * 1.75)
    assert figures["baseline_busbw_gbps"] == pytest.approx(figures["candidate_busbw_gbps"] / 2)


# -- evaluations on the CPU device (gloo) ---------------------------------------------------------


def test_a_correct_candidate_passes_on_two_ranks_with_bus_bandwidth(cpu_evaluator, allsum):
    result = cpu_evaluator.evaluate(allsum, ALLSUM / "starter.py", limits=SHORT)
    assert result.status == "passed", [s.message for s in result.stages]
    assert result.world_size == 2 and not result.integrity_flags
    for w in result.workloads:
        assert w.axes["W"] == 2
        assert len(w.candidate["rank_medians_us"]) == 2
        assert w.candidate["median_us"] == max(w.candidate["rank_medians_us"])  # the slowest rank's
        assert w.candidate["checked_calls"] > 0  # sampled timed calls checked on every rank
        assert w.bandwidth["world_size"] == 2 and w.bandwidth["candidate_busbw_gbps"] > 0
        assert w.bandwidth["link_gbps"] is None  # the CPU has no link in the peaks table


def test_a_candidate_wrong_on_one_rank_fails_and_the_message_names_that_rank(
    cpu_evaluator, allsum, candidates
):
    result = cpu_evaluator.evaluate(allsum, candidates / "allsum_wrong_on_rank1.py", limits=SHORT)
    assert result.status == "failed" and result.failed_stage == "correctness"
    assert "on rank 1" in result.stage("correctness").message
    worst = result.stage("correctness").workloads[0]
    assert worst["worst"]["rank"] == 1


def test_a_candidate_that_skips_the_communication_fails(cpu_evaluator, allsum, candidates):
    result = cpu_evaluator.evaluate(allsum, candidates / "allsum_local.py", limits=SHORT)
    assert result.failed_stage == "correctness" and "rank 0" in result.stage("correctness").message


def _leftover(marker: str) -> list[str]:
    out = subprocess.run(
        ["ps", "-eo", "pid,args"], capture_output=True, text=True, check=False
    ).stdout
    return [line for line in out.splitlines() if marker in line and "ps -eo" not in line]


def test_a_rank_that_hangs_is_killed_at_the_limit_with_every_other_rank(
    cpu_evaluator, allsum, candidates
):
    result = cpu_evaluator.evaluate(allsum, candidates / "allsum_hang_on_rank1.py", limits=SHORT)
    stage = result.stage("correctness")
    assert result.status == "failed" and stage.status == "timeout"
    assert (
        "rank(s) 0, 1 of 2 did not finish" in stage.message
    )  # rank 0 waits in the collective for rank 1
    assert not _leftover("allsum-hang-child"), "a process the hanging rank started is still running"


def test_four_ranks_pass_too(cpu_evaluator, allsum):
    result = cpu_evaluator.evaluate(
        allsum, ALLSUM / "starter.py", limits=SHORT, world_size=4, performance=False
    )
    assert result.status == "passed" and result.world_size == 4
    assert all(w["axes"]["W"] == 4 for w in result.stage("correctness").workloads)


def test_a_reference_without_run_all_is_a_task_bug_reported_as_such(cpu_evaluator, tmp_path):
    folder = _write_variant(tmp_path, lambda t: t)
    (folder / "reference.py").write_text(
        textwrap.dedent("""
        def run(x):
            return x
    """)
    )
    result = cpu_evaluator.evaluate(load_task(folder), folder / "starter.py", limits=SHORT)
    assert result.status == "infrastructure_error"
    assert "defines no `run_all(inputs_by_rank)`" in result.stage("compile").message


def test_the_task_validator_runs_multi_rank_tasks():
    report = validate_task(ALLSUM, ValidateOptions(evaluate=False))
    assert report.passed, [c.message for c in report.failed]
    assert "run_all" in report.check("files").message
    assert report.check("formulas").passed and report.check("zeros_fail").passed


# -- the command line -----------------------------------------------------------------------------


def test_arena_shows_the_world_sizes_and_refuses_one_the_task_cannot_run(capsys):
    from arena_tui.cli import main

    tasks_dir = str(ALLSUM.parent.parent)
    assert main(["--tasks-dir", tasks_dir, "tasks", "show", "comm/allsum"]) == 0
    assert (
        "multi-rank: run on every rank of 1, 2, 3, 4 ranks (CPU device: 2)"
        in capsys.readouterr().out
    )
    code = main(
        [
            "--tasks-dir",
            tasks_dir,
            "eval",
            "--task",
            "comm/allsum",
            "--candidate",
            str(ALLSUM / "starter.py"),
            "--world-size",
            "5",
            "--no-store",
        ]
    )
    assert code == 2
    assert "pass --world-size with one of 1, 2, 3, 4" in capsys.readouterr().err


# -- the bundled tasks ----------------------------------------------------------------------------


def test_a_bundled_collective_passes_on_four_ranks(cpu_evaluator):
    from core.tasks.discovery import find_task

    task = find_task("comm/all_gather")
    result = cpu_evaluator.evaluate(task, task.file("baseline.py"), world_size=4, limits=SHORT)
    assert result.status == "passed" and result.world_size == 4, [s.message for s in result.stages]
    assert all(w.bandwidth["bus_factor"] == pytest.approx(3 / 4) for w in result.workloads)


def test_a_bundled_collective_wrong_on_one_rank_fails(cpu_evaluator, tmp_path):
    from core.tasks.discovery import find_task

    candidate = tmp_path / "gather_rank_order.py"
    candidate.write_text(
        textwrap.dedent("""
        import torch
        import torch.distributed as dist

        def run(x):
            out = torch.empty((dist.get_world_size() * x.shape[0], x.shape[1]), dtype=x.dtype, device=x.device)
            dist.all_gather_into_tensor(out, x.contiguous())
            if dist.get_rank() == 1:  # rank 1 returns the blocks in reverse rank order
                out = torch.cat(list(out.chunk(dist.get_world_size()))[::-1])
            return out
    """)
    )
    result = cpu_evaluator.evaluate(
        find_task("comm/all_gather"), candidate, limits=SHORT, performance=False
    )
    assert (
        result.failed_stage == "correctness" and "on rank 1" in result.stage("correctness").message
    )


def test_a_collective_on_a_sim_device_is_checked_on_gloo_and_predicted_by_the_alpha_beta_model(
    allsum,
):
    from core.evaluation.evaluator import Evaluator

    with Evaluator("sim:h200") as evaluator:
        result = evaluator.evaluate(allsum, ALLSUM / "starter.py", limits=SHORT)
    assert (
        result.status == "passed" and result.timing_kind == "predicted" and result.world_size == 2
    )
    assert "alpha-beta" in result.stage("performance").message
    for w in result.workloads:  # the GPU workloads, at the world the correctness ran on
        assert w.mode == "predicted" and w.band and w.speedup == 1.0
        assert w.candidate["median_us"] > 0 and w.bandwidth["link_gbps"] == 450
        assert w.sol_fraction is not None and 0 < w.sol_fraction <= 1
