"""The leaderboard: agents (and their models) ranked per task family and device, one board per
timing kind, from the results store.

An entry is (agent, model) on one family and one device model (or vendor: `by="vendor"`). The
agent is the job's agent; the model is its attempt's model where an attempt produced the
result, else None. A plain candidate evaluation (`arena eval`, a run file's candidates) has no
agent: it is entered under its candidate file's name (`solution.py`).

Per entry, over its results (every result counts: iterations, runs and tasks are pooled):

- speedup: the geometric mean of the effective speedup a user would get — the candidate's where
  it passed, 1.0 where it failed (the baseline stays in use), as in core/store/compare.py. A failed
  attempt is not infinitely slow, and an entry that never passes scores 1.0;
- fast_p: the share of results that are correct and faster than p × the baseline (p = 1.0 by
  default); a failure or an integrity violation counts speedup 0, so it is never fast;
- SOL: the median fraction of speed of light over correct results (None where none has one);
- gap closed: the mean share of the gap between the baseline's time and the speed of light that
  the results closed (0 at the baseline's speed, 1 at the limit; a failure counts 0, the
  baseline staying), a figure a weak baseline cannot inflate; None where no correct result has
  a speed of light;
- correct: the share of results that passed without an integrity violation;
- violations: the results with a proven integrity violation (`integrity_flags`). They fail, and
  an entry with any violation ranks below every entry without one, whatever its numbers;
- infrastructure errors are not the candidate's outcome: they are left out and only counted;
  so is a result a person marked an infrastructure fault (`Store.mark_infrastructure`);
- failures: attempts whose agent produced nothing to score (`agent_error`: it never started,
  crashed before acting, or its endpoint failed; `no_submission`: it left solution.py unchanged).
  They have no result, so they are never entered as the agent's result and never count as
  correct: they are counted per entry in a column of their own. An entry with failures only
  has no figures (results 0) and ranks below every entry with results;
- starters: results of an agent that submitted the unchanged starter on purpose are counted
  (`starters`) so that every view can say so.

The failure rule, the same in every view (docs/leaderboard.md): a failed result (a stage failed,
or an integrity violation) counts 1.00× in every aggregate — the user keeps the baseline — and
is never correct or fast; a single failed result shows its speedup as `–`, never 0.00×.

Results measured against different baselines never share a group: a result's
`baseline_impl` (which of task.yaml's `baselines:` ran, e.g. `liger` or `torch`) joins the
device in the group's key, so the device column reads `NVIDIA H200 · vs liger` where a
baseline is recorded (older results without one group as before).

Rows are ranked within each (family, device) group by speedup, ties by correctness (equal
numbers share a rank). A failed result never ranks above a correct one: an entry with no correct
result (every result failed, or only attempts with nothing to score) has no rank and is listed
after the ranked entries of its group, with its failure counts. A failed result has no baseline
of its own (none ran for it): it joins the group of the results of its task (else of its family)
on the same device, so a group whose baseline never ran is never made of failures alone beside
the real one. Timing kinds never mix: `board()` takes one kind, `boards()` gives one board per
kind present. `cpu` boards (Triton in its interpreter) are for information: no rank, no fast_p,
and rows in name order.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from core.devices.ids import timing_kind_of
from core.evaluation import scoring
from core.model.outcome import FAILURES
from core.store.db import Store
from core.store.standings import (
    DEFAULT_P,
    GROUP_BY,
    RANKED_KINDS,
    TIMING_KINDS,
    Board,
    Entry,
    Failure,
    LeaderboardError,
    Scored,
)


def scored(store: Store, run: str | None = None) -> list[Scored]:
    """Every result in the store (or in one run: an id, prefix or ending as `Store.get_run`
    takes it; an unknown one raises `UnknownRunError`), with its agent and model."""
    runs = [store.get_run(run)] if run is not None else store.list_runs()
    rows: list[Scored] = []
    for r in runs:
        jobs = {j.id: j for j in store.jobs(r.id)}
        attempts = {a.job_id: a for a in store.attempts(r.id) if a.job_id is not None}
        models = {job_id: a.model for job_id, a in attempts.items()}
        for res in store.results(r.id):
            job = jobs[res.job_id]
            agent = job.agent or (
                Path(job.candidate).name
                if job.candidate
                else f"candidate {res.candidate_sha256[:8]}"
            )
            rows.append(
                Scored(
                    run_id=r.id,
                    job_id=job.id,
                    task_id=job.task_id,
                    family=job.family,
                    agent=agent,
                    model=models.get(job.id),
                    device_id=res.device_id,
                    device_model=res.device_model,
                    device_vendor=res.device_vendor,
                    timing_kind=res.timing_kind,
                    status="infrastructure_error" if res.infrastructure_marks else res.status,
                    speedup=res.speedup,
                    sol_fraction=res.sol_fraction,
                    integrity_flags=res.integrity_flags,
                    starter=job.id in attempts and attempts[job.id].outcome == "starter",
                    baseline_impl=res.result.get("baseline_impl"),
                    speedup_interval=_interval(
                        scoring.noise_interval(res.timing_kind, res.result.get("speedup_interval"))
                    ),
                )
            )
    return rows


def _interval(value: Any) -> tuple[float, float] | None:
    """A stored result's `speedup_interval`, where it is a pair of positive numbers."""
    if (
        isinstance(value, (list, tuple))
        and len(value) == 2
        and all(isinstance(x, (int, float)) and x > 0 for x in value)
    ):
        return float(value[0]), float(value[1])
    return None


def failures(store: Store, run: str | None = None) -> list[Failure]:
    """Every attempt of the store (or of one run) that ended with nothing to score. Its device
    model is the one results on the same device id recorded (this run's first), else the id."""
    runs = [store.get_run(run)] if run is not None else store.list_runs()
    found: list[Failure] = []
    known: dict[str, tuple[str | None, str | None]] = {}
    for r in store.list_runs() if run is not None else runs:
        for res in store.results(r.id):
            known.setdefault(res.device_id, (res.device_model, res.device_vendor))
    for r in runs:
        mine = {res.device_id: (res.device_model, res.device_vendor) for res in store.results(r.id)}
        for a in store.attempts(r.id):
            if a.state != "done" or a.outcome not in FAILURES:
                continue
            model, vendor = mine.get(a.device_id) or known.get(a.device_id) or (None, None)
            found.append(
                Failure(
                    r.id,
                    a.id,
                    a.task_id,
                    a.family,
                    a.agent,
                    a.model,
                    a.device_id,
                    model,
                    vendor,
                    timing_kind_of(a.device_id).value,
                    a.outcome,
                    a.outcome_reason,
                )
            )
    return found


def board(
    store: Store,
    *,
    timing_kind: str,
    device: str | None = None,
    vendor: str | None = None,
    family: str | None = None,
    run: str | None = None,
    p: float = DEFAULT_P,
    by: str = "model",
) -> Board:
    """The board of one timing kind (measured | predicted | cpu), optionally filtered."""
    _check(timing_kind, p, by)
    return _boards(store, (timing_kind,), device, vendor, family, run, p, by)[timing_kind]


def boards(
    store: Store,
    *,
    device: str | None = None,
    vendor: str | None = None,
    family: str | None = None,
    run: str | None = None,
    p: float = DEFAULT_P,
    by: str = "model",
) -> dict[str, Board]:
    """One board per timing kind present among the matching results, measured first; {} if none."""
    _check(TIMING_KINDS[0], p, by)
    return _boards(store, None, device, vendor, family, run, p, by)


def _boards(
    store: Store,
    kinds: tuple[str, ...] | None,
    device: str | None,
    vendor: str | None,
    family: str | None,
    run: str | None,
    p: float,
    by: str,
) -> dict[str, Board]:
    """The boards of `kinds` (None: every kind present among the matching results, in order)."""
    rows, failed = scored(store, run), failures(store, run)
    if kinds is None:
        found = {r.timing_kind for r in (*rows, *failed) if _matches(r, device, vendor, family)}
        kinds = tuple(kind for kind in TIMING_KINDS if kind in found)
    return {
        kind: build(
            rows,
            timing_kind=kind,
            device=device,
            vendor=vendor,
            family=family,
            run=run,
            p=p,
            by=by,
            failed=failed,
        )
        for kind in kinds
    }


def device_place(item: Scored | Failure, by: str = "model") -> str:
    """The device part of a group's key: the vendor (by="vendor") or the device model (its id where unknown)."""
    return (
        (item.device_vendor or "unknown")
        if by == "vendor"
        else (item.device_model or item.device_id)
    )


def group_place(item: Scored | Failure, by: str = "model", impl: str | None = None) -> str:
    """A group's device column: the device, then the baseline the speedups are against
    (`NVIDIA H200 · vs liger`) where one is recorded; `impl` defaults to the row's own."""
    impl = impl if impl is not None else getattr(item, "baseline_impl", None)
    place = device_place(item, by)
    return (
        f"{place} · vs {impl}" if impl else place
    )  # speedups against different baselines are different numbers


def build(
    rows: Iterable[Scored],
    *,
    timing_kind: str,
    device: str | None = None,
    vendor: str | None = None,
    family: str | None = None,
    run: str | None = None,
    p: float = DEFAULT_P,
    by: str = "model",
    failed: Iterable[Failure] = (),
) -> Board:
    """The board from rows already read (`scored`, `failures`): filter, group, aggregate, rank. Pure."""
    _check(timing_kind, p, by)
    mine = [r for r in rows if r.timing_kind == timing_kind and _matches(r, device, vendor, family)]
    kept = [r for r in mine if r.status != "infrastructure_error"]
    lost = [
        f for f in failed if f.timing_kind == timing_kind and _matches(f, device, vendor, family)
    ]
    groups: dict[
        tuple[str, str], dict[tuple[str, str | None], tuple[list[Scored], list[Failure]]]
    ] = {}
    place_of = placer(kept, by)
    for item in (*kept, *lost):
        place = place_of(item)
        member = groups.setdefault((item.family, place), {}).setdefault(
            (item.agent, item.model), ([], [])
        )
        member[1 if isinstance(item, Failure) else 0].append(item)  # type: ignore[arg-type]
    ranked = timing_kind in RANKED_KINDS
    entries: list[Entry] = []
    for (fam, place), members in sorted(groups.items()):
        group = [
            _entry(agent, model, fam, place, results, fails, p, ranked)
            for (agent, model), (results, fails) in members.items()
        ]
        entries.extend(
            _rank(group) if ranked else sorted(group, key=lambda e: (e.agent, e.model or ""))
        )
    filters = {"device": device, "vendor": vendor, "family": family, "run": run}
    return Board(timing_kind, p, by, tuple(entries), len(mine) - len(kept), filters, len(lost))


def placer(kept: Iterable[Scored], by: str = "model") -> Callable[[Scored | Failure], str]:
    """The group place (`group_place`) of each row of a board built from `kept` (its results,
    infrastructure errors left out): the device, and the baseline a row's speedup is against.
    A result records its own. A failed result without one (its baseline never ran: it failed
    before the performance stage) and an attempt with nothing to score take the one their task's
    results on that device ran against, else the one of their family's results there when it is
    a single one. So a failure joins the group it failed in, never a group of its own."""
    by_task: dict[tuple[str, str], str] = {}
    by_family: dict[tuple[str, str], set[str]] = {}
    for r in kept:
        if r.baseline_impl:
            place = device_place(r, by)
            by_task.setdefault((r.task_id, place), r.baseline_impl)
            by_family.setdefault((r.family, place), set()).add(r.baseline_impl)

    def impl_of(item: Scored | Failure) -> str | None:
        if isinstance(item, Scored) and (item.baseline_impl or item.correct):
            return item.baseline_impl  # a correct result without one: an old result, as it was
        place = device_place(item, by)
        family = by_family.get((item.family, place), set())
        return by_task.get((item.task_id, place)) or (min(family) if len(family) == 1 else None)

    return lambda item: group_place(item, by, impl_of(item))


def _entry(
    agent: str,
    model: str | None,
    family: str,
    device: str,
    results: list[Scored],
    fails: list[Failure],
    p: float,
    ranked: bool,
) -> Entry:
    """One entry's figures over its results; its failures are only counted. With no result
    at all the figures are what the failure rule gives: speedup 1.0, nothing correct."""
    sols = [r.sol_fraction for r in results if r.correct and r.sol_fraction is not None]
    gaps = [r.gap_closed for r in results]
    known = [g for g in gaps if g is not None]
    vendors = sorted({x.device_vendor for x in (*results, *fails) if x.device_vendor})
    ends = [r.effective_interval for r in results]
    return Entry(
        rank=None,
        agent=agent,
        model=model,
        family=family,
        device=device,
        vendor=vendors[0] if len(vendors) == 1 else None,
        speedup=math.exp(statistics.fmean(math.log(r.effective_speedup) for r in results))
        if results
        else 1.0,
        fast_p=(
            scoring.fast_p(((r.correct, r.speedup if r.correct else 0.0) for r in results), p)
            if results
            else 0.0
        )
        if ranked
        else None,
        sol_fraction=statistics.median(sols) if sols else None,
        correct=sum(r.correct for r in results) / len(results) if results else 0.0,
        results=len(results),
        violations=sum(r.violation for r in results),
        failed=sum(not r.correct for r in results),
        tasks=len({r.task_id for r in results}),
        failures=len(fails),
        agent_errors=sum(f.outcome == "agent_error" for f in fails),
        no_submissions=sum(f.outcome == "no_submission" for f in fails),
        starters=sum(r.starter for r in results),
        speedup_low=scoring.geomean(e[0] for e in ends) if ends else None,
        speedup_high=scoring.geomean(e[1] for e in ends) if ends else None,
        gap_closed=statistics.fmean(known)
        if any(r.correct and g is not None for r, g in zip(results, gaps))
        else None,
    )


def _tied(a: Entry, b: Entry) -> bool:
    """Two ranked entries whose speedups' intervals overlap: their difference is inside the
    timer's noise, so they share a rank (docs/leaderboard.md)."""
    if None in (a.speedup_low, a.speedup_high, b.speedup_low, b.speedup_high):
        return False
    return a.speedup_low <= b.speedup_high and b.speedup_low <= a.speedup_high  # type: ignore[operator]


def _rank(group: list[Entry]) -> list[Entry]:
    """Entries with a correct result are ranked: honest ones first, then by speedup, then by
    correctness; equal numbers share a rank (1, 1, 3), and so do neighbours whose speedups'
    intervals overlap (a difference inside the timer's noise is a tie). Entries with no correct result (every
    result failed, or attempts with nothing to score only) are not ranked: a failed result never
    ranks above a correct one, even where the failure rule's 1.00× beats a slow correct kernel.
    They follow, those with results first."""

    def merit(e: Entry) -> tuple[bool, float, float]:
        return (
            e.violations > 0,
            -round(e.speedup, 9),
            -e.correct,
        )  # rounded: 4 and 1 tie with 2 and 2

    ordered = sorted(
        (e for e in group if e.correct > 0),
        key=lambda e: (*merit(e), -e.results, e.agent, e.model or ""),
    )
    out: list[Entry] = []
    for i, e in enumerate(ordered):
        prev = ordered[i - 1] if i else None
        same = prev is not None and (
            merit(prev) == merit(e)
            or (
                (prev.violations > 0) == (e.violations > 0)
                and prev.correct == e.correct
                and _tied(prev, e)
            )
        )
        rank = out[-1].rank if same else i + 1
        out.append(Entry(**{**asdict(e), "rank": rank}))
    apart = sorted(
        (e for e in group if e.correct == 0),
        key=lambda e: (e.results == 0, e.violations > 0, -e.results, e.agent, e.model or ""),
    )
    return out + apart


def _matches(
    r: Scored | Failure, device: str | None, vendor: str | None, family: str | None
) -> bool:
    if family is not None and r.family != family:
        return False
    if vendor is not None and (r.device_vendor or "").casefold() != vendor.casefold():
        return False
    if device is not None and device != r.device_id:
        # A device model by name, case aside; its words are enough: `h200` finds "NVIDIA H200", not "GH200".
        words, model = device.casefold().split(), (r.device_model or "").casefold().split()
        if not words or not all(w in model for w in words):
            return False
    return True


def _check(timing_kind: str, p: float, by: str) -> None:
    if timing_kind not in TIMING_KINDS:
        raise LeaderboardError(
            f"timing kind `{timing_kind}` is not one of {', '.join(TIMING_KINDS)}: boards never mix kinds, pick one"
        )
    if not (isinstance(p, (int, float)) and math.isfinite(p) and p > 0):
        raise LeaderboardError(
            f"p must be a positive number (fast_p counts results faster than p × the baseline), got {p!r}"
        )
    if by not in GROUP_BY:
        raise LeaderboardError(f"group devices by one of {', '.join(GROUP_BY)}, not `{by}`")
