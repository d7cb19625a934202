"""The gap closed (core/evaluation/scoring.py) beside the speedup on the leaderboard: the mean
share of the baseline-to-speed-of-light gap an entry's results closed, a failure counting 0.
Against a weak baseline the speedup grows without bound; the gap closed cannot pass 1."""

from __future__ import annotations

import pytest

from core.store.leaderboard import build
from core.store.standings import Scored


def scored(agent: str, speedup: float, sol: float | None, status: str = "passed") -> Scored:
    return Scored(
        run_id="r",
        job_id=0,
        task_id="elementwise/rope",
        family="elementwise",
        agent=agent,
        model=None,
        device_id="cuda:0",
        device_model="NVIDIA H200",
        device_vendor="nvidia",
        timing_kind="measured",
        status=status,
        speedup=speedup if status == "passed" else 0.0,
        sol_fraction=sol if status == "passed" else None,
    )


def test_the_board_shows_the_gap_closed_beside_the_speedup() -> None:
    board = build(
        [
            # baseline 100 us, speed of light 10 us: 55 us closes half the gap, 10 us all of it
            scored("half", 100 / 55, 10 / 55),
            scored("whole", 10.0, 1.0),
            scored("whole", 10.0, 1.0, status="failed"),  # a failure closes none: (1 + 0) / 2
            scored("no_limit", 2.0, None),  # no speed of light known: no figure
        ],
        timing_kind="measured",
    )
    gaps = {e.agent: e.gap_closed for e in board.entries}
    assert gaps["half"] == pytest.approx(0.5) and gaps["whole"] == pytest.approx(0.5)
    assert gaps["no_limit"] is None
    assert "gap_closed" in board.to_json()["entries"][0]


def test_the_leaderboard_command_prints_the_gap_column() -> None:
    from rich.console import Console

    from arena_tui.leaderboard_cmd import render

    out = Console(width=140, record=True)
    render(out, build([scored("half", 100 / 55, 10 / 55)], timing_kind="measured"))
    text = out.export_text()
    assert " SOL  gap  correct " in text and " 18.2%  50% " in text
