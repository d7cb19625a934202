"""The harness parent's side of an interleaved round: the baseline's and the candidate's rounds
of one alternation timed together, call by call (shared_io.serve_interleaved).

A workload whose calls wait on the host (timing.waits_on_host: a `.tolist()` inside, launches
that outrun the lead flushes) reads the host's speed into its times, and the H200 host's vCPUs
change speed by up to 3x from one stretch of tens of milliseconds to the next. Timed as two
rounds one after the other, the two sides of an alternation met different stretches, and
identical code read 0.94-1.05 in batches (docs/fidelity.md). Timed call by call on the one CPU
both workers are pinned to, each candidate call runs right after a baseline call on the same
inputs' draw, and the two meet the same stretch.

Both workers get their `time` request at once; the trusted worker hands out the calls' inputs
in turn (the baseline's first). The round's wall clock is both sides' together, so the
candidate's limit is its K x the baseline's rounds plus that baseline round itself.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from core.harness import shared_round
from core.harness.baseline_rounds import (
    NAME,
    BaselineRound,
    BaselineWorkers,
    as_round,
    as_stage_failure,
)
from core.harness.faults import StageFailed, trusted_failed
from core.harness.workers import Worker, WorkerDied, WorkerTimeout

DRAIN_S = 60.0  # a baseline round left alone after the candidate's failure ends within this


@dataclass
class Interleaved:
    """One interleaved round: the baseline's round, the candidate's reply and the trusted
    worker's verdict on it, and the round's wall clock (both sides, refills excluded)."""

    base: BaselineRound
    reply: dict[str, Any]
    served: dict[str, Any]
    wall_s: float


def time_interleaved(
    ev: Any,
    baselines: BaselineWorkers,
    request: dict[str, Any],
    sample: list[float],
    limit_s: float,
    limit_note: str | None,
    deadline: float,
) -> Interleaved | None:
    """Time one alternation interleaved; None where it cannot be (the baseline's worker is not
    joined to the trusted worker, or no region could be made): the caller times it as two
    rounds. `limit_s`, `limit_note`: the candidate's limit for the whole round."""
    try:
        worker = baselines.get(max(1.0, deadline - time.monotonic()))
        if baselines.join(ev.trusted, max(1.0, deadline - time.monotonic())) is not None:
            return None
    except (WorkerTimeout, WorkerDied) as exc:
        raise as_stage_failure(baselines, exc) from None
    consumer = ev._region_key(ev.candidate)
    ev.mapped[ev.candidate.pid] = consumer  # freed by its key once the worker is dead
    ack = ev._trusted_call(
        {
            **request,
            "op": "serve_round",
            "interleave": True,
            "sample": sample,
            "member": ev.key_prefix,
            "consumer": consumer,
            "baseline_consumer": f"baseline:{worker.pid}",
            "timeout_s": max(1.0, deadline - time.monotonic()),
        },
        deadline,
    )
    if not ack.get("serving"):
        return None
    header = {**{k: v for k, v in request.items() if k != "seed"}, "shared": True}
    t0 = time.monotonic()
    try:
        worker.send(header)
    except WorkerDied as died:
        raise as_stage_failure(baselines, died) from None
    by_limit = t0 + limit_s < deadline
    try:
        reply, _ = ev._candidate_call(
            header,
            t0 + limit_s if by_limit else deadline,
            limit_note=limit_note if by_limit else None,
        )
    except BaseException:
        # The trusted worker waits on the candidate's turn: end the candidate's worker so the
        # baseline's round runs to its end, and read both replies, so that the next
        # candidate of a batch meets clean channels.
        ev.candidate.kill()
        _drain(ev, baselines, worker)
        raise
    wall = time.monotonic() - t0
    base_reply = _baseline_reply(baselines, worker, deadline)
    served = shared_round.verdict(ev, deadline)
    if not base_reply.get("ok"):  # its own failure first: the round's end only follows it
        raise trusted_failed(base_reply)
    baseline = served.get("baseline") or {}
    if baseline.get("violation"):
        raise StageFailed(
            "error",
            f"{NAME}'s interleaved round failed: {baseline['violation']}",
            "infrastructure",
        )
    serve_s = float(served.get("serve_s") or 0.0) + float(baseline.get("serve_s") or 0.0)
    wall = max(0.0, wall - serve_s)
    base = as_round(base_reply, 0.0, float(baseline.get("serve_s") or 0.0))
    return Interleaved(base, reply, served, wall)


def split_wall(wall_s: float, base_s: float, candidate_s: float) -> tuple[float, float]:
    """The round's wall clock shared out between the sides: each its timed calls' sum, and half
    of what is left (refills, flushes, waits). The candidate's share is never less than the
    round's wall less the baseline's own calls, so a candidate timer that reports more than
    that is still caught (the `timer_exceeds_wall_clock` check: docs/integrity.md)."""
    overhead = max(0.0, wall_s - base_s - candidate_s)
    base_wall = min(wall_s, base_s + overhead / 2)
    return base_wall, wall_s - base_wall


def _baseline_reply(baselines: BaselineWorkers, worker: Worker, deadline: float) -> dict[str, Any]:
    try:
        reply, _ = worker.recv(max(0.1, deadline - time.monotonic()))
    except (WorkerTimeout, WorkerDied) as exc:
        baselines.close()
        raise StageFailed(
            "error", f"{NAME} failed in an interleaved round: {exc}", "infrastructure"
        ) from None
    return reply


def _drain(ev: Any, baselines: BaselineWorkers, worker: Worker) -> None:
    """After the candidate's failure: the baseline's reply and the trusted worker's verdict,
    read and dropped; a baseline worker that does not answer is replaced (the trusted worker's
    channel is the batch's to sync: batch.py)."""
    try:
        worker.recv(DRAIN_S)
    except (WorkerTimeout, WorkerDied):
        baselines.close()
    try:
        ev.trusted.recv(DRAIN_S)
    except (WorkerTimeout, WorkerDied):
        pass
