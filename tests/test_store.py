"""The SQLite results store: runs, jobs, results, flags, events, migrations, and `arena runs`."""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path

import pytest

from arena_tui.cli import main
from core.model import events
from core.model import paths as store_module  # the store's default path
from core.model.result import Result, StageResult, WorkloadFigures
from core.store import migrations
from core.store.db import Store, StoreError
from core.store.errors import UnknownRunError
from core.store.migrations import MIGRATIONS

AXPY = ["eval", "--task", "elementwise/axpy", "--candidate"]


def make_result(
    task_id: str = "elementwise/axpy",
    status: str = "passed",
    *,
    speedup: float = 1.5,
    device: str = "cuda:0",
    integrity: tuple[str, ...] = (),
    review: tuple[str, ...] = (),
) -> Result:
    passed = status == "passed"
    failed_stage = (
        None if passed else ("compile" if status == "infrastructure_error" else "correctness")
    )
    stages = [
        StageResult(
            name, status="passed" if passed or name == "compile" else "skipped", seconds=0.1
        )
        for name in ("compile", "correctness", "generalization", "performance")
    ]
    if not passed:
        stages[0 if failed_stage == "compile" else 1].status = (
            "error" if status == "infrastructure_error" else "failed"
        )
    workloads = (
        [
            WorkloadFigures(
                label="N=64",
                axes={"N": 64},
                hidden=False,
                mode="event",
                candidate={"median_us": 10.0, "spread": 0.01},
                baseline={"median_us": 15.0, "spread": 0.01},
                speedup=speedup,
                roofline_us=5.0,
                sol_fraction=0.5,
            )
        ]
        if passed
        else []
    )
    return Result(
        task_id=task_id,
        candidate_sha256="ab" * 32,
        device={"id": device, "model": "NVIDIA H200", "vendor": "nvidia", "arch": "sm_90"},
        timing_kind="measured",
        status=status,
        failed_stage=failed_stage,
        stages=stages,
        workloads=workloads,
        speedup=speedup if passed else 0.0,
        sol_fraction=0.5 if passed else None,
        sol_source="measured" if passed else None,
        points=(120 + 100 * speedup) if passed else 20.0,
        integrity_flags=list(integrity),
        review_notes=list(review),
        versions={"arena": "test"},
        seconds=1.0,
    )


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "nested" / "arena.db"


@pytest.fixture
def store(db: Path):
    with Store.open(db) as s:
        yield s


def raw(db: Path) -> sqlite3.Connection:
    """A second, independent connection: what another process would see."""
    return sqlite3.connect(db)


# -- runs, jobs, results ---------------------------------------------------------------------


def test_a_run_its_jobs_and_results_round_trip(store):
    run_id = store.create_run(
        "nightly", {"tasks": ["elementwise/axpy", "norm/rmsnorm"], "devices": ["cuda:0"]}
    )
    assert run_id.startswith("r-") and len(run_id) == len("r-20261129-abcd")
    axpy = store.add_job(
        run_id,
        task_id="elementwise/axpy",
        device_id="cuda:0",
        candidate="/c/axpy.py",
        candidate_sha256="ab" * 32,
        priority=1,
    )
    norm = store.add_job(
        run_id,
        task_id="norm/rmsnorm",
        device_id="cuda:0",
        candidate="/c/norm.py",
        candidate_sha256="cd" * 32,
        agent="claude",
    )
    store.set_job_state(axpy, "running", attempts=1)
    result = make_result(review=("speedup above 10× on N=64: check by hand",))
    store.record_result(axpy, result)
    store.set_job_state(norm, "running", attempts=2)
    store.record_result(norm, make_result("norm/rmsnorm", "infrastructure_error"))

    run = store.get_run(run_id)
    assert (run.name, run.status, run.spec["devices"]) == ("nightly", "running", ["cuda:0"])
    assert run.job_states == {
        "done": 1,
        "failed": 1,
    }  # infrastructure error: the job failed, not the candidate
    assert run.result_statuses == {"passed": 1, "infrastructure_error": 1}

    jobs = store.jobs(run_id)
    assert [(j.id, j.task_id, j.family, j.state, j.attempts, j.agent) for j in jobs] == [
        (axpy, "elementwise/axpy", "elementwise", "done", 1, None),
        (norm, "norm/rmsnorm", "norm", "failed", 2, "claude"),
    ]
    assert store.jobs(run_id, state="failed") == [jobs[1]]

    rows = store.results(run_id)
    assert [r.job_id for r in rows] == [axpy, norm]
    row = rows[0]
    assert (row.status, row.failed_stage, row.speedup, row.sol_fraction, row.points) == (
        "passed",
        None,
        1.5,
        0.5,
        270.0,
    )
    assert (row.timing_kind, row.device_id, row.device_model, row.device_vendor) == (
        "measured",
        "cuda:0",
        "NVIDIA H200",
        "nvidia",
    )
    assert (
        row.review_notes == ("speedup above 10× on N=64: check by hand",)
        and row.integrity_flags == ()
    )
    assert row.result == result.to_json()
    assert row.to_result().to_json() == result.to_json()
    assert rows[1].failed_stage == "compile" and rows[1].sol_fraction is None

    store.finish_run(run_id, "finished")
    assert store.get_run(run_id).status == "finished" and store.get_run(run_id).finished_at
    assert [r.id for r in store.list_runs()] == [run_id]


def test_a_result_is_committed_before_record_result_returns(store, db):
    run_id = store.create_run("eval")
    job = store.add_job(run_id, task_id="elementwise/axpy", device_id="cuda:0")
    store.record_result(
        job, make_result(integrity=("faster_than_speed_of_light: N=64",), status="failed")
    )
    other = raw(db)
    assert other.execute("SELECT status FROM results WHERE job_id = ?", (job,)).fetchall() == [
        ("failed",)
    ]
    assert other.execute("SELECT kind, text FROM flags WHERE job_id = ?", (job,)).fetchall() == [
        ("integrity", "faster_than_speed_of_light: N=64")
    ]


def test_record_result_stores_all_of_it_or_nothing(store, db):
    run_id = store.create_run("eval")
    job = store.add_job(run_id, task_id="elementwise/axpy", device_id="cuda:0")
    store.set_job_state(job, "running", attempts=1)
    # The job's state is written last, after the result and its flags: make that last write fail.
    with raw(db) as conn:
        conn.execute(
            "CREATE TRIGGER boom BEFORE UPDATE ON jobs BEGIN SELECT RAISE(ABORT, 'disk on fire'); END"
        )
    with pytest.raises(StoreError, match=r"disk on fire.*nothing of it was stored"):
        store.record_result(
            job, make_result(integrity=("cached output",), review=("high speedup",))
        )
    other = raw(db)
    assert other.execute("SELECT count(*) FROM results").fetchone() == (0,)
    assert other.execute("SELECT count(*) FROM flags").fetchone() == (0,)
    assert store.get_job(job).state == "running" and store.results(run_id) == []
    with other:
        other.execute("DROP TRIGGER boom")
    store.record_result(job, make_result())  # the store is still usable, and the retry lands
    assert [r.status for r in store.results(run_id)] == ["passed"] and store.get_job(
        job
    ).state == "done"


def test_recording_a_job_again_replaces_its_result_and_flags(store):
    run_id = store.create_run("eval")
    job = store.add_job(run_id, task_id="elementwise/axpy", device_id="cuda:0")
    store.record_result(job, make_result(status="infrastructure_error", review=("retry me",)))
    store.record_result(job, make_result())
    (row,) = store.results(run_id)
    assert row.status == "passed" and row.review_notes == () and store.get_job(job).state == "done"


def test_add_job_is_idempotent_on_its_key(store):
    run_id = store.create_run("sweep")
    spec = dict(
        task_id="elementwise/axpy",
        device_id="cuda:0",
        candidate="/c/axpy.py",
        candidate_sha256="ab" * 32,
    )
    first = store.add_job(run_id, **spec)
    store.record_result(first, make_result())
    assert (
        store.add_job(run_id, **spec) == first
    )  # a resumed run finds the job, done, and does not redo it
    assert store.get_job(first).state == "done"
    assert (
        store.add_job(run_id, **{**spec, "candidate_sha256": "ef" * 32}) != first
    )  # another candidate is another job
    assert (
        store.add_job(run_id, **spec, key="repeat-2") != first
    )  # an explicit key repeats an evaluation
    assert store.add_job(run_id, **spec, key="repeat-2") == store.add_job(
        run_id, **spec, key="repeat-2"
    )
    assert len(store.jobs(run_id)) == 3
    other_run = store.create_run("sweep")
    assert store.add_job(other_run, **spec) != first  # keys are unique within a run


def test_the_candidate_file_is_hashed_when_no_sha256_is_given(store, candidates):
    import hashlib

    path = candidates / "axpy_torch.py"
    job = store.get_job(
        store.add_job(
            store.create_run("eval"), task_id="elementwise/axpy", device_id="cpu", candidate=path
        )
    )
    assert job.candidate == str(path.resolve())
    assert job.candidate_sha256 == hashlib.sha256(path.read_bytes()).hexdigest()


def test_pending_jobs_after_an_interrupted_run(db):
    with Store.open(db) as store:
        run_id = store.create_run("sweep")
        ids = {
            name: store.add_job(
                run_id, task_id=f"elementwise/{name}", device_id="cuda:0", priority=prio
            )
            for name, prio in (
                ("done", 0),
                ("was_running", 0),
                ("queued", 0),
                ("urgent", 5),
                ("cancelled", 0),
            )
        }
        store.record_result(ids["done"], make_result())
        store.set_job_state(ids["was_running"], "running", attempts=1)
        store.set_job_state(ids["cancelled"], "cancelled")
        store.finish_run(run_id, "interrupted")
    with Store.open(db) as store:  # a later process resumes it
        assert store.get_run(run_id).status == "interrupted"
        pending = store.pending_jobs(run_id)
        assert [j.id for j in pending] == [ids["urgent"], ids["was_running"], ids["queued"]]
        assert [j.state for j in pending] == ["queued", "running", "queued"]
        assert (
            store.resume_run(run_id).status == "running"
            and store.get_run(run_id).finished_at is None
        )


def test_bad_states_and_unknown_jobs_are_refused(store):
    run_id = store.create_run("eval")
    job = store.add_job(run_id, task_id="elementwise/axpy", device_id="cpu")
    with pytest.raises(StoreError, match="job state `retrying` is not one of queued, running"):
        store.set_job_state(job, "retrying")
    with pytest.raises(StoreError, match="unknown job 999"):
        store.set_job_state(999, "done")
    with pytest.raises(StoreError, match="unknown job 999"):
        store.record_result(999, make_result())
    with pytest.raises(StoreError, match="finishes as one of finished, interrupted, cancelled"):
        store.finish_run(run_id, "running")
    with pytest.raises(StoreError, match="not JSON-ready"):
        store.create_run("bad", {"path": Path("/x")})


def test_a_run_is_found_by_id_prefix_or_ending(store):
    a = store.create_run("one")
    b = store.create_run("two")
    while b[:-1] == a[:-1]:  # make sure the two differ before their last character
        b = store.create_run("two")
    assert store.get_run(a).id == a
    common = next(i for i in range(len(a)) if a[i] != b[i])
    assert store.get_run(a[: common + 1]).id == a
    assert store.get_run(a[2 : common + 1]).id == a  # `r-` may be left out
    assert store.get_run(a[-4:]).id == a  # the random part alone
    with pytest.raises(StoreError, match="ambiguous"):
        store.get_run(a[:common])
    with pytest.raises(UnknownRunError, match=r"^unknown run `r-nope`: see `arena runs list`$"):
        store.get_run("r-nope")


# -- events ----------------------------------------------------------------------------------


def test_events_are_kept_in_order_per_run(store):
    run_id = store.create_run("eval")
    job = store.add_job(run_id, task_id="elementwise/axpy", device_id="cpu")
    assert store.append_event(run_id, job, events.StageStarted(stage="compile")) == 1
    assert (
        store.append_event(
            run_id, job, events.StageFinished(stage="compile", status="passed", seconds=0.1)
        )
        == 2
    )
    assert (
        store.append_event(
            run_id,
            None,
            {"v": 1, "type": "device_health_changed", "device": "cpu", "healthy": False},
        )
        == 3
    )
    rows = store.events(run_id)
    assert [(r.seq, r.type, r.job_id) for r in rows] == [
        (1, "stage_started", job),
        (2, "stage_finished", job),
        (3, "device_health_changed", None),
    ]
    assert events.parse(rows[1].event) == events.StageFinished(
        stage="compile", status="passed", seconds=0.1
    )
    assert [r.seq for r in store.events(run_id, job_id=job)] == [1, 2]
    with pytest.raises(UnknownRunError):
        store.append_event("r-nope", None, {"type": "x"})


def test_threads_may_share_one_store(store):
    run_id = store.create_run("threads")

    def work(n: int) -> None:
        for i in range(10):
            job = store.add_job(
                run_id, task_id="elementwise/axpy", device_id=f"cuda:{n}", key=f"{n}-{i}"
            )
            store.append_event(
                run_id, job, {"type": "job_state_changed", "job_id": str(job), "state": "running"}
            )
            store.record_result(job, make_result(device=f"cuda:{n}"))

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(store.results(run_id)) == 80
    assert [r.seq for r in store.events(run_id)] == list(range(1, 81))


# -- the file: location, pragmas, migrations -------------------------------------------------


def test_wal_mode_foreign_keys_and_a_busy_timeout(store, db):
    assert db.parent.is_dir()  # parent folders are made
    assert raw(db).execute("PRAGMA journal_mode").fetchone() == (
        "wal",
    )  # WAL is a property of the file
    conn = store._db
    assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    assert conn.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
    assert conn.execute("PRAGMA busy_timeout").fetchone()[0] >= 1000


def test_the_default_location(monkeypatch, tmp_path):
    monkeypatch.setenv("ARENA_DB", str(tmp_path / "env.db"))
    assert store_module.default_path() == tmp_path / "env.db"
    monkeypatch.delenv("ARENA_DB")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert store_module.default_path() == tmp_path / "xdg" / "kernel-arena" / "arena.db"
    monkeypatch.delenv("XDG_DATA_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert (
        store_module.default_path()
        == tmp_path / "home" / ".local" / "share" / "kernel-arena" / "arena.db"
    )
    with Store.open() as s:
        assert (
            s.path.is_file()
            and s.path.parent == tmp_path / "home" / ".local" / "share" / "kernel-arena"
        )


def test_a_migration_takes_a_version_1_store_forward(db, monkeypatch):
    with Store.open(db) as s:
        run_id = s.create_run("old")
        s.record_result(
            s.add_job(run_id, task_id="elementwise/axpy", device_id="cpu"), make_result()
        )
        assert s.schema_version == len(MIGRATIONS)
    monkeypatch.setattr(
        migrations,
        "MIGRATIONS",
        MIGRATIONS
        + (
            "ALTER TABLE runs ADD COLUMN owner TEXT; UPDATE runs SET owner = 'legacy'; CREATE INDEX runs_owner ON runs (owner);",
        ),
    )
    with Store.open(db) as s:
        assert s.schema_version == len(MIGRATIONS) + 1
        assert [r.status for r in s.results(run_id)] == ["passed"]  # the data came along
    assert raw(db).execute("SELECT owner FROM runs").fetchall() == [("legacy",)]


def test_a_failing_migration_changes_nothing(db, monkeypatch):
    Store.open(db).close()
    monkeypatch.setattr(
        migrations,
        "MIGRATIONS",
        MIGRATIONS + ("ALTER TABLE runs ADD COLUMN owner TEXT; SELECT no_such_function();",),
    )
    with pytest.raises(
        StoreError, match=f"cannot migrate .* to schema {len(MIGRATIONS) + 1}: no such function"
    ):
        Store.open(db)
    conn = raw(db)
    assert conn.execute("PRAGMA user_version").fetchone() == (len(MIGRATIONS),)
    assert "owner" not in [row[1] for row in conn.execute("PRAGMA table_info(runs)")]


def test_a_store_from_a_newer_arena_is_refused(db):
    Store.open(db).close()
    with raw(db) as conn:
        conn.execute(f"PRAGMA user_version = {len(MIGRATIONS) + 1}")
    with pytest.raises(
        StoreError,
        match=rf"this database was written by a newer arena \(schema {len(MIGRATIONS) + 1}\); upgrade kernel-arena",
    ):
        Store.open(db)


def test_files_that_are_not_a_store_are_refused_with_the_way_out(tmp_path):
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreError, match=r"junk\.db.*--db PATH or set ARENA_DB"):
        Store.open(junk)
    with pytest.raises(StoreError, match="is a folder"):
        Store.open(tmp_path)
    (tmp_path / "file").write_text("")
    with pytest.raises(StoreError, match="cannot create the folder"):
        Store.open(tmp_path / "file" / "arena.db")


# -- export ----------------------------------------------------------------------------------


def fill(store: Store) -> tuple[str, list[int]]:
    run_id = store.create_run("sweep", {"tasks": ["elementwise/axpy"]})
    jobs = [
        store.add_job(run_id, task_id="elementwise/axpy", device_id=f"cuda:{n}") for n in range(3)
    ]
    store.record_result(jobs[0], make_result(device="cuda:0", speedup=2.0))
    store.record_result(
        jobs[1],
        make_result(
            status="failed", device="cuda:1", integrity=("returned the reference's output",)
        ),
    )
    return run_id, jobs


def test_export_is_a_header_then_every_job_with_its_result(store):
    run_id, jobs = fill(store)
    lines = [json.dumps(record) for record in store.export_run(run_id)]
    records = [json.loads(line) for line in lines]
    header, *rest = records
    assert (
        header["type"] == "run"
        and header["id"] == run_id
        and header["spec"] == {"tasks": ["elementwise/axpy"]}
    )
    assert [r["id"] for r in rest] == jobs and all(r["type"] == "job" for r in rest)
    assert rest[0]["result"]["speedup"] == 2.0
    assert rest[1]["result"]["integrity_flags"] == ["returned the reference's output"]
    assert rest[2]["result"] is None and rest[2]["state"] == "queued"
    assert {r["id"]: r["result"] for r in rest if r["result"]} == {
        r.job_id: r.result for r in store.results(run_id)
    }


# -- the command line ------------------------------------------------------------------------


def cli(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_arena_runs_list_show_and_export(capsys, monkeypatch, db, tmp_path):
    monkeypatch.setenv("COLUMNS", "160")
    code, out, _ = cli(capsys, "--db", str(db), "runs", "list")
    assert code == 0 and "no runs yet" in out
    with Store.open(db) as store:
        run_id, _ = fill(store)
    code, out, _ = cli(capsys, "--db", str(db), "runs", "list")
    assert (
        code == 0
        and run_id in out
        and "1 done, 1 failed" not in out
        and "1 passed, 1 failed" in out
        and "1 queued" in out
    )

    code, out, _ = cli(capsys, "--db", str(db), "runs", "show", run_id[-4:])
    assert code == 0 and run_id in out and "sweep" in out
    lines = out.splitlines()
    header = next(line for line in lines if "task" in line and "speedup" in line)
    for col in ("candidate", "device", "state", "status", "SOL", "points"):
        assert col in header
    rows = [line.split() for line in lines if line.startswith("elementwise/axpy")]
    assert (
        rows[0][:5] == ["elementwise/axpy", "–", "cuda:0", "done", "passed"]
        and "2.00×" in rows[0]
        and "50.0%" in rows[0]
    )
    assert rows[1][:7] == [
        "elementwise/axpy",
        "–",
        "cuda:1",
        "done",
        "failed",
        "(correctness)",
        "!",
    ]  # the stage it failed at
    assert rows[2][:4] == ["elementwise/axpy", "–", "cuda:2", "queued"]
    assert "integrity: elementwise/axpy on cuda:1: returned the reference's output" in out

    code, out, _ = cli(capsys, "--db", str(db), "runs", "export", run_id)
    assert code == 0
    records = [json.loads(line) for line in out.splitlines()]
    assert records == json.loads(json.dumps(list(Store.open(db).export_run(run_id))))
    target = tmp_path / "out" / "run.jsonl"
    code, out, err = cli(capsys, "--db", str(db), "runs", "export", run_id, "-o", str(target))
    assert code == 0 and out == "" and "wrote 4 lines" in err
    assert [json.loads(line) for line in target.read_text().splitlines()] == records


@pytest.mark.parametrize("command", [["show", "r-nope"], ["export", "r-nope"]])
def test_an_unknown_run_is_one_line_and_exit_code_2(capsys, db, command):
    code, out, err = cli(capsys, "--db", str(db), "runs", *command)
    assert code == 2 and out == ""
    assert err.strip() == "unknown run `r-nope`: see `arena runs list`"


def test_arena_eval_records_its_result_in_the_store(capsys, fixture_tasks, candidates, db):
    code, out, err = cli(
        capsys,
        "--tasks-dir",
        str(fixture_tasks),
        "--db",
        str(db),
        *AXPY,
        str(candidates / "axpy_torch.py"),
        "--json",
    )
    assert code == 0
    printed = json.loads(out)  # stdout is still exactly one JSON object
    assert out.count("\n") == 1
    (run,) = Store.open(db).list_runs()
    assert err.strip().splitlines()[-1] == f"recorded in run {run.id}"
    assert (run.name, run.status, run.job_states, run.result_statuses) == (
        "eval",
        "finished",
        {"done": 1},
        {"passed": 1},
    )
    (row,) = Store.open(db).results(run.id)
    assert row.result == printed and row.device_id == "cpu" and row.timing_kind == "cpu"


def test_arena_eval_no_store_records_nothing(capsys, fixture_tasks, candidates, db, _private_store):
    code, out, _ = cli(
        capsys,
        "--tasks-dir",
        str(fixture_tasks),
        "--db",
        str(db),
        *AXPY,
        str(candidates / "axpy_torch.py"),
        "--no-store",
    )
    assert code == 0 and "PASSED" in out and "recorded" not in out
    assert not db.exists() and not _private_store.exists()


def test_arena_eval_still_prints_its_result_when_the_store_cannot_be_opened(
    capsys, monkeypatch, fixture_tasks, candidates, tmp_path
):
    import core.evaluation.evaluator

    class CannedEvaluator:  # the evaluation itself is covered elsewhere; here only the store matters
        def __init__(self, device: str, workdir=None, **_options):
            self.info = None

        def __enter__(self):
            return self

        def __exit__(self, *exc: object) -> None:
            pass

        def evaluate(
            self, task, candidate, seed=None, on_event=None, world_size=None, profile=None
        ):
            return make_result(status="failed", device="cpu")

    monkeypatch.setattr(core.evaluation.evaluator, "Evaluator", CannedEvaluator)
    (tmp_path / "a-file").write_text("")
    code, out, err = cli(
        capsys,
        "--tasks-dir",
        str(fixture_tasks),
        "--db",
        str(tmp_path / "a-file" / "arena.db"),
        *AXPY,
        str(candidates / "axpy_torch.py"),
        "--json",
    )
    assert code == 1  # the candidate's verdict, unchanged by the store
    assert json.loads(out)["status"] == "failed"
    assert len(err.strip().splitlines()) == 1 and err.startswith(
        "not recorded: cannot create the folder"
    )
