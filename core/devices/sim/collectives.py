"""Predicted time of a collective on a simulated GPU: an alpha-beta model per algorithm.

A step costs the link latency α (`link_latency_us`) and moving b bytes costs b / β, where β is
one direction of the GPU's scale-up link (the peaks table's `link_gbps` is both directions
together, so β = link_gbps / 2). `size_bytes` is what nccl-tests calls the size of one rank's
operation (all_reduce: the buffer; all_gather: the gathered output; reduce_scatter: the input;
all_to_all: the send buffer), W the world size. Each algorithm:

| kind | algorithm | time |
| --- | --- | --- |
| all_reduce | ring | 2(W-1)·α + 2(W-1)/W · size/β |
| all_reduce | tree (double binary) | 2·⌈log2 W⌉·α + 2 · size/β |
| all_gather, reduce_scatter | ring | (W-1)·α + (W-1)/W · size/β |
| all_gather, reduce_scatter | direct (all peers at once) | α + (W-1)/W · size/(β·DIRECT_EFF) |
| all_to_all | direct (pairwise) | α + (W-1)/W · size/β |

plus one kernel launch; the prediction is the fastest algorithm (NCCL's tuner picks per size:
tree or direct for small messages, ring for large). Bus bandwidth follows nccl-tests: algbw =
size / time, busbw = algbw × 2(W-1)/W for all_reduce, × (W-1)/W for the others.

Uncalibrated: compared with one 2-GPU H200 run (docs/simulation.md), not fitted; the band says so.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

KINDS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")
DIRECT_EFF = (
    0.8  # share of β one rank reaches sending to all peers at once through the switch (estimate)
)
DEFAULT_LATENCY_US = 2.0  # per step, where the peaks table has no link_latency_us (estimate)
BAND = 0.5  # ± band: the model is not fitted to multi-GPU measurements


@dataclass(frozen=True)
class Prediction:
    """A predicted time with its band, the algorithm that gives it, and bus bandwidth."""

    time_us: float
    low_us: float
    high_us: float
    band: float
    algorithm: str
    algbw_gbps: float
    busbw_gbps: float
    alternatives_us: dict[str, float] = field(default_factory=dict)
    timing: str = "predicted"
    calibration: str = "uncalibrated"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _figure(peaks: Any, name: str) -> float | None:
    value = peaks.get(name) if isinstance(peaks, dict) else getattr(peaks, name, None)
    return float(value) if value is not None else None


def bus_factor(kind: str, world: int) -> float:
    return 2 * (world - 1) / world if kind == "all_reduce" else (world - 1) / world


def algorithm_times(
    kind: str, size_bytes: float, world: int, beta: float, alpha: float
) -> dict[str, float]:
    """Microseconds per algorithm for one collective, launch excluded. beta in bytes/µs."""
    w = world
    share = (w - 1) / w * size_bytes
    if kind == "all_reduce":
        return {
            "ring": 2 * (w - 1) * alpha + 2 * share / beta,
            "tree": 2 * math.ceil(math.log2(w)) * alpha + 2 * size_bytes / beta,
        }
    if kind in ("all_gather", "reduce_scatter"):
        return {
            "ring": (w - 1) * alpha + share / beta,
            "direct": alpha + share / (beta * DIRECT_EFF),
        }
    if kind == "all_to_all":
        return {"direct": alpha + share / beta}
    raise ValueError(f"unknown collective `{kind}`: one of {', '.join(KINDS)}")


def predict_collective(kind: str, size_bytes: float, world: int, peaks: Any) -> Prediction:
    """Predicted time of one collective of `size_bytes` (nccl-tests' size) over `world` GPUs
    whose peaks (a `Peaks`, or a dict of the peaks table's spec fields) give `link_gbps`,
    optionally `link_latency_us` and `launch_overhead_us`."""
    if kind not in KINDS:
        raise ValueError(f"unknown collective `{kind}`: one of {', '.join(KINDS)}")
    if world < 1 or size_bytes < 0:
        raise ValueError(f"world size {world} and size {size_bytes} must be positive")
    link = _figure(peaks, "link_gbps")
    if not link:
        raise ValueError("the device has no link_gbps figure: no collective prediction")
    launch = _figure(peaks, "launch_overhead_us") or 0.0
    if world == 1:
        times = {"local": 0.0}
    else:
        beta = link / 2 * 1e9 / 1e6  # one direction, bytes per µs
        alpha = _figure(peaks, "link_latency_us") or DEFAULT_LATENCY_US
        times = algorithm_times(kind, size_bytes, world, beta, alpha)
    algorithm = min(times, key=lambda k: times[k])
    t = launch + times[algorithm]
    algbw = size_bytes / t / 1e3 if t > 0 else 0.0  # bytes/µs → GB/s
    return Prediction(
        time_us=t,
        low_us=t / (1 + BAND),
        high_us=t * (1 + BAND),
        band=BAND,
        algorithm=algorithm,
        algbw_gbps=algbw,
        busbw_gbps=algbw * bus_factor(kind, world) if world > 1 else 0.0,
        alternatives_us={k: launch + v for k, v in times.items()},
    )
