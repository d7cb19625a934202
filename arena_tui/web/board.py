"""What the leaderboard page shows, as JSON: every board (core/store/leaderboard.py), each entry with
the results behind it, its per-task figures and its history over runs; and one result's public
view (stage verdicts, per-workload times, fractions of speed of light, the candidate's source).

The page filters on the client: an entry is one (agent, model) on one family and one device
(or vendor), and ranks are taken within (family, device), so choosing a family, a device or a
vendor keeps exactly the entries core.store.leaderboard would build with that filter. That is what
lets a static snapshot (`arena leaderboard --html`) filter with no server behind it.

Hidden workloads are never named (core.rl.arena.public_result): the board is meant to be public."""

from __future__ import annotations

import hashlib
import math
import statistics
from collections.abc import Iterable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from core.store import leaderboard
from core.store.db import Store, StoreError
from core.store.standings import TIMING_KINDS, Scored

MAX_SOURCE = 512 << 10  # a candidate is at most 1 MiB; the page shows the first half MiB


def _geomean(rows: Iterable[Scored]) -> float:
    logs = [math.log(r.effective_speedup) for r in rows]
    return math.exp(statistics.fmean(logs)) if logs else 1.0


def _median_sol(rows: Iterable[Scored]) -> float | None:
    sols = [r.sol_fraction for r in rows if r.correct and r.sol_fraction is not None]
    return statistics.median(sols) if sols else None


def boards_json(
    store: Store, p: float = leaderboard.DEFAULT_P, by: str = "model"
) -> dict[str, Any]:
    """Every board, unfiltered, with per-entry details and the filters' choices."""
    leaderboard.build(
        [], timing_kind=TIMING_KINDS[0], p=p, by=by
    )  # raises LeaderboardError on a bad p or by, even with no result
    rows = leaderboard.scored(store)
    stamps = {r["job_id"]: r["created_at"] for r in store.recorded_since(None)}
    runs = {r.id: r for r in store.list_runs()}
    out: dict[str, Any] = {}
    families, devices, vendors = set(), set(), set()
    for kind in TIMING_KINDS:
        mine = [r for r in rows if r.timing_kind == kind]
        if not mine:
            continue
        b = leaderboard.build(mine, timing_kind=kind, p=p, by=by)
        kept = [r for r in mine if r.status != "infrastructure_error"]
        place = leaderboard.placer(kept, by)  # the board's own grouping, baseline included
        members: dict[tuple[str, str, str, str | None], list[Scored]] = {}
        for r in kept:
            members.setdefault((r.family, place(r), r.agent, r.model), []).append(r)
        entries = []
        for e in b.entries:
            results = members.get((e.family, e.device, e.agent, e.model), [])
            families.add(e.family)
            devices.add(e.device)
            if e.vendor:
                vendors.add(e.vendor)
            entries.append(
                {
                    **asdict(e),
                    "id": "|".join([kind, e.family, e.device, e.agent, e.model or ""]),
                    "result_list": sorted(
                        (
                            {
                                "job_id": r.job_id,
                                "run_id": r.run_id,
                                "task_id": r.task_id,
                                "status": r.status,
                                "speedup": r.speedup,
                                "sol_fraction": r.sol_fraction,
                                "violation": r.violation,
                                "created_at": stamps.get(r.job_id),
                            }
                            for r in results
                        ),
                        key=lambda x: x["created_at"] or "",
                        reverse=True,
                    ),
                    "per_task": [
                        {
                            "task_id": t,
                            "speedup": _geomean(rs),
                            "sol_fraction": _median_sol(rs),
                            "results": len(rs),
                        }
                        for t, rs in sorted(_by(results, lambda r: r.task_id).items())
                    ],
                    "history": [
                        {
                            "run_id": run,
                            "name": runs[run].name if run in runs else run,
                            "created_at": runs[run].created_at if run in runs else None,
                            "speedup": _geomean(rs),
                            "correct": sum(r.correct for r in rs) / len(rs),
                            "results": len(rs),
                        }
                        for run, rs in sorted(
                            _by(results, lambda r: r.run_id).items(),
                            key=lambda kv: runs[kv[0]].created_at if kv[0] in runs else "",
                        )
                    ],
                }
            )
        out[kind] = {**b.to_json(), "entries": entries}
    return {
        "p": p,
        "by": by,
        "boards": out,
        "choices": {
            "family": sorted(families),
            "device": sorted(devices),
            "vendor": sorted(vendors),
        },
    }


def _by(rows: list[Scored], key: Any) -> dict[Any, list[Scored]]:
    out: dict[Any, list[Scored]] = {}
    for r in rows:
        out.setdefault(key(r), []).append(r)
    return out


def result_json(store: Store, job_id: int, tasks_dir: Path | None = None) -> dict[str, Any] | None:
    """One result's public view with its job, flags and (where the store kept the file it
    scored) the candidate's source; None if the job has no result."""
    try:
        job = store.get_job(job_id)
    except StoreError:
        return None
    row = next((r for r in store.results(job.run_id) if r.job_id == job_id), None)
    return None if row is None else _detail(store, job, row, tasks_dir, {})


def _detail(
    store: Store, job: Any, row: Any, tasks_dir: Path | None, tasks: dict[str, Any]
) -> dict[str, Any]:
    from core.rl.arena import public_result
    from core.tasks.discovery import find_task

    if job.task_id not in tasks:
        try:
            tasks[job.task_id] = find_task(job.task_id, tasks_dir)
        except Exception:  # noqa: BLE001 - a task removed since: its shapes cannot be scrubbed, labels still are
            tasks[job.task_id] = None
    public = public_result(row.to_result(), tasks[job.task_id])
    for stage in public["stages"]:
        stage.pop(
            "log", None
        )  # a harness log is long and may quote inputs; the verdict and message stay
    return {
        "job_id": job.id,
        "run_id": job.run_id,
        "task_id": job.task_id,
        "family": job.family,
        "agent": job.agent,
        "variant": job.variant,
        "created_at": row.created_at,
        "integrity_flags": list(row.integrity_flags),
        "review_notes": list(row.review_notes),
        "infrastructure_marks": list(row.infrastructure_marks),
        "result": public,
        "source": _source(store, job, row.candidate_sha256),
    }


def _source(store: Store, job: Any, sha256: str) -> str | None:
    """The candidate's text, from the file the job (or its attempt's snapshot) points at, only
    when that file still holds exactly what was scored."""
    paths = [job.candidate] + [
        a.submission for a in store.attempts(job.run_id) if a.job_id == job.id
    ]
    for path in filter(None, paths):
        try:
            data = Path(path).read_bytes()
        except OSError:
            continue
        if hashlib.sha256(data).hexdigest() == sha256:
            return data[:MAX_SOURCE].decode("utf-8", "replace")
    return None


def results_json(store: Store, tasks_dir: Path | None = None) -> dict[str, Any]:
    """Every result's public view by job id (what a static snapshot embeds): one read per run."""
    out: dict[str, Any] = {}
    tasks: dict[str, Any] = {}
    for run in store.list_runs():
        jobs = {j.id: j for j in store.jobs(run.id)}
        for row in store.results(run.id):
            out[str(row.job_id)] = _detail(store, jobs[row.job_id], row, tasks_dir, tasks)
    return out
