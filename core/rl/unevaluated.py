"""Results for evaluations that never reached a harness: a source with no code at all
(`no_code`), one that cannot be a candidate (a compile failure), a fault that kept it from
running (an infrastructure error). Each is a full Result (core.model.result.unevaluated) with
the request's profile, so a trainer reads it like any other."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from core.devices.ids import timing_kind_of
from core.evaluation.evaluator import Evaluator
from core.model.result import Result, unevaluated
from core.model.task import Task
from core.orchestration.scheduler import Slot
from core.rl.requests import EvalRequest
from core.rl.rewards import NO_CODE_NOTE


def device_json(evaluator: Evaluator | None, device: str) -> dict[str, Any]:
    if evaluator is None:
        return {"id": device, "model": None, "vendor": None, "arch": None}
    info = evaluator.info
    return {"id": info.id, "model": info.model, "vendor": info.vendor, "arch": info.arch}


def synthetic(
    task_id: str,
    device: dict[str, Any],
    timing_kind: str,
    sha: str,
    status: str,
    message: str,
    profile: str | None = None,
) -> Result:
    """A Result for an evaluation that never reached the harness (core.model.result.unevaluated)."""
    return unevaluated(task_id, device, timing_kind, sha, message, status=status, profile=profile)


def no_code(task: Task, device: str, request: EvalRequest) -> Result:
    """A source with no code at all (empty, only comments): the policy abstained. Scored as its
    own outcome, below a compile failure (core/rl/rewards.py), without reaching a harness."""
    result = synthetic(
        task.id,
        device_json(None, device),
        timing_kind_of(device).value,
        hashlib.sha256(request.source.encode(errors="replace")).hexdigest(),
        "failed",
        "no code: the candidate is empty (a reply needs its module in one ```python block)",
        request.profile,
    )
    result.stages[0].note = NO_CODE_NOTE
    return result


def not_a_candidate(
    task: Task,
    path: Path,
    exc: Exception,
    evaluator: Evaluator,
    slot: Slot,
    request: EvalRequest,
) -> Result:
    """A source that cannot be a candidate (no `run`, NUL bytes): the policy's mistake, scored
    as a compile failure without reaching the harness; the message names no temporary path."""
    return synthetic(
        task.id,
        device_json(evaluator, slot.device),
        evaluator.info.timing_kind,
        hashlib.sha256(path.read_bytes()).hexdigest(),
        "failed",
        str(exc).replace(str(path), "candidate.py"),
        request.profile,
    )
