"""Escalation: a prediction that cannot decide goes to a real GPU.

A `sim:` result carries a speedup and a ± band per workload (the candidate model's error for the
task's family compounded with the baseline's own uncertainty; docs/simulation.md). A trainer
decides on the speedup: better than the baseline or not, above a target or not. Where the band
straddles that decision the prediction says nothing about it, so a device asked for as
`sim:h200?escalate=1.0&to=cuda:0` (core/devices/ids.py) sends such a candidate to the GPU and
returns the GPU's measured result instead, with a review note saying why; a candidate the band
decides keeps its prediction. Without a GPU named (`to=` or ARENA_ESCALATE_TO) the prediction is
returned with a note that it could not be escalated.

The GPU's evaluators are kept per device for the process, one evaluation on a GPU at a time
(several sim: slots share it; concurrent timings on one GPU would disturb each other).
"""

from __future__ import annotations

import asyncio
import atexit
import math
import threading
from typing import TYPE_CHECKING, Any

from core.devices.ids import ESCALATE_ENV, Escalation
from core.model.result import Result

if TYPE_CHECKING:
    from core.evaluation.evaluator import Evaluator

_GPUS: dict[str, Evaluator] = {}
_LOCKS: dict[str, threading.Lock] = {}
_GUARD = threading.Lock()


def speedup_range(result: Result) -> tuple[float, float] | None:
    """(low, high) of a predicted result's speedup: each workload's speedup divided and
    multiplied by (1 + its band), geometric means over the workloads, as the speedup itself is
    (the errors of one task's workloads move together, so the bands are not averaged down)."""
    lows, highs = [], []
    for w in result.workloads:
        if not w.speedup or w.band is None or w.speedup <= 0:
            return None
        lows.append(math.log(w.speedup / (1 + w.band)))
        highs.append(math.log(w.speedup * (1 + w.band)))
    if not lows:
        return None
    return math.exp(sum(lows) / len(lows)), math.exp(sum(highs) / len(highs))


def undecided(result: Result, threshold: float) -> tuple[float, float] | None:
    """The speedup range where a passed predicted result's band straddles `threshold`, else None."""
    if result.timing_kind != "predicted" or result.status != "passed":
        return None
    span = speedup_range(result)
    if span is None or not (span[0] < threshold < span[1]):
        return None
    return span


def _gpu(device: str) -> tuple[Evaluator, threading.Lock]:
    from core.evaluation.evaluator import Evaluator

    with _GUARD:
        if not _GPUS:
            atexit.register(close_all)
        if device not in _GPUS:
            _GPUS[device] = Evaluator(device)
            _LOCKS[device] = threading.Lock()
        return _GPUS[device], _LOCKS[device]


def close_all() -> None:
    """Stop every escalation GPU's harness (the process's evaluators close them at exit too)."""
    with _GUARD:
        evaluators = list(_GPUS.values())
        _GPUS.clear()
        _LOCKS.clear()
    for evaluator in evaluators:
        evaluator.close()


async def escalated(
    result: Result, escalation: Escalation, task: Any, candidate: Any, **kwargs: Any
) -> Result:
    """`result` itself where its band decides (or nothing is asked), else the candidate measured
    on the escalation GPU (`kwargs`: the evaluation's own seed, limits, profile, ...)."""
    span = undecided(result, escalation.threshold)
    if span is None:
        return result
    why = (
        f"predicted speedup {result.speedup:.3g}x, band {span[0]:.3g}-{span[1]:.3g}x, "
        f"straddles the decision at {escalation.threshold:g}x"
    )
    if escalation.to is None:
        result.review_notes.append(
            f"escalation: {why}, but no GPU is named to measure it (add &to=cuda:N to the device, or set {ESCALATE_ENV})"
        )
        return result
    gpu, lock = _gpu(escalation.to)
    await asyncio.to_thread(lock.acquire)
    try:
        measured = await gpu.aevaluate(task, candidate, **kwargs)
    finally:
        lock.release()
    measured.review_notes.append(
        f"escalation: {why}; measured on {escalation.to} instead of predicted on {result.device.get('id')}"
    )
    return measured
