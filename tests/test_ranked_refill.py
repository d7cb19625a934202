"""A multi-rank timed call's inputs are refilled after the ranks meet, right before the timer
(docs/integrity.md, "Red team"): the barrier's wait, a round trip through the harness's
parent, would otherwise be a window in which a candidate's thread sees the new values and does
the collective untimed (tests/cheats/rank_prefetch_thread.py: 1.5-2.3x before, on CPU ranks)."""

from __future__ import annotations

import torch

from core.harness import ranked_worker


def test_each_timed_call_is_refilled_after_its_barrier(monkeypatch):
    order: list[str] = []

    def fresh_factory(*_args, **_kwargs):
        def fresh(index: int) -> list[torch.Tensor]:
            order.append(f"refill {index}")
            return [torch.zeros(4)]

        return fresh

    monkeypatch.setattr(ranked_worker, "_fresh", fresh_factory)
    monkeypatch.setattr(
        ranked_worker, "parent_barrier", lambda conn, k: order.append(f"barrier {k}")
    )

    def run(x: torch.Tensor) -> torch.Tensor:
        order.append("call")
        return x + 1

    msg = {
        "calls": 2,
        "first_index": 10,
        "sample": [],
        "workload": {"shapes": {"x": [4], "out": [4]}},
    }
    reply = ranked_worker._time_rank(
        run, msg, [], [], 0, torch.device("cpu"), None, {}, False, None
    )
    assert reply["ok"] and len(reply["times_us"]) == 2
    assert order == ["barrier 0", "refill 11", "call", "barrier 1", "refill 12", "call"]
