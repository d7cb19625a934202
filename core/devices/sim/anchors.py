"""The model's own count of each task's baseline, to anchor a `sim:` prediction to the measured
baseline (core/data/sim_anchors.json).

A `sim:<gpu>` candidate's predicted time is model(candidate) × measured(baseline) /
model(baseline): the candidate's counted time, rescaled by how far the model is off the
baseline's measured time at that workload. So the predicted speedup is model(baseline) /
model(candidate) where the GPU runs the implementation that was counted: a task's baseline.py
submitted as the candidate is predicted at exactly its measured time, and an error of the model
common to both sides (a launch cost, a bandwidth share) cancels. model(baseline) must be the
same counting a candidate gets (Liger's Triton kernel through the interpreter, a torch
composition through the library model): the trusted worker's `predict_baseline` counts torch
ops on fake tensors only, and counting Liger at GPU size takes seconds per workload, so the
counts are made once, offline, by `bench/sim_heldout.py anchors`, and priced at evaluation
time with the job's constants (a refit of the constants never makes them stale).

Each task's entry carries its provenance: `code_sha256`, the baseline's code as
core/devices/sim/provenance.py hashes it for the measured figures, and `counter_sha256`, the
hash of the code that counted (`counter_code`). An entry whose either hash differs from today's
is stale: the evaluation is then not anchored, and its note says so and names the command that
recounts (docs/simulation.md, "The identity").
"""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from pathlib import Path
from typing import Any

from core.devices.sim.baselines import axes_key, baseline_for
from core.devices.sim.provenance import code_digest

ANCHORS_FILE = Path(__file__).resolve().parents[2] / "data" / "sim_anchors.json"
SIM_DIR = Path(__file__).resolve().parents[2] / "harness" / "sim"
# The parent's side of core/harness/sim prices and judges counts; it changes no count. model.py
# prices them with the job's constants at evaluation time, so its changes are picked up live.
NOT_COUNTING = ("model.py", "stage.py", "judge.py")
RECOUNT = "PYTHONPATH=. python3 bench/sim_heldout.py predict --anchors --point-timeout-s 900 && PYTHONPATH=. python3 bench/sim_heldout.py anchors"


def counter_code() -> str:
    """One hash of the code that counts a call on a `sim:` device (core/harness/sim, less the
    parent's pricing and checks), each file by its syntax tree without docstrings."""
    files = sorted(p for p in SIM_DIR.glob("*.py") if p.name not in NOT_COUNTING)
    return _counter_code(tuple((str(p), p.stat().st_mtime_ns, p.stat().st_size) for p in files))


@lru_cache(maxsize=8)
def _counter_code(stamps: tuple[tuple[str, int, int], ...]) -> str:
    digests = [f"{Path(p).name}:{code_digest(Path(p).read_text())}" for p, _, _ in stamps]
    return hashlib.sha256("\n".join(digests).encode()).hexdigest()


@lru_cache(maxsize=1)
def load_anchors() -> dict[str, Any]:
    if not ANCHORS_FILE.exists():
        return {"gpus": {}}
    return json.loads(ANCHORS_FILE.read_text())


def anchor_for(gpu: str, task_id: str, axes: dict[str, Any], code: str) -> dict[str, Any] | None:
    """The anchor of one workload on `gpu`: {impl, launches, torch_ops, measured_us, band}, the
    model's count of the implementation baseline.py runs on `sim:` and that implementation's
    measured time (and its own band) from core/data/sim_baselines.json. None where there is no
    count or no measurement of it at this workload (the prediction is then not anchored);
    {"stale": True, "note"} where the count was made of other code than today's. `code`: the
    task's baseline code hash today (provenance.task_code)."""
    entry = load_anchors().get("gpus", {}).get(gpu, {}).get(task_id)
    if not entry:
        return None
    counter = counter_code()
    if entry.get("code_sha256") != code or entry.get("counter_sha256") != counter:
        return {"stale": True, "note": stale_note(entry, code, counter)}
    counted = entry.get("workloads", {}).get(axes_key(axes))
    measured = baseline_for(gpu, task_id, entry["impl"], axes, None)
    if not counted or not measured or measured.get("source") != "measured":
        return None
    return {
        "impl": entry["impl"],
        "launches": counted["launches"],
        "torch_ops": counted["torch_ops"],
        "measured_us": measured["median_us"],
        "band": max(0.02, float(measured.get("band") or 0.0)),
    }


def stale_note(entry: dict[str, Any], code: str, counter: str) -> str:
    which = (
        f"the task's baseline (then {str(entry.get('code_sha256'))[:12]}, today {code[:12]})"
        if entry.get("code_sha256") != code
        else f"the sim's counting code (then {str(entry.get('counter_sha256'))[:12]}, today {counter[:12]})"
    )
    return (
        "not anchored: the model's count of the baseline in core/data/sim_anchors.json was made "
        f"with other code than today's: {which}; recount it with `{RECOUNT}`"
    )
