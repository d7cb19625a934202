"""Devices: what can run the harness and say what it is. `device` holds the device ids (parsed
in one place, `parse_device`), the local devices and how they are pinned, their measured or
published peaks, and the probe; `sim/` the engine's side of the simulated GPUs (`sim:<gpu>`):
target figures, measured baselines and the collectives model. The harness's side of the
simulation (counting, the time model) is `core.harness.sim`."""
