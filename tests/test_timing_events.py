"""Where a graph round's timing events lie (docs/fidelity.md, "Where the offset comes from").
By default a graph round is timed by events around each replay, so its time includes what the
graph's launch costs the device; `ARENA_TIMING_EVENTS=inside` records the pair as the graph's
first and last nodes instead, a setting for measuring whether the offset between an
evaluation's two processes lies in the launch. What the GPU does with it is measured by
`sh bench/h200_wave.sh $OUT 60`; here: the capture, the times read, the request both sides
read, and the engine's setting."""

from __future__ import annotations

import pytest

from core.evaluation.job import TIMING_EVENTS_ENV, timing_events
from core.harness import timing
from tests.test_timing_placement import _Recorder


class _NamedEvents(_Recorder):
    """The recorder, with each event made by name and each pair's elapsed time its own."""

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        super().install(monkeypatch)
        log = self.log
        made = iter(range(1000))

        class Events:
            def __init__(self, device_type: str) -> None:
                pass

            def new(self) -> str:
                return f"around{next(made)}"

            def record(self, event: str) -> None:
                log.append(f"record {event}")

            def elapsed_ms(self, start: str, end: str) -> float:
                return 0.002 if start.startswith("inside") else 0.005

        monkeypatch.setattr(timing, "_Events", Events)
        monkeypatch.setattr(
            timing, "_event_new", lambda cls, **kw: f"inside{next(made)} {sorted(kw.items())}"
        )
        monkeypatch.setattr(timing, "_event_record", lambda e, s: log.append(f"record {e}"))


@pytest.mark.parametrize("inside", [False, True])
def test_an_inside_round_times_its_calls_by_the_graphs_own_first_and_last_nodes(
    monkeypatch: pytest.MonkeyPatch, inside: bool
) -> None:
    import torch

    calls = _NamedEvents()
    calls.install(monkeypatch)

    def fn(x: torch.Tensor) -> torch.Tensor:
        calls.log.append("call")
        return x + 1

    rnd = timing.Round(1.0, 2, 2, 300_000, graph=True, events_inside=inside)
    timed = timing.time_round(fn, lambda i: [torch.zeros(4)], torch.device("cuda"), rnd)
    assert timed["times_us"] == ([2.0, 2.0] if inside else [5.0, 5.0])
    capture = calls.log.index("capture")
    recorded = calls.log[capture + 1 : capture + 4]
    if inside:  # external timing events: record nodes in the graph, around the one call
        pair = "[('enable_timing', True), ('external', True)]"
        assert recorded[0].startswith("record inside") and recorded[0].endswith(pair)
        assert recorded[1] == "call" and recorded[2].startswith("record inside")
    else:
        assert "record inside" not in " ".join(calls.log)
        assert recorded[0] == "call"
    # the events around each replay are recorded either way, so both settings cost the same
    assert sum(e.startswith("record around") for e in calls.log) == 4


def test_both_sides_read_the_setting_from_the_round_they_are_asked_for() -> None:
    asked = {"budget_ms": 10.0, "min_calls": 1, "max_calls": 50, "first_index": 0, "graph": True}
    assert timing.Round.from_request(asked).events_inside is False
    assert timing.Round.from_request({**asked, "events_inside": True}).events_inside is True


def test_the_engine_keeps_the_measured_default_and_names_the_fix_for_a_bad_value(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(TIMING_EVENTS_ENV, raising=False)
    assert timing_events() == "outside"
    monkeypatch.setenv(TIMING_EVENTS_ENV, " Inside ")
    assert timing_events() == "inside"
    monkeypatch.setenv(TIMING_EVENTS_ENV, "within")
    with pytest.raises(ValueError, match=r"ARENA_TIMING_EVENTS='within'.*outside, inside"):
        timing_events()


def test_a_built_job_carries_the_setting_to_the_performance_stage(
    tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from core.devices.device import probe
    from core.evaluation.evaluator import build_job
    from core.tasks.spec import load_task
    from tests.conftest import FIXTURES

    task = load_task(FIXTURES / "tasks" / "elementwise" / "axpy")
    candidate = FIXTURES / "tasks" / "elementwise" / "axpy" / "baseline.py"
    monkeypatch.setenv(TIMING_EVENTS_ENV, "inside")
    job = build_job(task, candidate, probe("cpu"), "cpu", 5, tmp_path)
    assert job["timing"]["events"] == "inside"
    monkeypatch.delenv(TIMING_EVENTS_ENV)
    job = build_job(task, candidate, probe("cpu"), "cpu", 5, tmp_path)
    assert job["timing"]["events"] == "outside"


def test_arena_eval_refuses_a_misspelt_setting_in_one_line_before_it_starts(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from arena_tui.cli import EXIT_BAD_INPUT, main
    from core.evaluation.sandbox import SWITCH

    monkeypatch.setenv(SWITCH, "off")  # as --unsandboxed would, undone after the test
    monkeypatch.setenv(TIMING_EVENTS_ENV, "in")
    argv = ["eval", "--task", "activation/silu_mul", "--device", "cpu", "--no-store"]
    code = main([*argv, "--candidate", "tasks/activation/silu_mul/baseline.py"])
    assert code == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert "ARENA_TIMING_EVENTS='in'" in err and "Traceback" not in err
