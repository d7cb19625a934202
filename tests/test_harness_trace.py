"""The harness's trace (core/harness/trace.py): with `ARENA_HARNESS_TRACE=1` in the engine's
environment, an evaluation leaves a line per span (each op a worker answered, each request the
parent waited for, the start-up and end steps) in the evaluator's log folder, so a profile can
say where each second of an evaluation went (bench/turn_profile.py). Off, nothing is written."""

from __future__ import annotations

import json
from pathlib import Path

from core.evaluation.evaluator import Evaluator
from core.evaluation.job import Timing
from core.harness import trace
from core.tasks.spec import load_task

FIXTURES = Path(__file__).resolve().parent / "fixtures"
FAST = Timing(alternations=2, budget_ms=20.0, min_calls=1, max_calls=5)


def _evaluate(tmp_path: Path) -> tuple[str, Path]:
    task = load_task(FIXTURES / "tasks" / "elementwise" / "axpy")
    with Evaluator("cpu", workdir=tmp_path / "ev", timing=FAST) as ev:
        result = ev.evaluate(task, task.path / "starter.py", seed=3, profile="train")
        return result.status, ev.root / trace.FILE_NAME


def test_a_traced_evaluation_names_where_its_seconds_went(tmp_path, monkeypatch):
    monkeypatch.setenv(trace.ENV, "1")
    status, path = _evaluate(tmp_path)
    assert status == "passed"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    spans = {(row["role"], row["name"]) for row in rows}
    # the parent's lifecycle, the trusted worker's ops and the candidate worker's ops
    assert {
        ("harness", "job"),
        ("harness", "start: fork trusted"),
        ("harness", "end: kill workers"),
    } <= spans
    assert ("trusted", "load_task") in spans
    assert ("candidate", "compile") in spans and ("harness", "candidate compile") in spans
    assert {row["pid"] for row in rows if row["role"] == "candidate"}.isdisjoint(
        row["pid"] for row in rows if row["role"] == "trusted"
    )
    job = next(row for row in rows if row["name"] == "job")
    inside = [row for row in rows if row["name"] != "job"]
    # every span lies within the job's on the shared monotonic clock
    assert all(job["start"] <= row["start"] <= job["start"] + job["seconds"] for row in inside)


def test_no_trace_is_written_unless_asked(tmp_path, monkeypatch):
    monkeypatch.delenv(trace.ENV, raising=False)
    status, path = _evaluate(tmp_path)
    assert status == "passed" and not path.exists()


def test_the_totals_of_a_window_sum_each_span_and_skip_torn_lines(tmp_path):
    path = tmp_path / trace.FILE_NAME
    rows = [
        {"pid": 1, "role": "trusted", "name": "judge", "start": 10.0, "seconds": 0.5},
        {"pid": 2, "role": "trusted", "name": "judge", "start": 11.0, "seconds": 0.25},
        {"pid": 1, "role": "candidate", "name": "compile", "start": 30.0, "seconds": 1.0},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"pid": 3, "ro\n')
    assert trace.totals(path, 9.0, 20.0) == {"trusted: judge": 0.75}
    assert trace.totals(tmp_path / "none.jsonl", 0.0, 1.0) == {}
