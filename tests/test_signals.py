"""Every terminating signal stops `arena run`, `arena serve` and the app the same way
(arena_tui/signals.py): harnesses ended, results kept, the run marked `interrupted`, the resume
command printed, and the exit code 128 + the signal (130 SIGINT, 143 SIGTERM, 129 SIGHUP).
A server killed with SIGKILL leaves its folders and a `running` run: the next server removes the
one and marks the other. Evaluations are the fake executor's (tests/fakes/executor.py): these
tests are about the process, not the kernels."""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from arena_tui.app.app import ArenaApp
from arena_tui.app.source import live_source
from core.orchestration.runfile import RunSpec
from core.store.db import Store
from core.store.errors import StoreError
from tests.fakes.executor import FakeExecutor

ROOT = Path(__file__).resolve().parents[1]
FIXTURE_TASKS = ROOT / "tests" / "fixtures" / "tasks"
RUN_FILE = "name: sig\ntasks: [elementwise/axpy]\ncandidates: [starter, baseline]\ndevices: [cpu]\niterations: 3\ncpu_slots: 1\n"


def arena(tmp_path: Path, *args: str, delay_s: float, **popen) -> subprocess.Popen:
    """`arena --db ... ARGS` over the fake executor, in its own temporary folder."""
    env = {
        **os.environ,
        "TMPDIR": str(tmp_path),
        "ARENA_FAKE_DELAY_S": str(delay_s),
        "PYTHONPATH": str(ROOT),
    }
    return subprocess.Popen(
        [sys.executable, "-m", "tests.fakes.executor", "--db", str(tmp_path / "arena.db"),
         "--tasks-dir", str(FIXTURE_TASKS), "--unsandboxed", *args],
        env=env,
        text=True,
        **popen,
    )  # fmt: skip


def wait_for(condition, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def results(db: Path) -> int:
    try:
        with Store.open(db, mode="ro") as s:
            return sum(len(s.results(r.id)) for r in s.list_runs())
    except StoreError:  # not there yet
        return 0


def test_each_signal_stops_arena_run_with_its_exit_code_and_the_resume_command(tmp_path):
    runs = {}
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):  # three at once: one wait
        folder = tmp_path / sig.name
        folder.mkdir()
        (folder / "run.yaml").write_text(RUN_FILE)
        runs[sig] = (folder, arena(folder, "run", str(folder / "run.yaml"), "--skip-preflight",
                                   "--headless", delay_s=1.0, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE))  # fmt: skip
    for sig, (folder, proc) in runs.items():
        wait_for(lambda db=folder / "arena.db": results(db) >= 2)
        proc.send_signal(sig)
    resumes = {}
    for sig, (folder, proc) in runs.items():
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 128 + sig, (sig, out, err)
        with Store.open(folder / "arena.db") as s:
            [run] = s.list_runs()
            kept = len(s.results(run.id))
            assert run.status == "interrupted" and 2 <= kept < 6
        assert f"interrupted by {sig.name}: {kept} of 6 results kept. Resume with:" in out
        resume = out.strip().splitlines()[-1]
        assert resume.startswith("arena --db ") and resume.endswith(
            f"run --resume {run.id} --skip-preflight"
        )
        left = [
            str(p.relative_to(folder)) for d in folder.glob("arena-*") for p in [d, *d.rglob("*")]
        ]
        assert not left, f"its temporary folders were removed: {left} are left"
        resumes[sig] = (run.id, resume)
    folder, _ = runs[signal.SIGTERM]
    run_id, resume = resumes[signal.SIGTERM]
    done = arena(folder, *resume.split()[5:], "--headless", delay_s=0, stdout=subprocess.PIPE)
    assert done.wait(60) == 1  # the fake's candidates fail; the run finishes
    with Store.open(folder / "arena.db") as s:
        assert s.get_run(run_id).status == "finished" and len(s.results(run_id)) == 6


def post(port: int, path: str, body: dict) -> tuple[int, dict]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        response = conn.getresponse()
        return response.status, json.loads(response.read() or b"{}")
    except (ConnectionError, http.client.HTTPException):
        return 0, {}
    finally:
        conn.close()


def serve(tmp_path: Path, delay_s: float) -> tuple[subprocess.Popen, int, list[str]]:
    proc = arena(tmp_path, "serve", "--port", "0", "--grace", "1", delay_s=delay_s,
                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT)  # fmt: skip
    lines: list[str] = []
    assert proc.stdout is not None
    for line in proc.stdout:
        lines.append(line)
        found = re.search(r"http://127\.0\.0\.1:(\d+)", line)
        if found:
            return proc, int(found.group(1)), lines
    raise AssertionError(f"the server did not start: {''.join(lines)}")


def test_a_killed_server_is_cleared_by_the_next_and_sigterm_drains_with_143(tmp_path):
    code = (
        ROOT / "tests" / "fixtures" / "tasks" / "elementwise" / "axpy" / "starter.py"
    ).read_text()
    proc, port, _ = serve(tmp_path, delay_s=60)
    answer: list[int] = []
    client = threading.Thread(
        target=lambda: answer.append(
            post(port, "/evaluate", {"task_id": "elementwise/axpy", "code": code})[0]
        )
    )
    client.start()
    wait_for(lambda: list(tmp_path.glob("arena-cand-*/*/candidate.py")))  # in flight
    proc.kill()  # SIGKILL: nothing of its own cleanup runs
    proc.wait()
    client.join(30)
    assert answer == [0]  # the connection dropped
    left = sorted(p.name.split("-")[1] for p in tmp_path.glob("arena-*"))
    assert left == ["cand", "rl"]
    with Store.open(tmp_path / "arena.db") as s:
        [killed] = s.list_runs()
        assert killed.status == "stale" and killed.job_states == {"running": 1}

    proc, port, lines = serve(tmp_path, delay_s=0.5)
    started = "".join(lines)
    assert "removed 2 temporary folder(s) left by stopped arena process(es)" in started
    assert f"run {killed.id} of a stopped server" in started
    assert not [p for p in tmp_path.glob("arena-*") if p.name.split("-")[1] in ("cand", "rl")]
    with Store.open(tmp_path / "arena.db") as s:
        run = s.get_run(killed.id)
        assert run.status == "interrupted" and run.job_states == {"cancelled": 1}

    answer.clear()
    client = threading.Thread(
        target=lambda: answer.append(
            post(port, "/evaluate", {"task_id": "elementwise/axpy", "code": code})[0]
        )
    )
    client.start()
    wait_for(lambda: list(tmp_path.glob("arena-cand-*/*/candidate.py")))
    proc.send_signal(signal.SIGTERM)  # the evaluation in flight gets its grace, then answers
    rest, _ = proc.communicate(timeout=60)
    client.join(30)
    assert proc.returncode == 143 and answer == [200], rest
    assert "1 evaluation(s) finished, 0 cancelled" in rest and "stopped by SIGTERM" in rest
    assert not [p for p in tmp_path.glob("arena-*") if p.name.split("-")[1] in ("cand", "rl")]
    with Store.open(tmp_path / "arena.db") as s:
        statuses = sorted(r.status for r in s.list_runs())
        assert statuses == ["finished", "interrupted"]


def test_a_signal_stops_the_app_like_its_quit_key(tmp_path, monkeypatch):
    monkeypatch.setattr(FakeExecutor, "delay_s", 30.0)
    spec = RunSpec(name="app", tasks=("elementwise/axpy",), candidates=("starter",),
                   devices=("cpu",), cpu_slots=1, tasks_dir=str(FIXTURE_TASKS))  # fmt: skip

    async def drive(store: Store, run_id: str) -> ArenaApp:
        app = ArenaApp(live_source(store, run_id, spec, FakeExecutor))
        async with app.run_test(size=(100, 30)) as pilot:
            while FakeExecutor.runs == runs_before:  # the evaluation is on its slot
                await pilot.pause(0.05)
            assert signal.getsignal(signal.SIGTERM) not in (signal.SIG_DFL, None)
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(200):
                if app.return_code is not None:
                    break
                await pilot.pause(0.05)
        return app

    with Store.open(tmp_path / "arena.db") as store:
        run_id = store.create_run(spec.name, spec.to_json())
        runs_before = FakeExecutor.runs
        app = asyncio.run(drive(store, run_id))
        assert app.stopped_by == signal.SIGTERM and app.return_code == 143
        assert store.get_run(run_id).status == "interrupted"
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL  # given back when it ended


@pytest.mark.parametrize("sig", [signal.SIGTERM])
def test_the_signal_helpers_name_and_number_signals(sig):
    from arena_tui.signals import Interrupted, exit_code, signal_name

    assert exit_code(sig) == 143 and signal_name(sig) == "SIGTERM"
    assert Interrupted(signal.SIGHUP).exit_code == 129
