"""Devices: ids, pinning, the peaks table and its user overrides, `arena devices`."""

from __future__ import annotations

import json

import pytest

from arena_tui.cli import main
from core.devices.device import DeviceError, LocalDevice, load_peaks, match_peaks, parse_device


def test_device_ids_and_clear_errors_for_the_rest():
    assert parse_device("cuda:3") == LocalDevice("cuda:3")
    assert parse_device("cpu").torch_device() == "cpu"
    for bad, says in (
        ("gpu0", "use cpu, cuda:N"),
        ("sim:foo", "the simulated GPUs are sim:h100"),
        ("box1/cuda:0", "a remote host.s device: those run through `arena run`"),
    ):
        with pytest.raises(DeviceError, match=says):
            parse_device(bad)


def test_a_gpu_is_pinned_by_its_vendors_variable_and_seen_as_device_zero(monkeypatch):
    import core.devices.device as devices

    monkeypatch.setattr(devices, "_is_rocm_build", lambda: False)
    env = LocalDevice("cuda:3").harness_env()
    assert env["CUDA_VISIBLE_DEVICES"] == "3" and "HIP_VISIBLE_DEVICES" not in env
    assert LocalDevice("cuda:3").torch_device() == "cuda:0"
    monkeypatch.setattr(devices, "_is_rocm_build", lambda: True)
    env = LocalDevice("cuda:1").harness_env()
    assert env["HIP_VISIBLE_DEVICES"] == "1" and "CUDA_VISIBLE_DEVICES" not in env, (
        "ROCm would apply both, one after the other"
    )
    assert LocalDevice("xpu:2").harness_env()["ZE_AFFINITY_MASK"] == "2"
    assert LocalDevice("cpu").harness_env()["CUDA_VISIBLE_DEVICES"] == ""


def test_interpreting_devices_run_numpys_blas_on_one_thread_unless_the_user_says_otherwise(
    monkeypatch,
):
    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    assert LocalDevice("cpu").harness_env()["OPENBLAS_NUM_THREADS"] == "1"
    assert LocalDevice("sim:h200").harness_env()["OPENBLAS_NUM_THREADS"] == "1"
    assert "OPENBLAS_NUM_THREADS" not in LocalDevice("cuda:0").harness_env()
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "4")
    assert LocalDevice("cpu").harness_env()["OPENBLAS_NUM_THREADS"] == "4"


def test_peaks_table_covers_every_vendor_and_matches_device_names(tmp_path):
    table = load_peaks(tmp_path / "none.yaml")
    for key in ("h100", "h200", "b200", "mi300x", "mi325x", "mi355x", "max1550"):
        spec = table[key]["spec"]
        assert spec["bf16_tflops"] > 0 and spec["hbm_tbps"] > 0 and table[key]["sources"]
    assert {table[k]["vendor"] for k in table} == {"nvidia", "amd", "intel"}
    assert match_peaks("NVIDIA H200", table) == "h200"
    assert match_peaks("NVIDIA H100 80GB HBM3", table) == "h100"
    assert match_peaks("NVIDIA GH200 480GB", table) is None
    assert match_peaks("AMD Instinct MI300X", table) == "mi300x"


def test_user_figures_merge_over_the_bundled_ones(tmp_path):
    user = tmp_path / "peaks.yaml"
    user.write_text("devices:\n  mi300x:\n    measured: {bf16_tflops: 700, hbm_tbps: 4.1}\n")
    table = load_peaks(user)
    assert table["mi300x"]["measured"]["bf16_tflops"] == 700
    assert table["mi300x"]["spec"]["bf16_tflops"] > 1000, "spec kept"
    assert table["h200"]["measured"]["hbm_tbps"] == 4.25, "other entries untouched"


def test_a_measured_timer_offset_alone_leaves_the_speed_of_light_figures_labelled_spec():
    """The H100's measured entry holds only its timer's offset: its intervals widen by it, and
    its speed-of-light fractions still say they come from the datasheet."""
    from core.devices.device import info_from_probe

    h100 = info_from_probe(
        "cuda:0", {"type": "cuda", "vendor": "nvidia", "model": "NVIDIA H100 80GB HBM3"}
    )
    peaks = h100.sol_peaks
    assert peaks is not None and peaks.timer_offset_us == 0.16
    assert peaks.source == "spec" and peaks.hbm_tbps == 3.35
    h200 = info_from_probe("cuda:0", {"type": "cuda", "vendor": "nvidia", "model": "NVIDIA H200"})
    assert h200.sol_peaks is not None and h200.sol_peaks.source == "measured", (
        "a measured bandwidth is labelled measured"
    )


def test_arena_devices_lists_the_cpu(capsys):
    assert main(["devices", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    cpu = next(r for r in rows if r["id"] == "cpu")
    assert cpu["timing_kind"] == "cpu" and cpu["peaks"] is None
    simulated = {r["id"]: r for r in rows if r["id"].startswith("sim:")}
    assert set(simulated) == {"sim:h100", "sim:h200", "sim:b200", "sim:mi300x", "sim:mi355x"}
    assert all(r["timing_kind"] == "predicted" for r in simulated.values())
