"""Leftover processes (docs/integrity.md): a process that a candidate detached from its
worker's process group and left running fails the evaluation (`leftover_processes`, an
integrity flag: tests/cheats/daemon.py). What honest code starts does not detach: a compiler
that runs and exits, a worker pool (torch.compile's compile workers are one) still alive when
the candidate returns; neither is flagged."""

from __future__ import annotations

from tests.conftest import FIXTURES

HONEST_WITH_PROCESSES = """
import multiprocessing, subprocess, sys

import torch

subprocess.run([sys.executable, "-c", "pass"], check=True)  # a compiler's short life
POOL = multiprocessing.get_context("fork").Pool(1)  # alive, never closed: in the worker's group


def run(x, b):
    return x * 2 + b
"""


def test_processes_an_honest_candidate_starts_are_not_leftovers(cpu_evaluator, tmp_path):
    from core.tasks.spec import load_task

    candidate = tmp_path / "pooled.py"
    candidate.write_text(HONEST_WITH_PROCESSES)
    result = cpu_evaluator.evaluate(
        load_task(FIXTURES / "tasks" / "elementwise" / "axpy"), candidate
    )
    assert result.status == "passed", result.stages
    assert not any(
        f.startswith("leftover_processes") for f in result.integrity_flags + result.review_notes
    ), result.integrity_flags
