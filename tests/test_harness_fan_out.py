"""On a CPU or simulated device, an evaluation keeps two cores busy: the correctness runs and a
`sim:` device's counting spread over two candidate workers, forked alike, while the verdicts and
events stay in the workloads' order, as with one worker. A GPU device, and the timed calls of a
measured one, keep to one worker."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap

import pytest

from core.harness.runner import evaluation_cores
from tests.conftest import FIXTURES, ROOT

needs_two_cores = pytest.mark.skipif(
    evaluation_cores() < 2, reason="this machine gives an evaluation one core"
)

# Writes the worker's pid on every call (the candidate's log is its stdout), and is wrong on
# seed-dependent inputs of the second visible workload only when asked to.
CANDIDATE = """
import os
import torch

def run(x, b):
    os.write(1, f"pid {os.getpid()}\\n".encode())  # one write: the two workers share the log
    y = 2 * x + b
    if WRONG and x.shape == (16, 256):
        y[0, 0] += 1.0
    return y
"""


def evaluate(tmp_path, device: str, wrong: bool = False) -> tuple[list[dict], set[int]]:
    candidate = tmp_path / "solution.py"
    candidate.write_text(f"WRONG = {wrong}\n" + CANDIDATE)
    workdir = tmp_path / "work"
    script = textwrap.dedent(f"""
        import json
        from pathlib import Path
        from core.devices.device import probe
        from core.evaluation.evaluator import build_job
        from core.tasks.spec import load_task
        from core.harness.runner import run_job

        task = load_task({str(FIXTURES / "tasks" / "elementwise" / "axpy")!r})
        job = build_job(task, Path({str(candidate)!r}), probe({device!r}), "cpu", 5, {str(workdir)!r})
        seen = []
        run_job(job, seen.append)
        print(json.dumps(seen))
    """)
    proc = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    events = json.loads(proc.stdout.strip().splitlines()[-1])
    log = (workdir / "candidate.log").read_text()
    pids = {int(pid) for pid in re.findall(r"^pid (\d+)$", log, re.M)}
    return events, pids


@needs_two_cores
def test_correctness_runs_on_two_workers_and_reports_in_order(tmp_path):
    events, pids = evaluate(tmp_path, "cpu")
    assert events[-1]["status"] == "passed", events[-1]
    assert len(pids) == 2
    checked = [(e["stage"], e["workload"]) for e in events if e["type"] == "workload_checked"]
    assert checked[:2] == [("correctness", "N=64,D=128"), ("correctness", "N=16,D=256")]
    assert [s for s, _ in checked[2:]] == ["generalization", "generalization"]
    # Both workers ran on inputs the trusted worker drew into their regions (shared_check.py).
    stages = [e for e in events if e["type"] == "stage_finished" and e["stage"] != "compile"]
    assert not any(e.get("note") for e in stages[:2]), stages


@needs_two_cores
def test_a_wrong_workload_is_reported_as_with_one_worker(tmp_path):
    events, _ = evaluate(tmp_path, "cpu", wrong=True)
    checked = [e for e in events if e["type"] == "workload_checked"]
    assert [(e["workload"], e["passed"]) for e in checked] == [
        ("N=64,D=128", True),
        ("N=16,D=256", False),
    ]
    assert checked[1]["message"].startswith("output `y`, seed ")
    failed = next(
        e for e in events if e["type"] == "stage_finished" and e["stage"] == "correctness"
    )
    assert failed["status"] == "failed" and failed["message"].startswith(
        "1 of 2 workload(s) wrong; first: N=16,D=256"
    )
    assert events[-1]["status"] == "failed"


@needs_two_cores
def test_a_simulated_device_counts_on_two_workers(tmp_path):
    events, pids = evaluate(tmp_path, "sim:h200")
    assert events[-1]["status"] == "passed", events[-1]
    timed = [e["workload"] for e in events if e["type"] == "workload_timed"]
    assert timed == [
        "N=64,D=128",
        "N=16,D=256",
        "N=33,D=100",
    ]  # the GPU performance workloads, in order
    assert all(e["mode"] == "predicted" for e in events if e["type"] == "workload_timed")
    assert len(pids) == 2
