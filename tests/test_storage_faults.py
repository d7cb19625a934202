"""Storage faults are reported as storage faults: a full disk or a read-only store during a run
ends it with one line and exit code 3 (infrastructure), keeps every result committed before
it, and leaves the run resumable; a read-only store is still read (`arena runs list`, `arena
leaderboard`) through SQLite's read-only mode.

Two ways to make the fault. Inside one process, SQLite itself is told to refuse (a page limit
gives SQLITE_FULL, `query_only` SQLITE_READONLY): the same errors a real disk gives, in
milliseconds. End to end, a real disk: a small tmpfs filled to the last byte, remounted
read-only. Mounting needs root (CI runs as root on a fresh machine); elsewhere those tests
skip, and under CI=true they fail instead."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from arena_tui.cli import main
from core.model import events
from core.orchestration.runfile import RunSpec
from core.orchestration.runs import execute
from core.store.db import Store
from core.store.errors import StorageFault, StoreError
from tests.fakes.executor import FakeExecutor

ROOT = Path(__file__).resolve().parents[1]
FIXTURE_TASKS = ROOT / "tests" / "fixtures" / "tasks"
RUN_FILE = "name: faults\ntasks: [elementwise/axpy]\ncandidates: [starter, baseline]\ndevices: [cpu]\niterations: 3\ncpu_slots: 1\n"
SPEC = RunSpec(
    name="faults",
    tasks=("elementwise/axpy",),
    candidates=("starter", "baseline"),
    devices=("cpu",),
    iterations=3,
    cpu_slots=1,
    tasks_dir=str(FIXTURE_TASKS),
)


def full_after(store: Store, results: int):  # type: ignore[no-untyped-def]
    """An on_event hook that makes the store's file full once `results` evaluations finished."""
    seen = [0]

    def hook(job_id, event) -> None:  # type: ignore[no-untyped-def]
        if isinstance(event, events.EvaluationFinished):
            seen[0] += 1
            if seen[0] == results:
                pages = store._db.execute("PRAGMA page_count").fetchone()[0]
                store._db.execute(f"PRAGMA max_page_count = {pages}")  # SQLITE_FULL from here on

    return hook


def test_a_full_store_stops_the_run_at_its_first_refused_write_and_it_resumes(tmp_path):
    with Store.open(tmp_path / "arena.db") as store:
        run_id = store.create_run(SPEC.name, SPEC.to_json())
        with pytest.raises(StorageFault) as caught:
            asyncio.run(execute(store, run_id, SPEC, FakeExecutor, on_event=full_after(store, 2)))
        message = str(caught.value)
        assert "the disk is full" in message and "is it an arena database" not in message
        assert "\n" not in message and str(store.path) in message
        kept = len(store.results(run_id))
        assert 1 <= kept < 6
        store._db.execute("PRAGMA max_page_count = 1073741823")  # space again
        store.resume_run(run_id)
        asyncio.run(execute(store, run_id, SPEC, FakeExecutor))
        finished = [e for e in store.events(run_id) if e.type == "evaluation_finished"]
        assert len(store.results(run_id)) == len(store.jobs(run_id)) == 6
        assert len({e.job_id for e in finished}) == 6  # each job evaluated to one result


def test_a_read_only_store_is_named_read_only_and_nothing_is_half_written(tmp_path):
    with Store.open(tmp_path / "arena.db") as store:
        run_id = store.create_run("ro")
        store._db.execute("PRAGMA query_only = 1")  # SQLITE_READONLY on every write
        with pytest.raises(
            StorageFault, match=r"the store is read-only .*make the file and its folder writable"
        ):
            store.add_job(run_id, task_id="elementwise/axpy", device_id="cpu")
        store._db.execute("PRAGMA query_only = 0")
        assert store.jobs(run_id) == []


def test_a_fault_listener_hears_each_storage_fault_once_and_no_other_error(tmp_path):
    heard: list[StorageFault] = []
    with Store.open(tmp_path / "arena.db") as store:
        remove = store.add_fault_listener(heard.append)
        with pytest.raises(StoreError):
            store.finish_run("r-nope")  # an unknown run: not the disk
        store._db.execute("PRAGMA query_only = 1")
        with pytest.raises(StorageFault):
            store.create_run("x")
        remove()
        with pytest.raises(StorageFault):
            store.create_run("y")
    assert len(heard) == 1


# --- a real disk ------------------------------------------------------------------------------


@contextlib.contextmanager
def small_disk(folder: Path, size: str = "4m") -> Iterator[Path]:
    """A tmpfs of `size` mounted at `folder` (root only)."""
    folder.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
        check=False,
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        if os.environ.get("CI") == "true":
            pytest.fail(f"cannot mount a tmpfs for the full-disk tests: {mounted.stderr.strip()}")
        pytest.skip(f"cannot mount a tmpfs here (root needed): {mounted.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def fill(disk: Path) -> Path:
    """Write a file until the disk has no byte left."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:
        for chunk in (65536, 4096, 1):
            with contextlib.suppress(OSError):
                while os.write(fd, b"\0" * chunk):
                    pass
    finally:
        os.close(fd)
    return filler


def arena(tmp_path: Path, db: Path, *args: str, delay_s: float) -> subprocess.Popen:
    env = {
        **os.environ,
        "TMPDIR": str(tmp_path),
        "ARENA_FAKE_DELAY_S": str(delay_s),
        "PYTHONPATH": str(ROOT),
    }
    return subprocess.Popen(
        [sys.executable, "-m", "tests.fakes.executor", "--db", str(db), "--tasks-dir",
         str(FIXTURE_TASKS), "--unsandboxed", *args],
        env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip


def count_results(db: Path) -> int:
    try:
        with Store.open(db, mode="ro") as s:
            return sum(len(s.results(r.id)) for r in s.list_runs())
    except StoreError:
        return 0


def test_a_disk_that_fills_mid_run_ends_it_in_one_line_with_exit_3_and_it_resumes(tmp_path):
    with small_disk(tmp_path / "disk") as disk:
        db = disk / "arena.db"
        (tmp_path / "run.yaml").write_text(RUN_FILE)
        proc = arena(
            tmp_path,
            db,
            "run",
            str(tmp_path / "run.yaml"),
            "--skip-preflight",
            "--headless",
            delay_s=1.0,
        )
        deadline = time.monotonic() + 60
        while count_results(db) < 2:
            assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
            time.sleep(0.05)
        filler = fill(disk)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 3, (out, err)
        errors = [line for line in (out + err).splitlines() if line.startswith("error:")]
        assert len(errors) == 1 and "Traceback" not in out + err, (out, err)
        assert (
            "the disk is full" in errors[0]
            and "results kept; once the store can be written, resume with: arena --db" in errors[0]
        )
        kept = count_results(db)
        assert 2 <= kept < 6 and f"{kept} of 6 results kept" in errors[0]
        with Store.open(db, mode="ro") as s:
            [run] = s.list_runs()
            assert run.status in ("stale", "interrupted")  # a full disk may refuse the mark too
        filler.unlink()
        resumed = arena(
            tmp_path, db, "run", "--resume", run.id, "--skip-preflight", "--headless", delay_s=0
        )
        out, err = resumed.communicate(timeout=60)
        assert resumed.returncode == 1, (out, err)  # the fake's candidates fail; the run finishes
        with Store.open(db) as s:
            assert s.get_run(run.id).status == "finished" and len(s.results(run.id)) == 6
            finished = [e for e in s.events(run.id) if e.type == "evaluation_finished"]
            assert len(finished) == 6


def test_a_store_on_a_read_only_file_system_is_read_and_a_run_is_refused_in_one_line(
    tmp_path, capsys, monkeypatch
):
    with small_disk(tmp_path / "disk") as disk:
        db = disk / "arena.db"
        with Store.open(db) as store:
            run_id = store.create_run(SPEC.name, SPEC.to_json())
            asyncio.run(execute(store, run_id, SPEC, FakeExecutor))
        subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)
        assert main(["--db", str(db), "runs", "list"]) == 0
        out = capsys.readouterr().out
        assert run_id in out and "finished" in out and "(read-only)" in out
        assert main(["--db", str(db), "runs", "show", run_id]) == 0
        assert main(["--db", str(db), "leaderboard", "--json"]) == 0
        capsys.readouterr()
        monkeypatch.setenv("ARENA_SANDBOX", "off")
        (tmp_path / "run.yaml").write_text(RUN_FILE)
        code = main(["--db", str(db), "--tasks-dir", str(FIXTURE_TASKS), "run", str(tmp_path / "run.yaml"),
                     "--skip-preflight", "--headless"])  # fmt: skip
        err = capsys.readouterr().err
        assert code == 3 and len(err.strip().splitlines()) == 1, err
        assert (
            "the store is read-only (its file system is)" in err
            and "is it an arena database" not in err
        )
