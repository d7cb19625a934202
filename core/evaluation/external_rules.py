"""An external task's own rules: how AgentKernelArena reads its commands' outcome.

These follow AgentKernelArena's evaluator (src/evaluator.py, src/performance.py,
src/testcases.py, src/score.py at d6f7c8a4), re-written, so an external task passes, fails and
scores here as it would there:

- a stage passes when every command exits 0; correctness also fails when the output says
  `fail` and nowhere `pass` (its tests print FAIL and still exit 0);
- times come from the first JSON report the performance command wrote
  (`build/performance_report.json`, `performance_report.json`, `build/perf_report.json`,
  `perf_report.json`, `perf/benchmark_results.json`), one case per entry, the time from the
  first device-time key (`device_time_ms`, …, `execution_time_ms`), then the ambiguous ones
  (`execution_time`, `time_ms`, `time`), then `timing_ms.mean`; host wall-clock keys are
  refused. With no report: `Test case N: X ms`, `Shape [..]: X ms` or `Performance: X ms` in
  its output;
- cases match the baseline's by `params`, then `shape`, then `test_case_id`, and every case must
  match; the speedup is the arithmetic mean of the per-case baseline / candidate ratios;
- points: 0 if it does not compile, 20 if it compiles and is wrong, 20 + 100 + 100 x speedup.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPORTS = (
    "build/performance_report.json",
    "performance_report.json",
    "build/perf_report.json",
    "perf_report.json",
    "perf/benchmark_results.json",
)
DEVICE_KEYS = (
    "device_time_ms",
    "gpu_time_ms",
    "kernel_time_ms",
    "cuda_event_time_ms",
    "cuda_graph_time_ms",
    "execution_time_ms",
)
AMBIGUOUS_KEYS = ("execution_time", "time_ms", "time")
HOST_KEYS = (
    "host_time_ms",
    "wall_time_ms",
    "elapsed_time_ms",
    "total_time_ms",
    "end_to_end_time_ms",
)
LIST_KEYS = ("test_cases", "results", "cases", "benchmarks")


@dataclass(frozen=True)
class Case:
    """One timed case of a performance command: its key (for matching) and its time."""

    key: str
    ms: float


def correctness_passed(returncode: int, output: str) -> bool:
    text = output.lower()
    if returncode != 0:
        return False
    return not ("fail" in text and "pass" not in text and "correctness: pass" not in text)


def _time_of(entry: dict[str, Any]) -> float | None:
    for key in DEVICE_KEYS + AMBIGUOUS_KEYS:
        value = entry.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
            return float(value)
    timing = entry.get("timing_ms")
    if (
        isinstance(timing, dict)
        and isinstance(timing.get("mean"), (int, float))
        and timing["mean"] > 0
    ):
        return float(timing["mean"])
    return None  # host-only keys (HOST_KEYS) are not device time: refused, as at home


def _key_of(entry: dict[str, Any], index: int) -> str:
    for name in ("params", "shape", "shapes", "test_case_id"):
        if entry.get(name) is not None:
            return f"{name}={json.dumps(entry[name], sort_keys=True, default=str)}"
    return f"case={index}"


def cases_from_report(report: Any) -> list[Case]:
    entries: list[Any]
    if isinstance(report, list):
        entries = report
    elif isinstance(report, dict):
        nested = next((report[k] for k in LIST_KEYS if isinstance(report.get(k), list)), None)
        entries = nested if nested is not None else [report]
    else:
        return []
    cases = []
    for i, entry in enumerate(entries):
        if isinstance(entry, dict) and (ms := _time_of(entry)) is not None:
            cases.append(Case(_key_of(entry, i), ms))
    return cases


def cases_from_output(output: str) -> list[Case]:
    cases = [
        Case(f"test_case_id=test_case_{n}", float(t))
        for n, t in re.findall(
            r"(?:Test\s+case|TestCase)\s+(\d+)[:\s]+([0-9.]+)\s*ms", output, re.IGNORECASE
        )
    ]
    cases += [
        Case(f"shape=[{s.replace(' ', '')}]", float(t))
        for s, t in re.findall(
            r"(?:Shape|shape)[:\s]+\[([0-9,\s]+)\][:\s]+([0-9.]+)\s*ms", output, re.IGNORECASE
        )
    ]
    if not cases:
        cases = [
            Case(f"case={i}", float(t))
            for i, t in enumerate(
                re.findall(r"Performance:\s*([0-9.]+)\s*ms", output, re.IGNORECASE)
            )
        ]
    return [c for c in cases if c.ms > 0]


def read_cases(workspace: Path, output: str) -> tuple[list[Case], str]:
    """The performance command's cases and where they came from (a report's path, or `output`)."""
    for name in REPORTS:
        path = workspace / name
        if path.is_file():
            try:
                cases = cases_from_report(json.loads(path.read_text()))
            except (OSError, ValueError):
                continue
            if cases:
                return cases, name
    return cases_from_output(output), "output"


def match(
    baseline: list[Case], candidate: list[Case]
) -> tuple[list[tuple[Case, Case]], str | None]:
    """Pairs of (baseline, candidate) cases, or why they do not all match."""
    if not baseline or not candidate:
        return [], "no timed case" + (
            " in the baseline's run" if not baseline else " in the candidate's run"
        )
    by_key = {c.key: c for c in candidate}
    if len(baseline) == 1 and len(candidate) == 1:
        return [(baseline[0], candidate[0])], None
    pairs = [(b, by_key[b.key]) for b in baseline if b.key in by_key]
    if len(pairs) != len(baseline) or len(candidate) != len(baseline):
        return (
            [],
            f"the candidate's {len(candidate)} cases do not all match the baseline's {len(baseline)} (every case must match)",
        )
    return pairs, None


def speedup(pairs: list[tuple[Case, Case]]) -> float:
    return sum(b.ms / c.ms for b, c in pairs) / len(pairs) if pairs else 0.0


def points(compiled: bool, correct: bool, ratio: float) -> float:
    if not compiled:
        return 0.0
    if not correct:
        return 20.0
    return 120.0 + 100.0 * max(ratio, 0.0)
