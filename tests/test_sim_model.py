"""The simulated GPUs (`sim:<gpu>`): device ids, counting Triton kernels in the interpreter, the
AOT compile for a GPU that is not here, the time model, and the collectives' alpha-beta model.
docs/simulation.md describes the design these tests hold it to."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from core.devices.device import SIM_GPUS, DeviceError, parse_device, probe
from core.devices.sim import predict_collective, sim_section
from core.harness.sim.model import Constants, Target, launch_time, predict_side

ROOT = Path(__file__).resolve().parent.parent

# Kernels counted in a child process: the interpreter switch is process-wide (test_triton_cpu.py).
KERNELS = """
import json, sys, torch, triton, triton.language as tl
from core.harness.sim import predict as sim_predict
from core.harness.triton_cpu import enable_interpreter
compiler = sim_predict.CompileCache({"backend": "cuda", "arch": 90, "warp_size": 32, "name": "sm_90"}, None)
enable_interpreter()
from core.harness.sim.count import Counting

@triton.jit
def copy1(x, y, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y + i, tl.load(x + i, mask=i < n), mask=i < n)

@triton.jit
def copy2(x, z, y, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y + i, tl.load(x + i, mask=i < n) + tl.load(z + i, mask=i < n), mask=i < n)

@triton.jit
def mm(a, b, c, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        x = tl.load(a + rm[:, None] * K + (k + rk)[None, :])
        w = tl.load(b + (k + rk)[:, None] * N + rn[None, :])
        acc = tl.dot(x, w, acc)
    tl.store(c + rm[:, None] * N + rn[None, :], acc.to(tl.bfloat16))

def count(fn):
    with Counting() as c:
        fn()
    return [dict(l.summary(), resources=compiler.resources(l)) for l in c.launches]

n = 1 << 22
x, z, y = torch.randn(n), torch.randn(n), torch.empty(n)
M, N, K = 256, 256, 4096
a, b, out = torch.randn(M, K).bfloat16(), torch.randn(K, N).bfloat16(), torch.empty(M, N).bfloat16()
print(json.dumps({
    "copy1": count(lambda: copy1[(n // 1024,)](x, y, n, BLOCK=1024)),
    "copy2": count(lambda: copy2[(n // 1024,)](x, z, y, n, BLOCK=1024)),
    "mm": count(lambda: mm[(M // 64, N // 64)](a, b, out, M, N, K, BM=64, BN=64, BK=64, num_warps=4, num_stages=3)),
}))
"""


@pytest.fixture(scope="module")
def counted(tmp_path_factory) -> dict:
    script = tmp_path_factory.mktemp("sim") / "kernels.py"
    script.write_text(textwrap.dedent(KERNELS))
    proc = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def h200() -> tuple[Target, Constants]:
    section = sim_section(probe("sim:h200"))
    return Target.from_json(section["target"]), Constants.from_json(section["constants"])


# --- devices ---------------------------------------------------------------------------------


def test_sim_devices_are_the_five_named_gpus_and_anything_else_is_refused_with_the_list():
    for key in SIM_GPUS:
        assert parse_device(f"sim:{key}").torch_device() == "cpu", "a simulated GPU runs on the CPU"
    with pytest.raises(DeviceError, match="sim:h100, sim:h200, sim:b200, sim:mi300x, sim:mi355x"):
        parse_device("sim:foo")


def test_a_sim_device_is_labelled_predicted_and_says_whether_it_is_calibrated():
    h = probe("sim:h200")
    assert (h.type, h.timing_kind, h.peaks_key) == ("sim", "predicted", "h200")
    assert (
        h.extra["calibration"].startswith("calibrated (on ")
        and "H200 timings" in h.extra["calibration"]
    )
    assert probe("sim:mi300x").extra["calibration"] == "uncalibrated", (
        "nobody has measured an MI300X"
    )
    assert sim_section(probe("sim:mi300x"))["aot"]["backend"] == "hip"


def test_an_uncalibrated_device_never_claims_a_tighter_band_than_the_calibrated_one():
    calibrated = sim_section(probe("sim:h200"))["constants"]
    for key in ("mi300x", "b200"):
        guessed = sim_section(probe(f"sim:{key}"))["constants"]
        assert (
            guessed["band"] >= calibrated["band"] and guessed["lib_band"] >= calibrated["lib_band"]
        )


# --- counting --------------------------------------------------------------------------------


def test_a_dot_kernels_flops_are_counted_exactly(counted):
    (launch,) = counted["mm"]
    per_program = launch["per_program"]["dot_flops"]["bf16"]
    assert launch["programs"] == 16
    assert per_program * launch["programs"] == 2 * 256 * 256 * 4096, (
        "every K step of every tile, though only 3 of 64 were run"
    )


def test_bytes_are_counted_per_lane_and_each_tensor_once_for_dram(counted):
    (one,), (two,) = counted["copy1"], counted["copy2"]
    n = 1 << 22
    assert one["per_program"]["load_bytes"] * one["programs"] == 4 * n
    assert two["per_program"]["load_bytes"] * two["programs"] == 8 * n
    assert one["dram_bytes"] == pytest.approx(8 * n) and two["dram_bytes"] == pytest.approx(12 * n)
    assert one["sampled"] < one["programs"], "a large grid is sampled"


def test_a_kernel_with_twice_the_traffic_is_predicted_slower(counted):
    target, c = h200()
    (one,), (two,) = counted["copy1"], counted["copy2"]
    t1, t2 = (
        launch_time(one, one["resources"], target, c),
        launch_time(two, two["resources"], target, c),
    )
    assert t1.bound == t2.bound == "dram"
    assert t2.time_us > t1.time_us
    assert t2.terms_us["dram"] == pytest.approx(1.5 * t1.terms_us["dram"]), (
        "12 bytes per element against 8"
    )
    assert t2.time_us - c.launch_us == pytest.approx(1.5 * (t1.time_us - c.launch_us), rel=0.05)


def test_the_aot_compile_for_sm90_reports_registers_shared_memory_and_the_matrix_path(counted):
    (launch,) = counted["mm"]
    res = launch["resources"]
    assert res["ok"], res.get("error")
    assert res["registers"] > 0 and res["shared_bytes"] > 0
    assert res["mma"] == "wgmma", "a 64x64 bf16 tile on sm_90 takes Hopper's warpgroup MMA"


# --- the model ---------------------------------------------------------------------------------


def test_a_prediction_is_labelled_predicted_and_carries_a_band(counted):
    target, c = h200()
    side = predict_side([(s, s["resources"]) for s in counted["mm"]], [], target, c)
    assert side["timing"] == "predicted"
    assert side["low_us"] < side["median_us"] < side["high_us"] and side["band"] > 0


def test_waves_make_one_program_more_than_a_full_wave_cost_a_second_wave():
    target, c = h200()
    per = {
        "load_bytes": 0,
        "store_bytes": 0,
        "load_sectors": 0,
        "store_sectors": 0,
        "loads": 0,
        "stores": 0,
        "dot_flops": {"bf16": 2 * 128 * 128 * 4096},
        "alu_ops": 0,
        "sfu_ops": 0,
        "atomics": 0,
    }
    res = {
        "ok": True,
        "registers": 255,
        "shared_bytes": 160_000,
        "mma": "wgmma",
        "num_warps": 8,
        "num_stages": 3,
    }
    full = launch_time(
        {"programs": target.units, "per_program": per, "dram_bytes": 0}, res, target, c
    )
    over = launch_time(
        {"programs": target.units + 1, "per_program": per, "dram_bytes": 0}, res, target, c
    )
    assert full.detail["waves"] == 1 and over.detail["waves"] == 2
    assert over.time_us - c.launch_us == pytest.approx(2 * (full.time_us - c.launch_us))


def test_the_slow_matrix_path_is_predicted_slower_than_wgmma():
    target, c = h200()
    per = {"dot_flops": {"bf16": 1e9}, "loads": 0}
    fast = launch_time(
        {"programs": 132, "per_program": per},
        {"ok": True, "mma": "wgmma", "num_warps": 4},
        target,
        c,
    )
    slow = launch_time(
        {"programs": 132, "per_program": per}, {"ok": True, "mma": "mma", "num_warps": 4}, target, c
    )
    assert slow.time_us > 1.5 * fast.time_us


def _per(**counts) -> dict:
    return {
        "load_bytes": 0,
        "store_bytes": 0,
        "load_sectors": 0,
        "store_sectors": 0,
        "loads": 0,
        "stores": 0,
        "dot_flops": {},
        "alu_ops": 0,
        "sfu_ops": 0,
        "atomics": 0,
        **counts,
    }


def test_terms_that_do_not_bind_still_show_so_variants_bound_alike_are_not_tied():
    target, c = h200()
    res = {
        "ok": True,
        "registers": 128,
        "shared_bytes": 32768,
        "mma": "wgmma",
        "num_warps": 4,
        "num_stages": 3,
    }
    lean = launch_time(
        {
            "programs": 132,
            "per_program": _per(dot_flops={"bf16": 2 * 128 * 128 * 4096}, loads=64),
            "dram_bytes": 0,
        },
        res,
        target,
        c,
    )
    busy = launch_time(
        {
            "programs": 132,
            "per_program": _per(dot_flops={"bf16": 2 * 128 * 128 * 4096}, loads=128),
            "dram_bytes": 0,
        },
        res,
        target,
        c,
    )
    assert (
        lean.bound == busy.bound == "tensor" and lean.terms_us["tensor"] == busy.terms_us["tensor"]
    )
    assert busy.time_us > lean.time_us, (
        "twice the load rounds under the same dots: slower, not a tie"
    )
    assert busy.time_us - lean.time_us < busy.terms_us["latency"] - lean.terms_us["latency"], (
        "but mostly hidden"
    )


def test_many_elements_per_thread_cost_their_own_instruction_stream():
    target, c = h200()
    per = _per(
        load_sectors=256, store_sectors=128, loads=2, stores=1, alu_ops=9 * 4096, sfu_ops=4096
    )  # silu_mul on a 4096 block
    one = launch_time(
        {"programs": 4, "per_program": per, "dram_bytes": 0},
        {"ok": True, "registers": 64, "num_warps": 1},
        target,
        c,
    )
    many = launch_time(
        {"programs": 4, "per_program": per, "dram_bytes": 0},
        {"ok": True, "registers": 64, "num_warps": 16},
        target,
        c,
    )
    assert one.terms_us["thread"] == pytest.approx(16 * many.terms_us["thread"]), (
        "128 elements per thread against 8"
    )
    assert one.time_us > many.time_us and one.bound == "thread"


def test_a_launch_smaller_than_the_gpu_reads_at_its_busiest_units_share_of_l2():
    target, c = h200()
    per = _per(load_sectors=65536, loads=2)  # 2 MiB a program
    res = {"ok": True, "registers": 64, "num_warps": 4}
    few = launch_time({"programs": 24, "per_program": per, "dram_bytes": 0}, res, target, c)
    full = launch_time(
        {"programs": target.units, "per_program": per, "dram_bytes": 0}, res, target, c
    )
    assert few.terms_us["l2"] == pytest.approx(full.terms_us["l2"]), (
        "one program per unit either way: the same time"
    )
    assert few.terms_us["l2"] == pytest.approx(
        2 * 2**20 / (target.l2_tbps * 1e12 / target.units) * 1e6
    )


# --- collectives -------------------------------------------------------------------------------


PEAKS = {"link_gbps": 900, "link_latency_us": 2.0, "launch_overhead_us": 3.0}


def test_all_reduce_moves_twice_what_all_gather_moves():
    big = 256 << 20
    ar, ag = (
        predict_collective("all_reduce", big, 8, PEAKS),
        predict_collective("all_gather", big, 8, PEAKS),
    )
    assert ar.timing == "predicted" and ar.low_us < ar.time_us < ar.high_us
    assert ar.time_us == pytest.approx(2 * ag.time_us, rel=0.05)
    assert ar.busbw_gbps == pytest.approx(ag.busbw_gbps, rel=0.05), "bus bandwidth is the same link"
    assert ar.busbw_gbps < PEAKS["link_gbps"] / 2


def test_small_messages_take_a_latency_algorithm_and_large_ones_the_ring():
    assert predict_collective("all_reduce", 4096, 8, PEAKS).algorithm == "tree"
    assert predict_collective("all_reduce", 1 << 30, 8, PEAKS).algorithm == "ring"
    assert predict_collective("all_gather", 4096, 8, PEAKS).algorithm == "direct"
    assert predict_collective("all_gather", 1 << 30, 8, PEAKS).algorithm == "ring"


def test_more_ranks_cost_more_latency_and_approach_the_ring_bandwidth_limit():
    small = [predict_collective("all_reduce", 8192, w, PEAKS).time_us for w in (2, 4, 8)]
    assert small[0] < small[1] < small[2]
    big = [predict_collective("reduce_scatter", 1 << 30, w, PEAKS).time_us for w in (2, 4, 8)]
    assert big[0] < big[1] < big[2] < 2 * big[0], "(W-1)/W of the data: from 1/2 to 7/8"
    assert (
        predict_collective("all_to_all", 1 << 20, 1, PEAKS).time_us == PEAKS["launch_overhead_us"]
    )


def test_a_collective_needs_a_known_kind_and_a_link_figure():
    with pytest.raises(ValueError, match="unknown collective"):
        predict_collective("broadcast", 1024, 8, PEAKS)
    with pytest.raises(ValueError, match="link_gbps"):
        predict_collective("all_reduce", 1024, 8, {"link_gbps": None})
    h200_peaks = probe("sim:h200").spec
    assert predict_collective("all_reduce", 1 << 20, 8, h200_peaks).time_us > 0, (
        "a Peaks object works too"
    )
