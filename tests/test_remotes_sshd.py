"""Remote evaluation against a REAL OpenSSH server on loopback (tests/sshd.py starts it with
its own config, host key and authorized_keys, MaxSessions 2): an evaluation end to end, a
connection cut mid-job, a cancelled job, more jobs than MaxSessions, `arena hosts check`.

Skipped with a reason where sshd is missing, except under CI=true, where that fails."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from pathlib import Path

import pytest
import yaml

from core.evaluation.evaluator import Evaluator
from core.evaluation.executors import HarnessError
from core.model import events
from core.model.task import Limits
from core.tasks.spec import load_task
from remotes import RemoteExecutor, parse_hosts
from remotes import executor as executor_module
from remotes.pool import ConnectionPool
from tests.sshd import missing_prerequisite, require, start_sshd

MAX_SESSIONS = 2
HANG_LIMITS = Limits(compile_s=60, correctness_s=60, performance_s=60)


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    why = missing_prerequisite()
    require(why is None, f"needs a loopback OpenSSH server: {why}")
    server = start_sshd(tmp_path_factory.mktemp("sshd"), max_sessions=MAX_SESSIONS)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def hosts(sshd):
    return parse_hosts({"hosts": [sshd.host_entry("localhost-test")]})


@pytest.fixture(scope="module")
def axpy(fixture_tasks):
    return load_task(fixture_tasks / "elementwise" / "axpy")


@pytest.fixture(scope="module")
def remote_cpu(hosts):
    """One probed executor for the module (probing runs the harness there once)."""
    executor = RemoteExecutor("localhost-test/cpu", hosts, pool=ConnectionPool())
    yield executor
    executor.pool.close()


def leftovers(sshd) -> list[str]:
    """Processes of remote jobs still alive: anything running in or naming the remote folder,
    and the hanging candidate's child."""
    found = []
    root = str(sshd.remote_dir)
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            cwd = os.readlink(proc / "cwd")
        except OSError:
            continue
        if root in cmdline or cwd.startswith(root) or "arena-hang-child" in cmdline:
            found.append(f"{proc.name}: {cmdline[:120]} (cwd {cwd})")
    return found


def job_dirs(sshd) -> list[str]:
    jobs = sshd.remote_dir / "jobs"
    return sorted(p.name for p in jobs.iterdir()) if jobs.is_dir() else []


def settled(sshd, seconds: float = 5.0) -> tuple[list[str], list[str]]:
    """Leftover processes and job folders, once they had `seconds` to go away."""
    deadline = time.monotonic() + seconds
    while True:
        procs, dirs = leftovers(sshd), job_dirs(sshd)
        if (not procs and not dirs) or time.monotonic() > deadline:
            return procs, dirs
        time.sleep(0.1)


async def start_hanging_job(sshd, executor, axpy, candidates, seen: list) -> asyncio.Task:
    """A job whose candidate hangs in its compile stage (and starts a child that would
    outlive a careless clean-up); returns once that stage is running on the host."""
    evaluator = Evaluator(executor=executor)
    running = asyncio.Event()

    def on_event(event):
        seen.append(event)
        if isinstance(event, events.StageStarted) and event.stage == "compile":
            running.set()

    task = asyncio.ensure_future(
        evaluator.aevaluate(
            axpy, candidates / "axpy_hang.py", on_event=on_event, limits=HANG_LIMITS
        )
    )
    await asyncio.wait_for(running.wait(), 60)
    deadline = time.monotonic() + 10
    while not any("arena-hang-child" in p for p in leftovers(sshd)) and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    return task


def test_a_remote_evaluation_runs_end_to_end(sshd, remote_cpu, axpy, candidates):
    assert remote_cpu.info.id == "localhost-test/cpu" and remote_cpu.info.type == "cpu"
    assert remote_cpu.info.extra["host"] == "localhost-test"
    seen: list = []
    with Evaluator(executor=remote_cpu) as evaluator:
        passed = evaluator.evaluate(axpy, candidates / "axpy_torch.py", on_event=seen.append)
        wrong = evaluator.evaluate(axpy, candidates / "axpy_wrong.py")
    assert passed.status == "passed", passed.stages
    assert [s.status for s in passed.stages] == ["passed"] * 4
    assert passed.device["id"] == "localhost-test/cpu" and passed.timing_kind == "cpu"
    # It ran in the host's sandbox (the job script starts the harness through core/evaluation/sandbox.py there).
    assert passed.sandbox["mode"] == "bubblewrap" and passed.sandbox["host"] == "localhost-test", (
        passed.sandbox
    )
    assert passed.sandbox["version"].startswith("bubblewrap") and passed.sandbox["bwrap"]
    assert isinstance(seen[0], events.EvaluationStarted) and isinstance(
        seen[-1], events.EvaluationFinished
    )
    assert wrong.status == "failed" and wrong.failed_stage == "correctness"
    assert "worst at" in wrong.stage("correctness").workloads[0]["message"]
    assert settled(sshd) == ([], [])


@pytest.mark.parametrize("cut", ["sshd_child_killed", "client_closes"])
def test_a_connection_cut_mid_job_is_a_harness_error_and_leaves_nothing(
    sshd, remote_cpu, axpy, candidates, cut, monkeypatch
):
    """Nothing may be left even when the client cannot clean up: the job's script notices
    that its stdin closed and kills the job itself (the client's clean-up is disabled here)."""

    async def no_client_cleanup(*args, **kwargs):
        return None

    monkeypatch.setattr(executor_module.RemoteExecutor, "_cleanup", no_client_cleanup)

    async def scenario() -> None:
        seen: list = []
        task = await start_hanging_job(sshd, remote_cpu, axpy, candidates, seen)
        assert any("arena-hang-child" in p for p in leftovers(sshd)) and job_dirs(sshd)
        if cut == "sshd_child_killed":
            for pid in sshd.session_pids():
                os.kill(pid, signal.SIGKILL)
        else:
            remote_cpu.connection.disconnect()
        with pytest.raises(HarnessError, match="connection was lost"):
            await asyncio.wait_for(task, 20)

    asyncio.run(scenario())
    assert settled(sshd) == ([], [])


def test_a_cancelled_remote_job_is_killed_with_everything_it_started(
    sshd, remote_cpu, axpy, candidates
):
    async def scenario() -> float:
        seen: list = []
        task = await start_hanging_job(sshd, remote_cpu, axpy, candidates, seen)
        assert any("arena-hang-child" in p for p in leftovers(sshd))
        start = time.monotonic()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        took = time.monotonic() - start
        # The connection survives a cancelled job, its channel given back.
        conn = remote_cpu.connection
        assert conn.limiter.in_use == 0 and conn.connects == 1
        assert (await conn.run("echo still here")).stdout.strip() == "still here"
        return took

    assert asyncio.run(scenario()) < 5
    assert settled(sshd, seconds=2) == ([], [])


def test_more_jobs_than_max_sessions_all_finish(sshd, hosts, remote_cpu, axpy, candidates):
    """MaxSessions is 2 and the host entry does not say so: the first refused channel teaches
    the limiter, and all five jobs run two at a time on the one connection."""
    pool = ConnectionPool()

    async def scenario() -> list:
        executor = RemoteExecutor("localhost-test/cpu", hosts, info=remote_cpu.info, pool=pool)
        evaluator = Evaluator(executor=executor)
        results = await asyncio.gather(
            *(evaluator.aevaluate(axpy, candidates / "axpy_syntax_error.py") for _ in range(5))
        )
        conn = pool.get(hosts[0])
        assert conn.connects == 1 and conn.limiter.limit == MAX_SESSIONS
        await conn.aclose()
        evaluator.close()
        return results

    results = asyncio.run(scenario())
    assert [r.failed_stage for r in results] == ["compile"] * 5
    assert all("SyntaxError" in r.stage("compile").message for r in results)
    assert settled(sshd) == ([], [])


def test_hosts_check_and_list_devices_report_each_host_and_reject_a_bad_file(
    sshd, tmp_path, capsys
):
    from arena_tui.cli import main

    good = tmp_path / "hosts.yaml"
    good.write_text(yaml.safe_dump({"hosts": [sshd.host_entry("localhost-test")]}))
    assert main(["hosts", "check", "--hosts", str(good)]) == 0
    out, _ = capsys.readouterr()
    assert (
        "localhost-test" in out
        and "ok" in out
        and "Python 3." in out
        and "torch 2." in out
        and "Triton" in out
    )
    assert "devices: cpu" in out
    assert "sandbox: bubblewrap" in out and "namespaces" in out  # each host's sandbox mode
    assert main(["hosts", "check", "--json", "--hosts", str(good)]) == 0
    (report,) = json.loads(capsys.readouterr().out)
    assert report["sandbox"]["mode"] == "bubblewrap" and report["sandbox"]["bwrap"], report

    from remotes import list_devices  # what `arena devices` shows for the hosts

    devices, problems = list_devices(parse_hosts({"hosts": [sshd.host_entry("localhost-test")]}))
    assert [d.id for d in devices] == ["localhost-test/cpu"] and problems == []

    empty = tmp_path / "known_hosts"
    empty.write_text("")
    stranger = tmp_path / "stranger.yaml"
    stranger.write_text(
        yaml.safe_dump({"hosts": [sshd.host_entry("stranger", known_hosts=str(empty))]})
    )
    assert main(["hosts", "check", "--hosts", str(stranger)]) == 3
    out, _ = capsys.readouterr()
    assert "host key unknown" in out and f"ssh-keyscan -p {sshd.port} 127.0.0.1" in out

    bad = tmp_path / "bad.yaml"
    bad.write_text("hosts:\n  - {name: box1, host: h, port: twenty-two}\n")
    assert main(["hosts", "check", "--hosts", str(bad)]) == 2
    _, err = capsys.readouterr()
    assert err.count("error:") == 1 and str(bad) in err and "hosts[0].port" in err and "Fix:" in err


def test_a_harness_that_exits_without_finishing_is_a_harness_error_with_its_log(
    sshd, remote_cpu, axpy, candidates, tmp_path
):
    broken = tmp_path / "broken-python"
    # Answers the arena's questions about versions, but its harness dies at once.
    broken.write_text(f"""#!/bin/sh
case "$*" in *"core.harness run"*) echo 'ImportError: the remote torch is broken' >&2; exit 3;; esac
exec {sys.executable} "$@"
""")
    broken.chmod(0o755)
    host = parse_hosts({"hosts": [sshd.host_entry("localhost-test", python=str(broken))]})[0]
    executor = RemoteExecutor(
        "localhost-test/cpu", host, info=remote_cpu.info, pool=ConnectionPool()
    )
    with pytest.raises(
        HarnessError,
        match=r"without finishing the evaluation \(exit 3\).*the remote torch is broken",
    ):
        asyncio.run(Evaluator(executor=executor).aevaluate(axpy, candidates / "axpy_torch.py"))
    assert settled(sshd) == ([], [])
