"""The host locker (core/evaluation/locker.py, core/harness/locker_link.py): a sandboxed
harness cannot make the CUDA checkpoint calls that keep a candidate's worker for its timing,
so the engine runs a trusted locker on the host, reached through a socket only the harness
parent holds. The harness names pids as it sees them; the locker maps each to the host's pid
among that sandbox's processes only. The driver is faked at one boundary (`load`); the PID
namespaces are real bubblewrap sandboxes (skipped without one here, failed under CI=true)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from core.evaluation import locker, sandbox
from core.evaluation.locker import Refused, host_pid
from core.harness import locker_link
from core.harness.locker_link import LockerLink
from core.harness.quiesce import LOCKED, RUNNING, Quiescer, proc_state
from core.harness.workers import Worker
from core.harness.zygote import Zygote
from tests.test_sandbox import require_sandbox

GPU_JOB = {"device": {"type": "cuda", "torch_device": "cuda:0"}, "timing": {"kind": "measured"}}
# Inside a sandbox: a process and its child (their pids as the sandbox sees them, printed), and
# what a candidate can do there: a PID namespace of its own, whose pids repeat the sandbox's.
TWO_PROCESSES = """
import ctypes, os, time
def wait():
    time.sleep(120)
    os._exit(0)
made, done = os.pipe()
child = os.fork()
if child == 0:
    if ctypes.CDLL(None).unshare(0x10000000 | 0x20000000) != 0:
        os.write(done, b"-")
    elif os.fork() == 0:
        for _ in range(8):  # the new namespace's init, and pids 2..9 in it
            if os.fork() == 0:
                wait()
        os.write(done, b"+")
    wait()
os.read(made, 1)
print(os.getpid(), child, flush=True)
wait()
"""


class Sandbox:
    """A real sandbox (bwrap's pid is `proc.pid`) holding two processes (`pids`, as it sees them)."""

    def __init__(self) -> None:
        policy = sandbox.SandboxPolicy(
            read_only=sandbox.python_paths(), masked=sandbox.private_masks()
        )
        argv, env, _ = sandbox.wrap([sys.executable, "-c", TWO_PROCESSES], policy)
        self.proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        self.pids = [int(p) for p in self.proc.stdout.readline().split()]

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


@pytest.fixture(scope="module")
def two_sandboxes() -> Iterator[tuple[Sandbox, Sandbox]]:
    require_sandbox()
    first, second = Sandbox(), Sandbox()
    yield first, second
    first.close()
    second.close()


def _nspid(pid: int) -> list[int]:
    with open(f"/proc/{pid}/status") as fh:
        line = next(line for line in fh if line.startswith("NSpid:"))
    return [int(p) for p in line.split()[1:]]


def test_a_sandbox_pid_maps_to_its_own_host_process_in_that_sandbox_only(two_sandboxes) -> None:
    first, second = two_sandboxes
    assert len(first.pids) == 2 and first.pids == second.pids  # each namespace counts anew
    seen = set()
    for box in (first, second):
        for pid in box.pids:
            host, pidfd = host_pid(box.proc.pid, pid)
            os.close(pidfd)
            assert host != pid and _nspid(host)[-1] == pid  # the one its sandbox calls `pid`
            seen.add(host)
    assert len(seen) == 4  # the same number in two sandboxes: two different processes
    nested = [
        h for h in _below(first.proc.pid) if len(_nspid(h)) == len(_nspid(first.proc.pid)) + 2
    ]
    if os.geteuid() == 0:  # where a sandbox may make namespaces (as root it may): their pids
        assert {_nspid(h)[-1] for h in nested} >= set(first.pids)  # repeat ours, and are not it


def _below(root: int) -> list[int]:
    parents = {}
    for name in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{name}/stat") as fh:
                parents[int(name)] = int(fh.read().rpartition(")")[2].split()[1])
        except OSError:
            pass
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        kids = [c for c, p in parents.items() if p == pid]
        found += kids
        todo += kids
    return found


@pytest.mark.parametrize("which", ["not in it", "the test's own", "init"])
def test_the_locker_refuses_a_pid_outside_its_sandbox(two_sandboxes, which: str) -> None:
    first, _ = two_sandboxes
    pid = {"not in it": max(first.pids) + 50, "the test's own": os.getpid(), "init": 1}[which]
    with pytest.raises(Refused):
        host_pid(first.proc.pid, pid)


class FakeDriver:
    """The driver's checkpoint API, keyed by the HOST pids the locker asks about."""

    def __init__(self, hang: str | None = None):
        self.states: dict[int, int] = {}
        self.asked: list[tuple[str, int]] = []
        self.hang = hang

    def __call__(self, op: str, pid: int, timeout_ms: int) -> dict[str, Any]:
        self.asked.append((op, pid))
        if op == self.hang:
            time.sleep(60)
        if op == "state":
            return {"rc": 0, "state": self.states.get(pid, RUNNING)}
        self.states[pid] = LOCKED if op == "lock" else RUNNING
        return {"rc": 0}


def _locker(load: Any, resolve: locker.Resolve) -> tuple[LockerLink, threading.Thread]:
    """A locker serving in a thread of this process, and the harness's link to it."""
    harness_end, locker_end = socket.socketpair()
    thread = threading.Thread(target=locker.serve, args=(locker_end, load, resolve), daemon=True)
    thread.start()
    return LockerLink(harness_end), thread


def test_the_harness_names_its_pid_and_the_driver_is_asked_about_the_host_one(
    two_sandboxes,
) -> None:
    first, second = two_sandboxes
    driver = FakeDriver()
    link, _ = _locker(lambda: driver, locker.SandboxPids(first.proc.pid))
    assert link.ready() is None
    worker = first.pids[1]
    assert link.call("lock", worker, 100) == {"rc": 0}
    host = driver.asked[-1][1]
    assert host != worker and _nspid(host)[-1] == worker
    assert link.call("state", worker, 0) == {"rc": 0, "state": LOCKED}
    refused = link.call("state", max(second.pids) + 50, 0)  # no such process in this sandbox
    assert refused["refused"] and "is not a process of this sandbox" in refused["rc"]
    assert link.call("unlock", worker, 0) == {"rc": 0}  # one refusal breaks nothing
    assert [op for op, _ in driver.asked] == ["lock", "state", "unlock"]
    assert {h for _, h in driver.asked} == {host}


def test_a_worker_that_exited_is_never_answered_for_by_its_old_host_pid(two_sandboxes) -> None:
    box = Sandbox()  # its own: one of its processes is killed here
    try:
        pids = locker.SandboxPids(box.proc.pid)
        worker = box.pids[1]
        host = pids(worker)
        assert pids(worker) == host  # known by its pidfd now
        os.kill(host, signal.SIGKILL)
        deadline = time.monotonic() + 5
        while proc_state(host) not in (None, "Z") and time.monotonic() < deadline:
            time.sleep(0.01)  # dead (a zombie until its parent waits, or gone)
        with pytest.raises(Refused):
            pids(worker)
    finally:
        box.close()


@pytest.fixture
def child() -> Iterator[subprocess.Popen]:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield proc
    proc.kill()
    proc.wait()


def _same_namespace(pid: int) -> int:
    return pid  # a test harness outside any sandbox: its pids are the host's


def test_a_quiescer_holds_and_resumes_through_the_locker(child, monkeypatch) -> None:
    driver = FakeDriver()
    link, _ = _locker(lambda: driver, _same_namespace)
    monkeypatch.setattr(locker_link, "_link", link)
    q = Quiescer(GPU_JOB)
    assert q.helper is None and q.link is link  # no in-harness helper is forked
    assert q.hold(child.pid) is None
    assert proc_state(child.pid) == "T" and driver.states[child.pid] == LOCKED
    assert q.resume(child.pid) is None and driver.states[child.pid] == RUNNING


def test_a_locker_without_a_driver_says_why_and_the_worker_is_timed_fresh(
    child, monkeypatch
) -> None:
    def no_driver() -> Any:
        raise OSError("libcuda.so.1: cannot open shared object file")

    link, thread = _locker(no_driver, _same_namespace)
    monkeypatch.setattr(locker_link, "_link", link)
    why = Quiescer(GPU_JOB).hold(child.pid)
    assert why == "the host locker is not ready: libcuda.so.1: cannot open shared object file"
    assert proc_state(child.pid) != "T"
    thread.join(5)
    assert not thread.is_alive()


def test_a_hung_driver_call_ends_the_locker_and_every_later_hold(child, monkeypatch) -> None:
    monkeypatch.setattr("core.harness.cuda_checkpoint.CALL_LIMIT_S", 0.2)
    monkeypatch.setattr("core.harness.quiesce.LOCK_TIMEOUT_MS", 100)
    monkeypatch.setattr(locker_link, "REPLY_SLACK_S", 5.0)
    link, thread = _locker(lambda: FakeDriver(hang="lock"), _same_namespace)
    monkeypatch.setattr(locker_link, "_link", link)
    assert "hung" in (Quiescer(GPU_JOB).hold(child.pid) or "")
    thread.join(5)
    assert not thread.is_alive()  # its driver is in an unknown state: no further calls
    assert "hung" in (Quiescer(GPU_JOB).hold(child.pid) or "")  # the next batch, too


def _closed_everywhere(sock: socket.socket, peer: socket.socket) -> bool:
    """True once no process holds a copy of `sock` but this one: closing it here ends the
    stream at `peer` only if nobody else has it."""
    sock.close()
    peer.settimeout(5)
    try:
        return peer.recv(1) == b""
    except TimeoutError:
        return False


def test_no_worker_the_harness_starts_holds_the_locker_socket(monkeypatch) -> None:
    harness_end, locker_end = socket.socketpair()
    harness_end.set_inheritable(True)  # as the harness got it from the engine, through bwrap
    zygote = Zygote()  # forked by the harness parent before any job, as in `serve`
    pid, conn = zygote.spawn()  # a candidate worker, forked by the zygote
    helper = Worker.fork("quiesce", lambda conn, job: time.sleep(60), {})  # like the helper
    try:
        assert proc_state(pid) is not None and proc_state(helper.pid) is not None
        assert _closed_everywhere(harness_end, locker_end)
    finally:
        helper.kill()
        conn.close()
        zygote.close()


def test_the_engine_starts_a_locker_for_a_sandboxed_nvidia_harness_only(two_sandboxes) -> None:
    assert locker.wanted("cuda", sandboxed=True)
    assert not locker.wanted("cuda", sandboxed=False)  # the harness's own helper calls the driver
    assert not locker.wanted("cpu", sandboxed=True) and not locker.wanted("rocm", sandboxed=True)
    # The real locker process, started as the engine starts it; this machine has no libcuda
    # (or no GPU), so it says so, and the harness's link reports it.
    host = locker.HostLocker()
    link_fd = os.dup(host.pass_fds[0])
    host.start(two_sandboxes[0].proc.pid)
    try:
        link = LockerLink(socket.socket(fileno=link_fd))
        why = link.ready(30)
        assert why is None or "the host locker is not ready" in why, why
        if why is None:  # a machine with a driver: a pid outside the sandbox is refused
            assert link.call("state", os.getpid(), 0).get("refused")
    finally:
        host.close()
