"""Measured baseline times for the `sim:` devices (core/data/sim_baselines.json).

A simulated speedup is the baseline's time over the candidate's. Predicting the baseline (a
vendor library call) from counted FLOPs and bytes was 0.08-3.4x off its own measured H200 time,
which made the speedup point the wrong way for a quarter of the starters. So a `sim:<gpu>`
evaluation uses the baseline's measured time on that GPU where the arena has one for the
workload (`measured`), and for a shape it lacks (a drawn hidden workload, an add-model shape) a
per-task model fitted to those measurements (`model`): t = a + b x roofline, the roofline being
the workload's speed of light on the target (its FLOP and byte formulas at the peaks table's
figures). A task with no measurement on the target keeps the counted prediction (`predicted`).

The table is keyed by GPU (peaks key), task, baseline implementation and workload (canonical
axes), and regenerated from device runs by bench/sim_baselines.py. Which implementation a
`sim:<gpu>` evaluation divides by is the one that GPU would run (`baseline_on`): at a workload
where a run recorded the baseline's own choice (`selected`), that one; elsewhere the first of
the task's `baselines:` (its order of preference) measured on that GPU, e.g. `liger` for
norm/add_rmsnorm on the H200, `torch` where no library was measured.

Every entry carries its provenance (core/devices/sim/provenance.py): the hash of the baseline
code it was measured with, and the library versions. Figures of another code than the task's
today are stale: `baseline_on` answers so, with the note that names the command re-measuring
them, and the baseline is predicted instead (docs/simulation.md, "Provenance").
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from core.devices.sim.provenance import remeasure_command

TABLE_FILE = Path(__file__).resolve().parents[2] / "data" / "sim_baselines.json"
NOTED_VERSIONS = ("torch", "triton", "liger-kernel", "flashinfer-python", "vllm", "sgl-kernel")
DEFAULT_IMPL = (
    "torch"  # the task's own PyTorch composition (records made before baseline_impl existed)
)


def axes_key(axes: dict[str, Any]) -> str:
    """A workload's key in the table: its axes sorted by name (independent of the task's order)."""
    return ",".join(f"{k}={int(v)}" for k, v in sorted(axes.items()))


@dataclass(frozen=True)
class TaskModel:
    """t = intercept_us + slope x roofline_us, fitted on one task's measured workloads."""

    intercept_us: float
    slope: float
    error: float  # 80th percentile of the leave-one-out relative errors on the task's own points
    points: int

    def time_us(self, roofline_us: float) -> float:
        return self.intercept_us + self.slope * roofline_us

    def to_json(self) -> dict[str, Any]:
        return {
            "intercept_us": self.intercept_us,
            "slope": self.slope,
            "error": self.error,
            "points": self.points,
        }


def fit_task_model(points: list[tuple[float, float]]) -> TaskModel | None:
    """Fit t = a + b x roof (a, b >= 0) to (roofline_us, measured_us) points, least squares on
    log time (a launch-bound shape and a bandwidth-bound one weigh alike). None without points."""
    pts = [(r, t) for r, t in points if r > 0 and t > 0]
    if not pts:
        return None
    a, b = _fit(pts)
    if len(pts) >= 3:
        errors = []
        for i in range(len(pts)):
            la, lb = _fit(pts[:i] + pts[i + 1 :])
            r, t = pts[i]
            errors.append(abs((la + lb * r) / t - 1))
        errors.sort()
        error = errors[min(len(errors) - 1, math.ceil(0.8 * len(errors)) - 1)]
    else:
        error = 0.5  # too few points to know: a wide band
    return TaskModel(a, b, error, len(pts))


def _fit(pts: list[tuple[float, float]]) -> tuple[float, float]:
    """Grid search, refined twice around the best point: the intercept from 0 to the fastest
    point's time, the slope over eight decades and 0 (a launch-bound task's time does not grow)."""
    low = min(t for _, t in pts)
    ratio = sorted(t / r for r, t in pts)[len(pts) // 2]

    def loss(a: float, b: float) -> float:
        return sum((math.log(max(a + b * r, 1e-9)) - math.log(t)) ** 2 for r, t in pts)

    intercepts = [low * i / 40 for i in range(41)]
    slopes = [0.0] + [ratio * 10 ** (e / 10) for e in range(-60, 21)]
    best = min((loss(a, b), a, b) for a in intercepts for b in slopes)
    for _ in range(2):
        _, a0, b0 = best
        da, db = low / 40, max(b0, 1e-6) * 0.3
        best = min(
            [best]
            + [
                (loss(a, b), a, b)
                for a in (max(0.0, a0 + da * i / 5) for i in range(-5, 6))
                for b in (max(0.0, b0 + db * j / 5) for j in range(-5, 6))
            ]
        )
    return best[1], best[2]


@lru_cache(maxsize=1)
def load_table() -> dict[str, Any]:
    if not TABLE_FILE.exists():
        return {"gpus": {}}
    return json.loads(TABLE_FILE.read_text())


def baseline_for(
    gpu: str, task_id: str, impl: str | None, axes: dict[str, Any], roofline_us: float | None
) -> dict[str, Any] | None:
    """The time of implementation `impl` (None: `torch`) for one workload on `gpu`:
    {median_us, source, band, impl, ...} with source `measured` or `model`, or None where the
    table knows nothing of it there."""
    impl = impl or DEFAULT_IMPL
    entry = load_table().get("gpus", {}).get(gpu, {}).get(task_id, {}).get(impl)
    if not entry:
        return None
    measured = entry.get("workloads", {}).get(axes_key(axes))
    versions = (entry.get("provenance") or {}).get("versions") or {}
    if measured is not None:
        return {
            "median_us": float(measured["median_us"]),
            "source": "measured",
            # the figure's own uncertainty (its runs' spread, at least the run-to-run floor)
            "band": float(measured.get("band", 0.0)),
            "runs": measured.get("runs", 1),
            "impl": impl,
            "versions": {k: versions[k] for k in NOTED_VERSIONS if k in versions},
        }
    model = entry.get("model")
    if model and roofline_us is not None and roofline_us > 0:
        m = TaskModel(**model)
        return {
            "median_us": m.time_us(roofline_us),
            "source": "model",
            "band": m.error,
            "points": m.points,
            "impl": impl,
        }
    return None


def baseline_on(
    gpu: str,
    task_id: str,
    order: Sequence[str],
    axes: dict[str, Any],
    roofline_us: float | None,
    code: str | None = None,
) -> dict[str, Any] | None:
    """The baseline's time for one workload on `gpu`, of the implementation that GPU would run:
    the one a measured run selected at this workload, else the first of `order` (task.yaml's
    `baselines:`, in preference; empty: `torch`) with measurements on `gpu`. None where the
    table has nothing of the task's implementations there (the baseline is then predicted).

    `code`: today's code hash of the task's baseline (provenance.task_code). Figures measured
    with other code are not the baseline's any more: the answer is then {"stale": True, "note"}
    and the baseline is predicted, labelled so (docs/simulation.md, "Provenance")."""
    entries = load_table().get("gpus", {}).get(gpu, {}).get(task_id, {})
    order = list(order) or [DEFAULT_IMPL]
    key = axes_key(axes)
    chosen = next((i for i in order if key in (entries.get(i) or {}).get("selected", ())), None)
    chosen = chosen or next((i for i in order if entries.get(i)), None)
    if not chosen:
        return None
    measured_code = (entries[chosen].get("provenance") or {}).get("code_sha256")
    if code is not None and measured_code != code:
        return {
            "stale": True,
            "impl": chosen,
            "note": stale_note(gpu, task_id, chosen, measured_code, code),
        }
    return baseline_for(gpu, task_id, chosen, axes, roofline_us)


def stale_note(gpu: str, task_id: str, impl: str, measured: str | None, today: str) -> str:
    then = f"code {measured[:12]}" if measured else "no recorded code"
    return (
        f"baseline: predicted, not measured: the {gpu.upper()} figures of `{impl}` in core/data/sim_baselines.json "
        f"were measured with another baseline ({then}; today {today[:12]}); re-measure them on an {gpu.upper()} "
        f"with `{remeasure_command(task_id)}`"
    )
