"""Shared fixtures, and the per-area timing summary that .ci/run prints."""

from __future__ import annotations

import time
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"

_area_seconds: dict[str, float] = defaultdict(float)


@pytest.fixture(autouse=True)
def _private_store(tmp_path_factory, monkeypatch) -> Path:
    """Every test gets its own results store: none ever writes to the user's real one."""
    path = tmp_path_factory.mktemp("store") / "arena.db"
    monkeypatch.setenv("ARENA_DB", str(path))
    return path


@pytest.fixture(scope="session")
def fixture_tasks() -> Path:
    return FIXTURES / "tasks"


@pytest.fixture(scope="session")
def candidates() -> Path:
    return FIXTURES / "candidates"


@pytest.fixture(scope="module")
def triton_interpreter() -> None:
    """Triton's CPU interpreter on, as the harness runs the starters here (it is process-wide:
    a module that asks for it keeps it on)."""
    from core.harness.triton_cpu import enable_interpreter

    enable_interpreter()


@pytest.fixture(scope="session")
def cpu_evaluator():
    """One warm harness on the CPU device for the whole session, as `arena` itself uses."""
    from core.evaluation.evaluator import Evaluator

    with Evaluator("cpu") as evaluator:
        yield evaluator


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    start = time.monotonic()
    yield
    _area_seconds[Path(item.fspath).relative_to(ROOT).as_posix()] += time.monotonic() - start


def pytest_terminal_summary(terminalreporter):
    if not _area_seconds:
        return
    terminalreporter.section("time per test area")
    for area, seconds in sorted(_area_seconds.items(), key=lambda kv: -kv[1]):
        terminalreporter.write_line(f"{seconds:8.1f} s  {area}")
