"""Progress while a stage runs (core/evaluation/heartbeat.py): the engine says which stage, which
workload, how long so far and the limit whenever the harness has said nothing for a while, so a
candidate that hangs never leaves a person in silence until its stage's limit."""

from __future__ import annotations

from core.evaluation import heartbeat
from core.evaluation.heartbeat import Pulse
from core.model import events
from core.model.task import Limits
from core.tasks.spec import load_task
from tests.conftest import FIXTURES

JOB = {
    "stages": {
        "correctness": [{"label": "n=1000"}, {"label": "n=4097"}],
        "generalization": [{"label": "n=77"}],
        "performance": [{"label": "n=1000"}],
    },
    "limits": {"compile_s": 60.0, "correctness_s": 300.0, "performance_s": 300.0},
}


def test_a_beat_says_the_stage_the_next_workload_the_time_so_far_and_the_limit():
    now = [100.0]
    seen: list[events.Event] = []
    pulse = Pulse(JOB, seen.append, every_s=9.0, clock=lambda: now[0])
    assert pulse.due() is None  # between stages: nothing to say
    pulse(events.StageStarted("compile"))
    now[0] += 9.5
    assert pulse.due() == events.Heartbeat("compile", 9.5, 60.0, "n=1000", 0, None)
    assert seen[-1].text() == "compile: workload n=1000, 10 s of 60 s"
    pulse(events.StageFinished("compile", "passed", 9.6))
    pulse(events.StageStarted("correctness"))
    now[0] += 4.0
    assert pulse.due() is None, "the stage began 4 s ago"
    pulse(events.WorkloadChecked("correctness", "n=1000", {"n": 1000}, True))
    now[0] += 8.0  # a workload's event is no progress line where a printer shows none
    beat = pulse.due()
    assert (
        beat is not None and beat.text() == "correctness: workload n=4097 (2 of 2), 12 s of 300 s"
    )
    assert beat is seen[-1] and pulse.due() is None  # the next one 9 s later


def test_a_hanging_candidate_gets_a_heartbeat_long_before_its_limit(
    cpu_evaluator, tmp_path, monkeypatch
):
    monkeypatch.setattr(heartbeat, "EVERY_S", 0.5)
    hang = tmp_path / "hang.py"
    hang.write_text("def run(x, b):\n    while True:\n        pass\n")
    seen: list[events.Event] = []
    result = cpu_evaluator.evaluate(
        load_task(FIXTURES / "tasks" / "elementwise" / "axpy"),
        hang,
        on_event=seen.append,
        limits=Limits(compile_s=2.0, correctness_s=2.0, performance_s=2.0),
    )
    assert result.failed_stage == "compile"
    beats = [e for e in seen if isinstance(e, events.Heartbeat)]
    assert len(beats) >= 2 and {b.stage for b in beats} == {"compile"}, seen
    assert beats[0].limit_s == 2.0 and beats[0].workload and beats[0].elapsed_s < 2.0
