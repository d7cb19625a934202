"""The engine's side of the simulated GPUs (`sim:<gpu>` devices): what a job needs to predict
for a target (targets.py) and the alpha-beta model of collectives (collectives.py). The counting
and the time model run in the harness (core/harness/sim_*.py). docs/simulation.md."""

from core.devices.sim.collectives import Prediction, predict_collective
from core.devices.sim.targets import (
    calibration_label,
    load_constants,
    sim_anchor,
    sim_baseline,
    sim_section,
)

__all__ = [
    "Prediction",
    "calibration_label",
    "load_constants",
    "predict_collective",
    "sim_anchor",
    "sim_baseline",
    "sim_section",
]
