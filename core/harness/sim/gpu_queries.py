"""torch.cuda's questions about the GPU, answered by the simulated one (a `sim:` device).

A kernel written for a GPU sizes itself by the GPU it runs on: a persistent kernel launches one
program per SM (`torch.cuda.get_device_properties(x.device).multi_processor_count`, the Triton
tutorial's persistent matmul), others pick a tile by capability or by shared memory. On a
`sim:` device the candidate's code runs on the CPU, where torch has no CUDA GPU to ask about:
those calls raised "Torch not compiled with CUDA enabled" and a correct GPU kernel failed as a
wrong one. In the candidate's worker of a `sim:` device they answer with the simulated GPU's
figures (core/devices/sim/targets.py, `device_properties`), so the kernel is counted with the
grid and the tiles it would launch there.

Only questions about the GPU are answered. `torch.cuda.is_available()` stays False and tensors
stay on the CPU: code that asks whether it may allocate on a GPU still takes its CPU branch
(docs/simulation.md, "A candidate that picks its configuration by device type").
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import torch


def install(properties: dict[str, Any]) -> None:
    """Answer torch.cuda's device queries in this process with `properties` (whatever device
    the caller names: the simulated GPU is this process's only one)."""
    props = SimpleNamespace(**properties)

    def get_device_properties(device: Any = None) -> SimpleNamespace:
        return props

    def get_device_capability(device: Any = None) -> tuple[int, int]:
        return (props.major, props.minor)

    def get_device_name(device: Any = None) -> str:
        return str(props.name)

    def current_device() -> int:
        return 0

    torch.cuda.get_device_properties = get_device_properties  # type: ignore[assignment]
    torch.cuda.get_device_capability = get_device_capability  # type: ignore[assignment]
    torch.cuda.get_device_name = get_device_name  # type: ignore[assignment]
    torch.cuda.current_device = current_device  # type: ignore[assignment]
