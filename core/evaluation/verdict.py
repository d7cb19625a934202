"""Folding the harness's events into a verdict: the wall-clock cross-check of the candidate's
timer, which baseline ran, the predicted collectives of a multi-rank task on a sim: device,
`assemble` (events to a `Result`) and the result of an evaluation the infrastructure failed."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

from core import __version__
from core.devices.device import DeviceInfo
from core.devices.sim import predict_collective
from core.evaluation import scoring
from core.evaluation.job import GRAPH_BELOW_US, WARMUP_CALLS, bandwidth_figures, roofline_for
from core.model import events
from core.model.result import STAGES, Result, StageResult, WorkloadFigures, unevaluated
from core.model.task import Task
from core.model.workload import Workload

OnEvent = Callable[[events.Event], None]


# The parent's wall clock against the candidate's own timer (docs/integrity.md):
WALL_SLACK = 1.01, 0.002  # reported > wall × 1.01 + 2 ms in a round: impossible, a forged timer
UNTIMED_FACTOR = 10.0  # untimed time per call above 10× the baseline's ...
UNTIMED_MIN_US = 50.0  # ... and, beyond the baseline's, above the call's median and 50 µs: a note
HIGH_SPEEDUP = 10.0  # a workload faster than 10× the baseline: a note


def wall_clock_findings(
    label: str, mode: str | None, candidate: dict[str, Any], baseline: dict[str, Any]
) -> tuple[list[str], list[str]]:
    """The parent's wall clock against the candidate's timer: (integrity flags, review notes).

    Proven: in some round the candidate's worker reported more time than the parent saw pass
    around the whole request. Device events and the host clock disagree by parts per million,
    not by a percent: only a forged timer does that.

    Heuristic: the time per timed call that the parent saw and the timer did not (the round's
    wall clock less the reported times and the warm-up calls, counted at the median; the median
    over rounds). The baseline's rounds spend theirs on the same requests, input refills and
    L2 flushes; a candidate whose untimed time per call is above 10× the baseline's, and above
    it by more than the call's own median and 50 µs, is doing work outside the timed region:
    another stream, a thread, a slowed clock. An honest candidate with a slow host path can do
    that too (Python launch overhead, a rebuild between rounds), so it is a review note."""
    flags, notes = [], []
    cand_rounds, base_rounds = candidate.get("rounds") or [], baseline.get("rounds") or []
    for r, rnd in enumerate(cand_rounds):
        if rnd["reported_s"] > rnd["wall_s"] * WALL_SLACK[0] + WALL_SLACK[1]:
            flags.append(
                f"timer_exceeds_wall_clock: {label} round {r + 1}: the candidate's timer reported {rnd['reported_s'] * 1e3:.2f} ms "
                f"of calls in a round the parent clocked at {rnd['wall_s'] * 1e3:.2f} ms"
            )
    warm = WARMUP_CALLS.get(mode or "", 1)
    m_c, m_b = (candidate.get("median_us") or 0.0) / 1e6, (baseline.get("median_us") or 0.0) / 1e6

    def untimed_per_call(rounds: list[dict[str, Any]], median_s: float) -> float | None:
        per_round = [
            (x["wall_s"] - x["reported_s"] - warm * median_s) / x["calls"] * 1e6
            for x in rounds
            if x["calls"]
        ]
        return statistics.median(per_round) if per_round else None

    u_c, u_b = untimed_per_call(cand_rounds, m_c), untimed_per_call(base_rounds, m_b)
    if (
        u_c is not None
        and u_b is not None
        and u_c - u_b > max(m_c * 1e6, UNTIMED_MIN_US)
        and u_c > UNTIMED_FACTOR * max(u_b, 1.0)
    ):
        notes.append(
            f"untimed_work: {label}: {u_c:.1f} µs per call passed outside the candidate's timed region (the baseline's: {u_b:.1f} µs), "
            f"more than the {m_c * 1e6:.1f} µs its timer measured per call: work on another stream or thread, or a slowed clock?"
        )
    return flags, notes


def assemble(
    task: Task,
    job: dict[str, Any],
    info: DeviceInfo,
    sha: str,
    seen: list[events.Event],
    scan_notes: list[str] | None = None,
) -> Result:
    """Fold the harness's events into a Result, scored. `scan_notes` are the static scan's
    review notes for the candidate (computed before it ran)."""
    stages = {name: StageResult(name) for name in STAGES}
    timed: list[WorkloadFigures] = []
    started = next((e for e in seen if isinstance(e, events.EvaluationStarted)), None)
    finished = next((e for e in seen if isinstance(e, events.EvaluationFinished)), None)
    perf = {w["label"]: w for w in job["stages"]["performance"]}
    peaks = info.sol_peaks
    integrity: list[str] = []
    notes: list[str] = list(scan_notes or [])
    impls: list[
        str | None
    ] = []  # what each timed workload's baseline reported (baseline.py's IMPL)
    for e in seen:
        if isinstance(e, events.StageStarted):
            stages[e.stage].status = "running"
        elif isinstance(e, events.StageFinished):
            s = stages[e.stage]
            s.status, s.seconds, s.message, s.log = e.status, e.seconds, e.message, e.log
            if e.stage in ("correctness", "generalization"):  # e.g. inputs on the old path
                s.note = e.note
        elif isinstance(e, events.Finding):
            (integrity if e.proven else notes).append(f"{e.check}: {e.message}")
        elif isinstance(e, events.WorkloadChecked):
            stages[e.stage].workloads.append(
                {
                    "label": e.workload,
                    "axes": e.axes,
                    "passed": e.passed,
                    "message": e.message,
                    "worst": e.worst,
                }
            )
        elif isinstance(e, events.WorkloadTimed):
            w = perf[e.workload]
            workload = Workload(e.axes)
            cand, base = e.candidate.get("median_us", 0.0), e.baseline.get("median_us", 0.0)
            ranked = info.timing_kind in (
                "measured",
                "predicted",
            )  # cpu times get no speed-of-light fraction
            roof = roofline_for(task, workload, info) if peaks and ranked else None
            launch_floor = (
                scoring.launch_floor_us(peaks, _graph_timed(e.mode, roof))
                if roof is not None
                else None
            )
            sol_us = scoring.reachable_us(roof, launch_floor)
            impls.append(e.baseline.get("impl"))
            spec_roof = roofline_for(task, workload, info, info.spec) if info.spec else None
            floor = None if spec_roof is None else scoring.IMPOSSIBILITY_MARGIN * spec_roof
            if (
                info.timing_kind in ("measured", "predicted")
                and floor is not None
                and (0 < cand or info.timing_kind == "predicted")
                and cand < floor
            ):
                # predicted too: a count that missed work (a kernel that did less when counted) predicts the impossible
                verb = "was predicted at" if info.timing_kind == "predicted" else "took"
                integrity.append(
                    f"faster_than_speed_of_light: {e.workload} {verb} {cand:.2f} µs, below the floor of {floor:.2f} µs (90% of the spec roofline)"
                )
            flags, wall_notes = wall_clock_findings(e.workload, e.mode, e.candidate, e.baseline)
            integrity += flags
            # The heuristics read timings; CPU timings are informational and too noisy for them
            # (bf16 matmul on a CPU varies tenfold between identical calls).
            if info.timing_kind != "cpu":
                notes += wall_notes
            ratio = scoring.workload_speedup(info.timing_kind, e.candidate, e.baseline)
            if info.timing_kind != "cpu" and ratio > HIGH_SPEEDUP:
                notes.append(
                    f"high_speedup: {e.workload} ran {ratio:.1f}× faster than the baseline: check it by hand"
                )
            band = _speedup_band(e) if e.mode == "predicted" else None
            interval = (
                scoring.band_interval(ratio, band)
                if e.mode == "predicted"
                else scoring.workload_interval(
                    e.candidate, e.baseline, (peaks.timer_offset_us or 0.0) if peaks else 0.0
                )
                if info.timing_kind == "measured"
                else None
            )
            timed.append(
                WorkloadFigures(
                    label=e.workload,
                    axes=e.axes,
                    hidden=bool(w.get("hidden")),
                    mode=e.mode,
                    candidate=e.candidate,
                    baseline=e.baseline,
                    speedup=ratio,
                    roofline_us=roof,
                    sol_fraction=scoring.sol_fraction(sol_us, cand),
                    model=w.get("model"),
                    notes=e.notes
                    + ([w["baseline_note"]] if w.get("baseline_note") else [])
                    + _implementations_note(e),
                    band=band,
                    interval=list(interval) if interval else None,
                    bandwidth=bandwidth_figures(
                        task, workload, cand, base, peaks if ranked else None
                    ),
                    launch_floor_us=launch_floor,
                    sol_us=sol_us,
                    roofline_fraction=scoring.sol_fraction(roof, cand),
                )
            )
    for s in stages.values():
        if s.status == "running":  # the harness stopped mid-stage
            s.status = "error"
    if job.get("predicted_collectives") and stages["performance"].status == "passed":
        timed += predicted_collectives(task, job, info)
        stages["performance"].message = (
            "predicted by the alpha-beta model (docs/simulation.md): the fastest algorithm's time at each size and world size, "
            "the same for every correct implementation"
        )
    elif not job["stages"]["performance"] and stages["performance"].status == "passed":
        stages["performance"].status = "skipped"  # asked for no timing: nothing was timed
    if not job["stages"]["generalization"] and stages["generalization"].status == "passed":
        stages[
            "generalization"
        ].status = "skipped"  # visible only: no hidden workload was in the job
    failed_stage = next(
        (s.name for s in stages.values() if s.status not in ("passed", "skipped")), None
    )
    infra = finished is None or finished.fault == "infrastructure"
    if integrity:
        status = "failed"
        failed_stage = failed_stage or "performance"
    elif failed_stage is None and finished is not None and finished.status == "passed":
        status = "passed"
    else:
        status = "infrastructure_error" if infra else "failed"
    correct = status == "passed"
    task_speedup = scoring.geomean(w.speedup for w in timed) if correct else 0.0
    sols = [w.sol_fraction for w in timed]
    sol = scoring.geomean(sols) if correct and sols and all(x is not None for x in sols) else None  # type: ignore[misc]
    roofs = [w.roofline_fraction for w in timed]
    roof_fraction = (
        scoring.geomean(roofs) if correct and roofs and all(x is not None for x in roofs) else None
    )  # type: ignore[misc]
    impl, impl_kind = baseline_ran(task, impls)
    compiled = stages["compile"].status == "passed"
    interval = (  # the timer's noise: none for a prediction (scoring.py, "the interval")
        scoring.task_interval([tuple(w.interval) if w.interval else None for w in timed])  # type: ignore[misc]
        if correct and timed and info.timing_kind == "measured"
        else None
    )
    return Result(
        task_id=task.id,
        candidate_sha256=sha,
        device={"id": info.id, "model": info.model, "vendor": info.vendor, "arch": info.arch},
        timing_kind=info.timing_kind,
        status=status,
        failed_stage=failed_stage,
        stages=list(stages.values()),
        workloads=timed,
        speedup=task_speedup,
        sol_fraction=sol,
        sol_source=peaks.source if peaks and sol is not None else None,
        points=scoring.points(compiled, correct, task_speedup),
        integrity_flags=integrity,
        review_notes=notes,
        versions={"arena": __version__, **(started.versions if started else info.versions)},
        seconds=finished.seconds if finished else None,
        world_size=job.get("world_size"),
        baseline_impl=impl,
        baseline_kind=impl_kind,
        roofline_fraction=roof_fraction,
        profile=job.get("profile"),
        speedup_interval=list(interval) if interval else None,
        autotune=finished.autotune if finished else None,
    )


def _graph_timed(mode: str | None, roofline: float | None) -> bool:
    """Whether a workload's time is a graph replay's (its launch floor is then the graph
    floor): measured in `graph` mode, or predicted for a size a GPU would time in graphs."""
    if mode == "predicted":
        return roofline is not None and roofline < GRAPH_BELOW_US
    return mode == "graph"


def baseline_ran(task: Task, reported: list[str | None]) -> tuple[str | None, str | None]:
    """(baseline_impl, its kind) of a result: what the baseline's process reported for its
    timed workloads (a task with one declared implementation needs no report), several
    joined by "+" in task.yaml's order of preference."""
    names = {task.baseline_impl(r).impl if task.baseline_impl(r) else r for r in reported}
    names.discard(None)
    if not names:
        return None, None
    order = [b.impl for b in task.baselines]
    ran = sorted(names, key=lambda n: (order.index(n) if n in order else len(order), n))  # type: ignore[arg-type]
    kinds = {b.kind for b in task.baselines if b.impl in ran}
    return "+".join(ran), (kinds.pop() if len(kinds) == 1 else None)  # type: ignore[arg-type]


def _implementations_note(e: events.WorkloadTimed) -> list[str]:
    """Where a predicted candidate says it ran another implementation than the baseline it is
    divided by (a task's baseline.py on a sim: device runs its torch composition where the GPU
    runs a vendor CUDA library that cannot run on a CPU), the note that says which was
    predicted against which."""
    ran, against = e.candidate.get("impl"), e.baseline.get("impl")
    if e.mode != "predicted" or not isinstance(ran, str) or not against or ran == against:
        return []
    return [
        f"implementations: the candidate ran `{ran}` here (predicted), the baseline it is divided by is `{against}`"
        f" ({e.baseline.get('source') or 'predicted'}): the two are not the same code"
    ]


def _speedup_band(e: events.WorkloadTimed) -> float | None:
    """The ± band of a predicted speedup: the two sides' bands compounded (their errors are
    taken as independent, so it is wider than either)."""
    bands = [side.get("band") for side in (e.candidate, e.baseline)]
    if not all(isinstance(b, (int, float)) for b in bands):
        return None
    return (1 + bands[0]) * (1 + bands[1]) - 1  # type: ignore[operator]


def predicted_collectives(
    task: Task, job: dict[str, Any], info: DeviceInfo
) -> list[WorkloadFigures]:
    """A collective's figures on a sim: device: the alpha-beta model's time for the candidate
    and the baseline alike (it knows the message, the world and the link, not the code), so
    the speedup is 1 and the figures say what the target's link allows."""
    assert task.collective is not None
    peaks = info.sol_peaks
    figures = []
    for w in job["predicted_collectives"]:
        workload = Workload(w["axes"])
        world = int(workload.axes["W"])
        p = predict_collective(task.collective.kind, task.collective_bytes(workload), world, peaks)
        side = {
            "median_us": p.time_us,
            "band": p.band,
            "low_us": p.low_us,
            "high_us": p.high_us,
            "algorithm": p.algorithm,
        }
        roof = roofline_for(task, workload, info) if peaks else None
        figures.append(
            WorkloadFigures(
                label=w["label"],
                axes=w["axes"],
                hidden=bool(w.get("hidden")),
                mode="predicted",
                candidate=side,
                baseline=dict(side),
                speedup=1.0,
                roofline_us=roof,
                sol_fraction=scoring.sol_fraction(roof, p.time_us),
                model=w.get("model"),
                notes=[
                    f"alpha-beta model, {p.algorithm} ({p.calibration}): the same for every correct implementation"
                ],
                band=p.band,
                bandwidth=bandwidth_figures(task, workload, p.time_us, p.time_us, peaks),
            )
        )
    return figures


def infrastructure_result(
    task: Task, info: DeviceInfo, sha: str, message: str, profile: str | None = None
) -> Result:
    device = {"id": info.id, "model": info.model, "vendor": info.vendor, "arch": info.arch}
    return unevaluated(
        task.id,
        device,
        info.timing_kind,
        sha,
        message,
        status="infrastructure_error",
        profile=profile,
        versions=info.versions,
    )
