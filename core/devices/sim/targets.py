"""What a `sim:` job carries: the target GPU's figures and the model's constants.

The figures come from the peaks table (measured where recorded, else spec) and the
per-architecture limits in core/data/sim_constants.json; the constants are the ones fitted on
that GPU's timings, or, for a GPU nobody has measured, the H200 fit carried over with a wider
band and the label `uncalibrated`.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from core.devices.device import DeviceError, DeviceInfo

CONSTANTS_FILE = Path(__file__).resolve().parents[2] / "data" / "sim_constants.json"


@lru_cache(maxsize=1)
def load_constants() -> dict[str, Any]:
    return json.loads(CONSTANTS_FILE.read_text())


def calibration_label(key: str) -> str:
    """`calibrated (on N H200 timings)` or `uncalibrated`, as results and device lists say it."""
    fitted = load_constants()["fitted"].get(key)
    return fitted["label"] if fitted else "uncalibrated"


def sim_section(info: DeviceInfo, family: str | None = None) -> dict[str, Any]:
    """The job's `sim` section for a simulated device. `family`: the task's (gemm, norm, ...):
    its prediction's band is the one fitted for its family where the device has one (the
    held-out errors of published kernels of that family: bench/sim_heldout.py), else the
    device's single band."""
    data = load_constants()
    key = info.peaks_key or info.id.removeprefix("sim:")
    arch = data["arch"].get(info.arch)
    peaks = info.sol_peaks
    if (
        arch is None
        or peaks is None
        or not peaks.bf16_tflops
        or not peaks.hbm_tbps
        or not info.units
    ):
        raise DeviceError(
            f"`{info.id}`: no simulation figures for architecture `{info.arch}` (core/data/sim_constants.json)"
        )
    fitted = data["fitted"].get(key)
    if fitted:
        constants = dict(fitted["constants"])
        bands = fitted.get("bands") or {}
        if family in bands:
            constants["band"] = max(float(bands[family]), 0.05)
        # an anchored prediction's band (sim_anchor): the fit half's errors once anchored
        anchored = (fitted.get("anchored_bands") or {}).get(family)
        anchored_band = max(float(anchored), 0.05) if anchored is not None else None
    else:
        # An uncalibrated device is never given a tighter band than a calibrated one earned.
        fitted_bands = [f["constants"] for f in data["fitted"].values()]
        family_bands = [
            float(b) for f in data["fitted"].values() for b in (f.get("bands") or {}).values()
        ]
        band = max([data["uncalibrated_band"]] + [c["band"] for c in fitted_bands] + family_bands)
        lib_band = max(
            [data["uncalibrated_band"], data["default"]["lib_band"]]
            + [c["lib_band"] for c in fitted_bands]
        )
        constants = {**data["default"], "band": band, "lib_band": lib_band}
        if info.spec and info.spec.launch_overhead_us:
            constants["launch_us"] = info.spec.launch_overhead_us
        anchored_band = None
    target = {
        "key": key,
        "units": info.units,
        "bf16_tflops": peaks.bf16_tflops,
        "fp8_tflops": peaks.fp8_tflops,
        "fp32_tflops": peaks.fp32_tflops,
        "hbm_tbps": peaks.hbm_tbps,
        "l2_tbps": arch["l2_tbps_per_unit"] * info.units,
        **{
            k: arch[k]
            for k in (
                "warp_size",
                "max_warps_per_unit",
                "registers_per_unit",
                "shared_per_unit",
                "fast_mma",
            )
        },
    }
    calibration = calibration_label(key)
    return {
        "properties": device_properties(info, arch),
        "label": f"{info.id}, {calibration}",
        "model": data["model"],
        "calibration": calibration,
        "target": target,
        "constants": constants,
        **({"anchored_band": anchored_band} if anchored_band is not None else {}),
        "peaks_source": peaks.source,
        # the candidate's worker predicts autotune trials with these to choose a config (never its billed time: the parent computes that)
        "aot": {
            **arch["aot"],
            "name": info.arch,
            "shared_per_unit": arch["shared_per_unit"],
            "trial_model": {"target": target, "constants": constants},
        },
    }


def device_properties(info: DeviceInfo, arch: dict[str, Any]) -> dict[str, Any]:
    """What torch.cuda says of the simulated GPU to the candidate's code (sim/gpu_queries.py):
    the figures a kernel written for that GPU sizes itself by (its SM count for a persistent
    grid, its capability, its shared memory)."""
    found = re.fullmatch(r"sm_(\d+)(\d)|gfx(\d)(\d)(\w)", info.arch)
    if found and found.group(1):
        major, minor = int(found.group(1)), int(found.group(2))
    elif found:
        major, minor = int(found.group(3)), int(found.group(4))
    else:
        major, minor = 0, 0
    return {
        "name": info.model,
        "major": major,
        "minor": minor,
        "total_memory": int((info.memory_gb or 0) * 1e9),
        "multi_processor_count": info.units,
        "warp_size": arch["warp_size"],
        "max_threads_per_multi_processor": arch["max_warps_per_unit"] * arch["warp_size"],
        "regs_per_multiprocessor": arch["registers_per_unit"],
        "shared_memory_per_multiprocessor": arch["shared_per_unit"],
        # NVIDIA keeps 1 KiB of each SM's shared memory from any one block
        "shared_memory_per_block_optin": arch["shared_per_unit"]
        - (1024 if info.vendor == "nvidia" else 0),
        **({"gcnArchName": info.arch} if info.arch.startswith("gfx") else {}),
    }


def sim_baseline(
    task: Any, workload: Any, info: DeviceInfo, roofline_us: float | None
) -> dict[str, Any] | None:
    """The baseline's time for one performance workload on a simulated device, from the measured
    table (core/devices/sim/baselines.py), of the implementation that GPU would run (`impl`): measured
    there, or the task's fitted model; None where the table has nothing for the task on that
    GPU (the baseline is then predicted from counts); {"stale": True, "note"} where the figures
    were measured with another baseline than the task's today (predicted too, and the note says so)."""
    from core.devices.sim.baselines import baseline_on
    from core.devices.sim.provenance import task_code

    key = info.peaks_key or info.id.removeprefix("sim:")
    order = [
        b.impl for b in getattr(task, "baselines", ())
    ]  # task.yaml's `baselines:`, in preference
    code = task_code(task.path).code_sha256
    return baseline_on(key, task.id, order, dict(workload.axes), roofline_us, code)


def sim_anchor(task: Any, workload: Any, info: DeviceInfo) -> dict[str, Any] | None:
    """The anchor of one performance workload on a simulated device (core/devices/sim/anchors.py):
    the model's count of the task's baseline and its measured time, so that the harness predicts
    the candidate at model(candidate) × measured / model(baseline); None where there is none
    (not anchored), {"stale": True, "note"} where it was counted from other code than today's."""
    from core.devices.sim.anchors import anchor_for
    from core.devices.sim.provenance import task_code

    key = info.peaks_key or info.id.removeprefix("sim:")
    return anchor_for(key, task.id, dict(workload.axes), task_code(task.path).code_sha256)
