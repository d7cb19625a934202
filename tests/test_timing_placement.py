"""Where a graph round's capture lies in memory (docs/fidelity.md, "Where the offset comes
from"). On the H200, captures of one call in one process differ by up to 3% as their memory
lies, and a process captures at the same place round after round, so each side of an
evaluation kept an offset of its own. `ARENA_TIMING_PLACEMENT=per_round` moves each round's
capture (a pad of a drawn size before it); `fixed`, the default, is what every H200 figure in
docs/ was measured with. What the GPU does with it is measured by `sh bench/h200_wave.sh $OUT 56`;
here: the pads, the request both sides read, and the engine's setting."""

from __future__ import annotations

import itertools

import pytest

from core.evaluation.job import TIMING_PLACEMENT_ENV, timing_placement
from core.harness import timing


def test_each_round_draws_its_pad_reproducibly_in_whole_allocator_segments() -> None:
    rounds = [r * 100_000 for r in range(32)]  # the performance stage's first input indices
    pads = [timing.placement_pad_bytes(first) for first in rounds]
    assert pads == [timing.placement_pad_bytes(first) for first in rounds]
    assert all(p % timing.PLACEMENT_STEP_BYTES == 0 for p in pads)
    assert all(0 <= p < timing.PLACEMENT_STEPS * timing.PLACEMENT_STEP_BYTES for p in pads)
    # consecutive rounds lie apart: a process does not capture at one place all evaluation
    assert len(set(pads)) >= 8
    assert sum(a != b for a, b in itertools.pairwise(pads)) >= 24


def test_both_sides_read_the_setting_from_the_round_they_are_asked_for() -> None:
    asked = {
        "budget_ms": 10.0,
        "min_calls": 1,
        "max_calls": 50,
        "first_index": 100_000,
        "graph": True,
    }
    assert timing.Round.from_request(asked).placement_per_round is False
    moved = timing.Round.from_request({**asked, "placement_per_round": True})
    assert moved.placement_per_round is True and moved.graph is True


def test_the_engine_keeps_the_measured_default_and_names_the_fix_for_a_bad_value(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(TIMING_PLACEMENT_ENV, raising=False)
    assert timing_placement() == "fixed"
    monkeypatch.setenv(TIMING_PLACEMENT_ENV, " Per_Round ")
    assert timing_placement() == "per_round"
    monkeypatch.setenv(TIMING_PLACEMENT_ENV, "random")
    with pytest.raises(ValueError, match=r"ARENA_TIMING_PLACEMENT='random'.*fixed, per_round"):
        timing_placement()


def test_a_built_job_carries_the_setting_to_the_performance_stage(
    tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from core.devices.device import probe
    from core.evaluation.evaluator import build_job
    from core.tasks.spec import load_task
    from tests.conftest import FIXTURES

    task = load_task(FIXTURES / "tasks" / "elementwise" / "axpy")
    candidate = FIXTURES / "tasks" / "elementwise" / "axpy" / "baseline.py"
    monkeypatch.setenv(TIMING_PLACEMENT_ENV, "per_round")
    job = build_job(task, candidate, probe("cpu"), "cpu", 5, tmp_path)
    assert job["timing"]["placement"] == "per_round"
    monkeypatch.delenv(TIMING_PLACEMENT_ENV)
    assert (
        build_job(task, candidate, probe("cpu"), "cpu", 5, tmp_path)["timing"]["placement"]
        == "fixed"
    )


def test_arena_eval_refuses_a_misspelt_setting_in_one_line_before_it_starts(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from arena_tui.cli import EXIT_BAD_INPUT, main
    from core.evaluation.sandbox import SWITCH

    monkeypatch.setenv(SWITCH, "off")  # as --unsandboxed would, undone after the test
    monkeypatch.setenv(TIMING_PLACEMENT_ENV, "per-round")
    argv = ["eval", "--task", "activation/silu_mul", "--device", "cpu", "--no-store"]
    code = main([*argv, "--candidate", "tasks/activation/silu_mul/baseline.py"])
    assert code == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert "ARENA_TIMING_PLACEMENT='per-round'" in err and "Traceback" not in err
