"""The host locker beside harnesses that run on another machine (issue 20): an SSH host's job
runs `python -m core.evaluation.sandbox exec --locker` on an NVIDIA host, which starts the
locker (core/evaluation/locker.py, the same one the local engine starts) beside the sandboxed
harness there; a Ray node starts it beside its harness as executors.Harness does. The driver
is absent here: the locker then says so, and the harness's link reports why (its candidates
are timed in fresh workers, as without it). The sandboxes are real (skipped without
bubblewrap here, failed under CI=true)."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from core.evaluation import locker
from remotes.bundle import harness_files
from remotes.executor import job_script
from remotes.facts import HostFacts
from remotes.hosts import Host
from tests.test_sandbox import require_sandbox

# Inside the sandbox: the harness's end of the locker (its number in ARENA_LOCKER_FD), asked
# whether the locker is ready; the answer written to the descriptor the job's events use.
HARNESS = """
import json, os, socket, sys
from core.harness.locker_link import ENV, LockerLink
fd = os.environ.get(ENV)
why = LockerLink(socket.socket(fileno=int(fd))).ready(30) if fd else "no locker descriptor"
os.write(int(sys.argv[1]), (json.dumps({"fd": fd, "why": why}) + "\\n").encode())
"""


@pytest.mark.parametrize(
    "device,rocm,wanted",
    [("cuda:0", False, True), ("cuda:0", True, False), ("cpu", False, False)],
)
def test_an_nvidia_hosts_job_starts_the_locker_beside_its_harness(device, rocm, wanted):
    facts = HostFacts(python="3.11", home="/home/u", hip="6.2" if rocm else None)
    script = job_script(Host("box", "h"), facts, "/home/u/jobs/j1", device, 60.0, 10)
    [line] = [ln for ln in script.splitlines() if ln.startswith("setsid sh -c ")]
    harness = shlex.split(line)[3]
    sandbox_exec = harness.split(" -- ")[0]
    assert ("--locker" in sandbox_exec) == wanted
    # the locker travels in the bundle, with the harness it serves
    names = {name for _, name in harness_files()}
    assert "core/evaluation/locker.py" in names and "core/harness/locker_link.py" in names


@pytest.fixture
def job_folder():
    """A job's folder as on a host (the sandbox's uid may enter it; pytest's tmp_path is
    root's alone when the tests run as root)."""
    folder = Path(tempfile.mkdtemp(prefix="arena-locker-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_the_shipped_sandbox_starts_the_locker_and_hands_the_harness_its_socket(job_folder):
    """What an NVIDIA host runs, from the bundle's files alone: the harness inside the sandbox
    gets its end of the locker's socket, and the descriptors an exec would pass (the events')
    still reach it."""
    require_sandbox()
    tmp_path = job_folder
    for src, name in harness_files():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(src.read_bytes())
    (tmp_path / "work").mkdir()
    read, write = os.pipe()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "core.evaluation.sandbox",
            "exec",
            "--writable",
            str(tmp_path / "work"),
            "--read-only",
            str(tmp_path / "core"),
            "--locker",
            "--",
            sys.executable,
            "-c",
            HARNESS,
            str(write),
        ],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
        pass_fds=(write,),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    os.close(write)
    with os.fdopen(read) as events:
        line = events.readline()
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err.decode()[-2000:]
    got = json.loads(line)
    assert got["fd"] is not None  # the harness got its end
    # No libcuda here (or no GPU): the locker said why, and that is the harness's reason.
    assert got["why"] is None or "the host locker is not ready" in got["why"], got


def test_a_ray_node_starts_the_locker_beside_a_sandboxed_nvidia_harness(
    tmp_path, monkeypatch, fixture_tasks
):
    """The node decides as the local engine does (`locker.wanted`); with the device faked as
    NVIDIA at that one boundary, the locker runs beside the harness for the job's life."""
    from core.devices.device import probe
    from core.evaluation.job import build_job
    from core.orchestration.ray_executor import job_files
    from core.orchestration.ray_node import run_on_node
    from core.tasks.spec import load_task

    require_sandbox()
    asked = []

    def wanted(device_type: str, sandboxed: bool) -> bool:
        asked.append((device_type, sandboxed))
        return sandboxed

    monkeypatch.setattr(locker, "wanted", wanted)
    task = load_task(fixture_tasks / "elementwise" / "axpy")
    job = build_job(
        task,
        fixture_tasks.parent / "candidates" / "axpy_torch.py",
        probe("cpu"),
        "cpu",
        5,
        tmp_path / "w",
        performance=False,
    )
    lines = run_on_node(job, job_files(job), "ray:cpu", 120.0)
    first = next(lines)
    assert asked == [("cpu", True)] and first["locker_pid"], first
    assert Path(f"/proc/{first['locker_pid']}").exists()
    finished = [line for line in lines if '"evaluation_finished"' in line]
    assert finished and json.loads(finished[0])["status"] == "passed"
    lines.close()
    assert (
        not Path(f"/proc/{first['locker_pid']}/status").exists()
        or "Z" in Path(f"/proc/{first['locker_pid']}/status").read_text().split("State:")[1][:4]
    )
