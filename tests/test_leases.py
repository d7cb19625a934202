"""One owner per run (core/store/leases.py, core/orchestration/lease.py): the process that
executes a run holds its lease; a second process is refused with one line naming the first; a
run whose process died shows `stale`, not `running`, and resumes cleanly, nothing done twice.
And the temporary folders a killed process leaves (core/model/scratch.py) are removed by the
next start, and only those."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from arena_tui.cli import main
from core.model import owner as owner_module
from core.model.owner import Owner
from core.model.scratch import OWNER_FILE, owned_tempdir, sweep
from core.orchestration.runfile import RunSpec
from core.orchestration.runs import execute
from core.store import rows
from core.store.db import Store
from core.store.errors import RunOwnedError
from tests.fakes.executor import FakeExecutor

ROOT = Path(__file__).resolve().parents[1]
FIXTURE_TASKS = ROOT / "tests" / "fixtures" / "tasks"


def spec(iterations: int = 2) -> RunSpec:
    return RunSpec(
        name="lease",
        tasks=("elementwise/axpy",),
        candidates=("starter", "baseline"),
        devices=("cpu",),
        iterations=iterations,
        cpu_slots=1,
        tasks_dir=str(FIXTURE_TASKS),
    )


@pytest.fixture
def store(tmp_path):
    with Store.open(tmp_path / "arena.db") as s:
        yield s


@pytest.fixture
def other_process():
    """A live process that is not this one: the owner of a run in another terminal."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield proc
    proc.kill()
    proc.wait()


def dead_owner() -> Owner:
    """The owner a killed process leaves behind: it was real, and it is gone."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    owner = Owner.of(proc.pid)
    proc.kill()
    proc.wait()
    return owner


def test_an_owner_is_this_very_process_not_its_number():
    me = Owner.me()
    assert me.pid == os.getpid() and me.host == socket.gethostname() and me.alive() is True
    assert dead_owner().alive() is False
    reused = Owner(me.pid, me.host, me.token.split(":")[0] + ":1")  # same id, another start
    assert reused.alive() is False
    assert Owner(1, "another-host", "x:1").alive() is None  # judged by its heartbeat instead
    boot, ticks, _ = me.token.split(":")
    assert Owner(me.pid, me.host, f"{boot}:{ticks}:1").alive() is None  # another container's id


def test_a_live_owner_is_named_and_a_second_process_is_refused(store, other_process):
    theirs = Owner.of(other_process.pid)
    run_id = store.create_run("theirs", spec().to_json(), owner=theirs)
    assert store.get_run(run_id).status == "running"
    with pytest.raises(RunOwnedError) as caught:
        store.resume_run(run_id)
    message = str(caught.value)
    assert f"process {other_process.pid} on {socket.gethostname()}" in message
    assert f"kill {other_process.pid}" in message and "\n" not in message
    with pytest.raises(RunOwnedError):
        store.check_lease(run_id)
    before = FakeExecutor.runs
    with pytest.raises(RunOwnedError):  # the engine refuses too, before any job runs
        asyncio.run(execute(store, run_id, spec(), FakeExecutor))
    assert FakeExecutor.runs == before and store.lease(run_id).owner == theirs


def test_a_run_whose_owner_died_is_stale_and_resumes_with_nothing_done_twice(store):
    run_id = store.create_run("killed", spec().to_json(), owner=dead_owner())
    assert store.get_run(run_id).status == "stale"
    assert [r.status for r in store.list_runs()] == ["stale"]
    outcome = asyncio.run(execute(store, run_id, spec(), FakeExecutor))
    assert len(outcome.results) == 4 and store.get_run(run_id).status == "finished"
    assert store.lease(run_id) is None  # a finished run has no owner
    finished = [e for e in store.events(run_id) if e.type == "evaluation_finished"]
    assert len(finished) == len(store.results(run_id)) == 4


def test_an_owner_on_another_host_is_live_while_its_heartbeat_is(store, monkeypatch):
    elsewhere = Owner(4242, "another-host", "boot:1")
    run_id = store.create_run("remote", spec().to_json(), owner=elsewhere)
    assert store.get_run(run_id).status == "running"
    with pytest.raises(RunOwnedError, match="process 4242 on another-host"):
        store.resume_run(run_id)
    monkeypatch.setattr(rows, "STALE_AFTER_S", 0.0)  # its heartbeat is now too old
    assert store.get_run(run_id).status == "stale"
    assert store.resume_run(run_id).status == "running"
    assert store.lease(run_id).owner == Owner.me()
    assert store.heartbeat(run_id, elsewhere) is False  # the old owner learns it lost the run


def test_the_owner_renews_its_lease_and_stops_when_another_took_it(store, monkeypatch):
    monkeypatch.setattr(rows, "HEARTBEAT_S", 0.05)
    monkeypatch.setattr(FakeExecutor, "delay_s", 0.2)
    run_id = store.create_run("taken", spec(iterations=5).to_json())
    beats = []

    async def main() -> None:
        work = asyncio.ensure_future(execute(store, run_id, spec(iterations=5), FakeExecutor))
        await asyncio.sleep(0.4)
        beats.append(store.lease(run_id).heartbeat_at)
        await asyncio.sleep(0.2)
        beats.append(store.lease(run_id).heartbeat_at)
        with store._write("take the run over") as db:  # as a process that judged us gone
            db.execute(
                "UPDATE runs SET owner_pid = 1, owner_host = 'elsewhere' WHERE id = ?", (run_id,)
            )
        await work

    with pytest.raises(RunOwnedError, match="taken over by process 1 on elsewhere"):
        asyncio.run(main())
    assert beats[1] > beats[0]
    assert 0 < len(store.results(run_id)) < 10  # it stopped, keeping what it had


def test_arena_run_resume_of_a_running_run_is_one_line_and_exit_2(
    store, other_process, capsys, tmp_path, monkeypatch
):
    # its own temporary folder: what killed processes left in the machine's /tmp would be swept
    # at start, with a line of its own on stderr
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    run_id = store.create_run("theirs", spec().to_json(), owner=Owner.of(other_process.pid))
    code = main(
        ["--db", str(store.path), "run", "--resume", run_id, "--skip-preflight", "--headless"]
    )
    err = capsys.readouterr().err
    assert code == 2
    assert (
        f"is being executed by process {other_process.pid}" in err
        and len(err.strip().splitlines()) == 1
    )
    assert store.get_run(run_id).status == "running"  # untouched


def test_runs_list_shows_a_dead_owners_run_as_stale(store, capsys):
    store.create_run("killed", spec().to_json(), owner=dead_owner())
    assert main(["--db", str(store.path), "runs", "list"]) == 0
    assert "stale" in capsys.readouterr().out


def test_a_killed_processes_folders_are_swept_and_no_others(tmp_path, monkeypatch):
    mine = owned_tempdir("arena-rl-", tmp_path)
    (mine / "candidate.py").write_text("def run(x): return x\n")
    killed = owned_tempdir("arena-cand-", tmp_path)
    gone = dead_owner()
    (killed / OWNER_FILE).write_text(
        f'{{"pid": {gone.pid}, "host": "{gone.host}", "token": "{gone.token}"}}'
    )
    (killed / "candidate.py").write_text("secret source\n")
    stranger = tmp_path / "arena-rl-notours"  # no owner file: never touched
    stranger.mkdir()
    elsewhere = owned_tempdir("arena-run-", tmp_path)
    (elsewhere / OWNER_FILE).write_text('{"pid": 1, "host": "another-host", "token": "x:1"}')
    removed = sweep(tmp_path)
    assert [s.folder for s in removed] == [killed] and removed[0].owner.pid == gone.pid
    assert mine.is_dir() and stranger.is_dir() and elsewhere.is_dir() and not killed.exists()


def test_a_folder_still_being_written_as_it_is_removed_is_removed_all_the_same(tmp_path):
    """A harness told to end may still write a log into the run's folder while it is removed:
    one pass of rmtree then leaves the folder (CI saw it under SIGTERM on a loaded machine)."""
    import threading
    import time

    from core.model.scratch import remove_tree

    folder = owned_tempdir("arena-run-", tmp_path)
    stop = time.monotonic() + 0.15

    def writer() -> None:
        i = 0
        while time.monotonic() < stop:
            try:
                (folder / f"log-{i}").write_text("x")
            except OSError:  # the folder went: make it again, as a late writer's makedirs would
                folder.mkdir(exist_ok=True)
            i += 1

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        assert remove_tree(folder)
    finally:
        thread.join()
    assert not folder.exists() or remove_tree(folder)


def test_a_killed_arena_run_leaves_a_stale_run_that_the_next_one_resumes(tmp_path):
    """kill -9 in the middle of `arena run`: the run shows stale, its folder is swept by the
    next start, and `--resume` finishes it with one result per job."""
    db = tmp_path / "arena.db"
    env = {
        **os.environ,
        "TMPDIR": str(tmp_path),
        "ARENA_FAKE_DELAY_S": "3",
        "PYTHONPATH": str(ROOT),
    }
    runfile = tmp_path / "run.yaml"
    runfile.write_text(
        "name: killed\ntasks: [elementwise/axpy]\ncandidates: [starter, baseline]\ndevices: [cpu]\ncpu_slots: 1\n"
    )
    argv = [
        sys.executable,
        "-m",
        "tests.fakes.executor",
        "--db",
        str(db),
        "--tasks-dir",
        str(FIXTURE_TASKS),
    ]
    proc = subprocess.Popen(
        [*argv, "--unsandboxed", "run", str(runfile), "--skip-preflight", "--headless"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while not list(tmp_path.glob("arena-run-*")) and time.monotonic() < deadline:
        time.sleep(0.1)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert list(tmp_path.glob("arena-run-*"))
    with Store.open(db) as s:
        [run] = s.list_runs()
        assert run.status == "stale" and run.lease.owner.pid == proc.pid
    env["ARENA_FAKE_DELAY_S"] = "0"
    done = subprocess.run(
        [*argv, "--unsandboxed", "run", "--resume", run.id, "--skip-preflight", "--headless"],
        check=False,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stderr  # the fake's candidates fail; nothing else does
    assert "removed 1 temporary folder" in done.stderr and not list(tmp_path.glob("arena-run-*"))
    with Store.open(db) as s:
        assert s.get_run(run.id).status == "finished"
        finished = [e for e in s.events(run.id) if e.type == "evaluation_finished"]
        assert len(finished) == len(s.results(run.id)) == len(s.jobs(run.id)) == 2


def test_without_proc_an_owner_is_judged_by_its_id_alone(monkeypatch):
    monkeypatch.setattr(owner_module, "_start_ticks", lambda pid: "")  # no /proc: the id alone
    assert Owner.of(os.getpid()).alive() is True
