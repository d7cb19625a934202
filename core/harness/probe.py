"""What a device is: vendor, model, architecture, memory, multiprocessors, L2.

Run as `python -m core.harness probe DEVICE`; prints one JSON object. It runs no candidate
code, so stdout is safe to read. Local and remote devices are probed the same way.
"""

from __future__ import annotations

import os
import platform
from typing import Any

import torch

from .runner import versions


def probe(device_id: str) -> dict[str, Any]:
    device = torch.device(device_id)
    info: dict[str, Any] = {"id": device_id, "type": device.type, "versions": versions()}
    if device.type == "cpu":
        info.update(vendor="cpu", model=_cpu_model(), arch=platform.machine(), memory_gb=_cpu_memory_gb(), units=os.cpu_count())
    elif device.type == "cuda":
        if not torch.cuda.is_available():
            raise RuntimeError("torch sees no CUDA or ROCm device (torch.cuda.is_available() is False)")
        index = device.index or 0
        if index >= torch.cuda.device_count():
            raise RuntimeError(f"cuda:{index} does not exist: torch sees {torch.cuda.device_count()} device(s)")
        props = torch.cuda.get_device_properties(index)
        hip = getattr(torch.version, "hip", None)
        info.update(
            vendor="amd" if hip else "nvidia",
            model=props.name,
            arch=getattr(props, "gcnArchName", "").split(":")[0] if hip else f"sm_{props.major}{props.minor}",
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
            units=getattr(props, "gpu_subslice_count", None) or getattr(props, "max_compute_units", None),
            driver=getattr(props, "driver_version", None),
        )
    else:
        raise RuntimeError(f"unsupported device type {device.type}")
    return info


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
        for line in open("/proc/cpuinfo"):
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
