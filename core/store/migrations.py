"""The results store's schema: one SQL script per version, applied in order, each in its own
transaction (SQLite's `user_version` says which have run). Append a migration, never edit a
released one."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

from core.store.errors import StoreError

# One script per schema version, in order: MIGRATIONS[0] takes an empty file to version 1.
# Append, never edit a released one. States and kinds are checked in Python, not with SQL CHECK
# constraints, so that a later state (agent attempts, say) needs no table rebuild.
MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE runs (
        id          TEXT PRIMARY KEY,          -- r-YYYYMMDD-xxxx
        name        TEXT NOT NULL,
        created_at  TEXT NOT NULL,             -- ISO 8601, UTC
        finished_at TEXT,
        status      TEXT NOT NULL,             -- running | finished | interrupted | cancelled
        spec        TEXT NOT NULL              -- JSON: what was asked for, to resume it
    );
    CREATE TABLE jobs (
        id               INTEGER PRIMARY KEY,
        run_id           TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        key              TEXT NOT NULL,        -- unique in its run: a resumed run never redoes a job
        kind             TEXT NOT NULL,        -- evaluation (agent attempts later)
        task_id          TEXT NOT NULL,
        family           TEXT NOT NULL,
        candidate        TEXT,                 -- absolute path of the candidate file
        candidate_sha256 TEXT,
        device_id        TEXT NOT NULL,
        agent            TEXT,
        variant          TEXT,
        priority         INTEGER NOT NULL DEFAULT 0,
        state            TEXT NOT NULL,        -- queued | running | done | failed | cancelled
        attempts         INTEGER NOT NULL DEFAULT 0,
        created_at       TEXT NOT NULL,
        updated_at       TEXT NOT NULL,
        UNIQUE (run_id, key)
    );
    CREATE INDEX jobs_run_state ON jobs (run_id, state);
    CREATE INDEX jobs_task ON jobs (task_id, device_id);
    CREATE TABLE results (
        job_id           INTEGER PRIMARY KEY REFERENCES jobs(id) ON DELETE CASCADE,
        status           TEXT NOT NULL,        -- passed | failed | infrastructure_error
        failed_stage     TEXT,
        speedup          REAL NOT NULL,
        sol_fraction     REAL,
        points           REAL NOT NULL,
        timing_kind      TEXT NOT NULL,        -- measured | predicted | cpu
        candidate_sha256 TEXT NOT NULL,        -- what was scored (the file may have changed since the job was queued)
        device_id        TEXT NOT NULL,
        device_model     TEXT,
        device_vendor    TEXT,
        schema_version   INTEGER NOT NULL,     -- of the Result JSON
        result           TEXT NOT NULL,        -- JSON: Result.to_json()
        created_at       TEXT NOT NULL
    );
    CREATE INDEX results_board ON results (timing_kind, device_model, status);
    CREATE TABLE flags (
        id     INTEGER PRIMARY KEY,
        job_id INTEGER NOT NULL REFERENCES results(job_id) ON DELETE CASCADE,
        kind   TEXT NOT NULL,                  -- integrity (proven, fails the result) | review (heuristic, no effect)
        text   TEXT NOT NULL
    );
    CREATE INDEX flags_job ON flags (job_id);
    CREATE TABLE events (
        id         INTEGER PRIMARY KEY,
        run_id     TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        job_id     INTEGER REFERENCES jobs(id) ON DELETE CASCADE,
        seq        INTEGER NOT NULL,           -- 1, 2, ... in the run
        type       TEXT NOT NULL,
        event      TEXT NOT NULL,              -- JSON: one line of core/model/events.py's schema
        created_at TEXT NOT NULL,
        UNIQUE (run_id, seq)
    );
    CREATE INDEX events_job ON events (job_id, seq);
    """,
    # 2: agent attempts (run × agent × task × device × variant × iteration) and their transcripts.
    """
    CREATE TABLE attempts (
        id            TEXT PRIMARY KEY,        -- <run id>/<n>, n its place in the run's plan
        run_id        TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        key           TEXT NOT NULL,           -- agent|task|device|variant|iteration: a resumed run finds it
        agent         TEXT NOT NULL,
        agent_kind    TEXT NOT NULL,
        model         TEXT,
        task_id       TEXT NOT NULL,
        family        TEXT NOT NULL,
        device_id     TEXT NOT NULL,
        variant       TEXT NOT NULL,
        iteration     INTEGER NOT NULL DEFAULT 0,
        state         TEXT NOT NULL,           -- queued | running | evaluating | done | failed | cancelled
        stop_reason   TEXT,                    -- finished | budget | cost_cap | token_cap | crashed | cancelled
        exit_status   INTEGER,
        job_id        INTEGER REFERENCES jobs(id) ON DELETE SET NULL,  -- the final evaluation
        folder        TEXT,                    -- the attempt's folder (workspace, submissions, agent.log)
        submission    TEXT,                    -- the solution.py snapshot that is scored
        checks        INTEGER NOT NULL DEFAULT 0,
        input_tokens  INTEGER,
        output_tokens INTEGER,
        cost_usd      REAL,
        seconds       REAL,                    -- the agent's wall-clock time
        sandbox       TEXT,
        error         TEXT,
        started_at    TEXT,
        finished_at   TEXT,
        created_at    TEXT NOT NULL,
        updated_at    TEXT NOT NULL,
        UNIQUE (run_id, key)
    );
    CREATE INDEX attempts_run ON attempts (run_id, state);
    CREATE TABLE transcripts (
        attempt_id TEXT NOT NULL REFERENCES attempts(id) ON DELETE CASCADE,
        seq        INTEGER NOT NULL,
        kind       TEXT NOT NULL,
        event      TEXT NOT NULL,              -- JSON: a core/model/events.py TranscriptEvent
        created_at TEXT NOT NULL,
        PRIMARY KEY (attempt_id, seq)
    );
    """,
    # 3: the secret seed an evaluation drew its hidden workloads and inputs from, kept so that a
    # person can replay it (triage); a flag of kind `infrastructure` is a person's mark. Old rows: NULL.
    """
    ALTER TABLE jobs ADD COLUMN seed INTEGER;
    """,
    # 4: what an attempt's agent phase amounted to (core/model/outcome.py): scored | starter |
    # agent_error | no_submission, and why. An attempt recorded before: NULL (it was scored).
    """
    ALTER TABLE attempts ADD COLUMN outcome TEXT;
    ALTER TABLE attempts ADD COLUMN outcome_reason TEXT;
    """,
    # 5: the lease of the process that executes a run (core/store/leases.py): its id, host and
    # start token, and its last heartbeat. A `running` run whose owner is gone is shown `stale`
    # and resumes; one whose owner lives is never run by a second process. Old runs: NULL.
    """
    ALTER TABLE runs ADD COLUMN owner_pid INTEGER;
    ALTER TABLE runs ADD COLUMN owner_host TEXT;
    ALTER TABLE runs ADD COLUMN owner_token TEXT;
    ALTER TABLE runs ADD COLUMN heartbeat_at TEXT;
    """,
)

# The oldest schema a read-only store may have and still be read (it cannot be migrated): the
# lease columns of schema 5 are read where present.
READABLE_FROM = 4


def statements(script: str) -> Iterator[str]:
    """Split a migration script into statements (executescript would commit mid-transaction)."""
    buffer = ""
    for chunk in script.split(";"):
        buffer += chunk + ";"
        if sqlite3.complete_statement(buffer):
            if buffer.strip(" \n\t;"):
                yield buffer
            buffer = ""
    if buffer.strip(" \n\t;"):
        raise StoreError(f"migration script ends inside a statement: {buffer.strip()[:80]!r}")


def migrate(db: sqlite3.Connection, path: Path) -> None:
    """Bring the file up to len(MIGRATIONS), one transaction per migration."""
    migrations = MIGRATIONS  # read at call time, so a test can add one
    version = db.execute("PRAGMA user_version").fetchone()[0]
    if version > len(migrations):
        raise StoreError(
            f"{path}: this database was written by a newer arena (schema {version}); upgrade kernel-arena"
        )
    while version < len(migrations):
        db.execute("BEGIN IMMEDIATE")
        try:
            version = db.execute("PRAGMA user_version").fetchone()[
                0
            ]  # another process may have migrated meanwhile
            if version < len(migrations):
                for statement in statements(migrations[version]):
                    db.execute(statement)
                version += 1
                db.execute(f"PRAGMA user_version = {version}")
            db.execute("COMMIT")
        except sqlite3.Error as exc:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise StoreError(
                f"cannot migrate the results store {path} to schema {version + 1}: {exc}; nothing was changed by that step"
            ) from None
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
