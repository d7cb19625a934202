"""What a device is: vendor, model, architecture, memory, multiprocessors, L2; and, with
`--peaks`, what it measures: copy bandwidth, the bf16 matrix rate and the launch floor.

Run as `python -m core.harness probe DEVICE [--peaks]`; prints one JSON object. It runs no
candidate code, so stdout is safe to read. Local and remote devices are probed the same way.
The `peaks` object it prints under `--peaks` has the keys of a peaks-table `measured:`
section (core/data/peaks.yaml; docs/devices.md says how to add it to your own table).
"""

from __future__ import annotations

import os
import platform
from typing import Any

import torch

from core.harness.provenance import versions
from core.harness.timing import time_calls


def probe(device_id: str) -> dict[str, Any]:
    device = torch.device(device_id)
    info: dict[str, Any] = {"id": device_id, "type": device.type, "versions": versions()}
    if device.type == "cpu":
        info.update(
            vendor="cpu",
            model=_cpu_model(),
            arch=platform.machine(),
            memory_gb=_cpu_memory_gb(),
            units=os.cpu_count(),
        )
    elif device.type == "cuda":
        if not torch.cuda.is_available():
            raise RuntimeError(
                "torch sees no CUDA or ROCm device (torch.cuda.is_available() is False)"
            )
        index = device.index or 0
        if index >= torch.cuda.device_count():
            raise RuntimeError(
                f"cuda:{index} does not exist: torch sees {torch.cuda.device_count()} device(s)"
            )
        props = torch.cuda.get_device_properties(index)
        hip = getattr(torch.version, "hip", None)
        info.update(
            vendor="amd" if hip else "nvidia",
            model=props.name,
            arch=getattr(props, "gcnArchName", "").split(":")[0]
            if hip
            else f"sm_{props.major}{props.minor}",
            memory_gb=props.total_memory / 1e9,
            units=props.multi_processor_count,
            l2_mb=getattr(props, "L2_cache_size", 0) / 1e6,
        )
    elif device.type == "xpu":
        xpu = getattr(torch, "xpu", None)
        if xpu is None or not xpu.is_available():
            raise RuntimeError("torch sees no Intel XPU device (torch.xpu.is_available() is False)")
        index = device.index or 0
        props = xpu.get_device_properties(index)
        info.update(
            vendor="intel",
            model=props.name,
            arch=str(getattr(props, "architecture", getattr(props, "platform_name", "xpu"))),
            memory_gb=props.total_memory / 1e9,
            units=getattr(props, "gpu_subslice_count", None)
            or getattr(props, "max_compute_units", None),
            driver=getattr(props, "driver_version", None),
        )
    else:
        raise RuntimeError(f"unsupported device type {device.type}")
    return info


def measure_peaks(device_id: str, budget_ms: float = 200.0) -> dict[str, Any]:
    """The figures a speed of light is built from, measured with the arena's own timer
    (core/harness/timing.py: L2 flushed before each call, device events, the median):

    - launch_graph_us / launch_eager_us: the launch floor, a one-element kernel timed as
      the harness times a decode-sized workload (a CUDA graph replay) and as it times the
      rest (eager, queued). No kernel, however small its work, is timed below it, so the
      speed of light of a workload is never below it (core/evaluation/scoring.py);
    - hbm_tbps: a 2 GiB device-to-device copy, bytes read plus written;
    - bf16_tflops: an 8192^3 bf16 torch.matmul (the vendor BLAS) on random data."""
    device = torch.device(device_id)
    if device.type not in ("cuda", "xpu"):
        raise RuntimeError(f"peaks are measured on a GPU; {device_id} is a {device.type} device")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    one = torch.zeros(1, device=device)
    out: dict[str, Any] = {}

    def median(fn, args, graph: bool) -> float:
        times = time_calls(fn, lambda _i: args, device, budget_ms, 20, 5000, 0, graph)["times_us"]
        return sorted(times)[len(times) // 2]

    tiny = lambda x: x.add_(1.0)
    if device.type == "cuda":
        out["launch_graph_us"] = round(median(tiny, [one], True), 3)
    out["launch_eager_us"] = round(median(tiny, [one], False), 3)
    n = 2 * 1024**3 // 4
    src, dst = torch.empty(n, device=device), torch.empty(n, device=device)
    copy_us = median(lambda a, b: b.copy_(a), [src, dst], False)
    out["hbm_tbps"] = round(2 * 2 * 1024**3 / (copy_us * 1e-6) / 1e12, 3)
    del src, dst
    a = torch.randn(8192, 8192, device=device, dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device=device, dtype=torch.bfloat16)
    mm_us = median(torch.matmul, [a, b], False)
    out["bf16_tflops"] = round(2 * 8192**3 / (mm_us * 1e-6) / 1e12, 1)
    out["method"] = (
        f"python -m core.harness probe {device_id} --peaks (torch {torch.__version__}): medians under the arena's timer, "
        "L2 flushed; launch floor = a one-element add_ (graph replay and eager), copy = 2 GiB device to device, bf16 = 8192^3 matmul"
    )
    return out


def local_device_ids() -> list[str]:
    """`cpu` and every GPU torch sees here, as the arena names them."""
    ids = ["cpu"]
    if torch.cuda.is_available():
        ids += [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    xpu = getattr(torch, "xpu", None)
    if xpu is not None and xpu.is_available():
        ids += [f"xpu:{i}" for i in range(xpu.device_count())]
    return ids


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            lines = f.readlines()
        for line in lines:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _cpu_memory_gb() -> float | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1e9
    except (ValueError, OSError):
        return None
