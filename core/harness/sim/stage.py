"""The performance stage of a `sim:` device, run by the harness parent: predict, don't time.

For each GPU-sized performance workload the candidate's worker counts what the candidate does
(sim_predict.predict_candidate) and the trusted worker counts the baseline
(sim_predict.predict_baseline); this process turns both into predicted microseconds with the
model and the constants the engine put in the job (sim_model), and reports them as
`workload_timed` events whose mode is `predicted` and whose figures carry a ± band. What the
candidate's worker sends is checked before it is believed, as everywhere in the runner.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from core.harness.sim import count as sim_count  # noqa: F401 - where callers find NUMERIC
from core.harness.sim import hybrid as sim_hybrid
from core.harness.sim import judge as sim_judge
from core.harness.sim import narrow as sim_narrow
from core.harness.sim import written as sim_written
from core.harness.sim.checked import (  # noqa: F401 - re-exported: where callers find them
    FAKE_PASS_SLACK,
    MAX_LAUNCHES,
    PER_PROGRAM_KEYS,
    RESOURCE_KEYS,
    MalformedCounts,
    checked_launches,
    checked_ops,
    fake_pass_problem,
    refused_launch,
    uncounted_launch,
)
from core.harness.sim.model import Constants, Target, predict_side

if TYPE_CHECKING:
    from core.harness.runner import Evaluation


def check_values(
    ev: Evaluation, w: dict[str, Any], reply: dict[str, Any], seed: int, deadline: float
) -> str:
    """The counted call against the reference (sim_values, sim_reference): wrong values are
    `sim_wrong_output`, an in-place output written for less than `MIN_WRITTEN` of the elements
    the reference changes is `sim_unwritten_output`. Returns the workload's note on it. The
    values of a pure PyTorch call above the real run's budget come from its run at a scaled
    workload, and are judged against the reference there (sim_scaled_run)."""
    from core.harness.runner import StageFailed, _workload

    values = reply.get("values")
    if not isinstance(values, dict):
        values = {"outputs": None, "reason": "no values"}
    given = values.get("outputs")
    known = isinstance(given, list) and any(isinstance(o, dict) and o.get("index") for o in given)
    if not known and not any(o.get("inplace_of") for o in ev.job["outputs"]):
        # Nothing to compare and nothing updated in place: the reference is not computed.
        reason = values.get("reason") or "no known elements"
        return f"value check skipped: {str(reason)[:200]}"
    where = _workload(w)
    scaled = values.get("workload")
    if isinstance(scaled, dict) and isinstance(w.get("scaled"), dict):
        where = {"axes": w["scaled"]["axes"], "shapes": w["scaled"]["shapes"]}
    got = ev._trusted_call(
        {"op": "sim_values", "workload": where, "seed": seed, "values": values}, deadline
    )
    label = w["label"]
    if got.get("malformed"):
        raise StageFailed(
            "failed", f"{label}: the candidate's worker sent malformed values: {got['malformed']}"
        )
    if got.get("wrong"):
        raise StageFailed("failed", f"{label}: {str(got['wrong'])[:800]}")
    unwritten = sim_written.inplace_problem(
        got.get("changed_bytes"),
        values.get("written_bytes"),
        [o["name"] for o in ev.job["outputs"]],
        values.get("written_bytes_high"),
    )
    if unwritten:
        raise StageFailed("failed", f"{label}: {unwritten}")
    if got.get("skipped"):
        return f"value check skipped: {str(got['skipped'])[:200]}"
    at = (
        f" (at the scaled workload {w['scaled'].get('label')})"
        if where is not _workload(w) and isinstance(w.get("scaled"), dict)
        else ""
    )
    return f"value check: {int(got.get('checked') or 0)} elements of the counted call match the reference{at}"


def known_baseline(known: dict[str, Any], target: Target) -> dict[str, Any]:
    """The baseline side of a workload whose baseline time the engine looked up (measured on the
    target, or the task's model fitted on its measurements): its band is the model's error, 0
    for a measurement, so a speedup's band is the candidate's."""
    t, band = float(known["median_us"]), max(0.0, float(known.get("band") or 0.0))
    return {
        "median_us": t,
        "low_us": t / (1 + band),
        "high_us": t * (1 + band),
        "band": band,
        "timing": "measured" if known.get("source") == "measured" else "predicted",
        "source": known.get("source"),
        "bound": None,
        "kernels": [],
        "launches": 0,
        "impl": known.get("impl"),
    }


def baseline_note(known: dict[str, Any], target: Target) -> str:
    """Where the baseline's time comes from: the measured time on the target of the
    implementation the target would run (`impl`, e.g. liger), or its model."""
    gpu, impl = target.key.upper(), str(known.get("impl") or "torch")[:40]
    if known.get("source") == "measured":
        return f"baseline: the measured {gpu} time of `{impl}` (core/data/sim_baselines.json, median of {known.get('runs', 1)} runs)"
    return (
        f"baseline: `{impl}`, the task's model fitted on {known.get('points')} {gpu} measurements of it "
        f"(±{100 * float(known.get('band') or 0):.0f}%), this shape was not measured"
    )


def predict_performance(ev: Evaluation, deadline: float) -> dict[str, Any]:
    """Count every performance workload (on two candidate workers where the evaluation has two
    cores: counting is the slow part), predict both sides, and report the workloads in order."""
    from core.harness.runner import StageFailed, _workload, cannot_evaluate

    sim = ev.job["sim"]
    target, constants = Target.from_json(sim["target"]), Constants.from_json(sim["constants"])
    workloads = ev.job["stages"]["performance"]
    seeds = [
        int(w["seed"]) for w in workloads
    ]  # drawn per evaluation by the engine (sim_reference)
    # A task with its own check.py compares no values of the counted call (sim_reference):
    # its count runs no exact programs (sim_count), which would cost time for nothing.
    exact = sim_hybrid.values_compared(ev.job.get("task_sources"))
    requests = [
        (
            {
                "op": "predict",
                "workload": _workload(w),
                "seed": seed,
                "exact": exact,
                # what a count of sampled launches that falls short is confirmed against (a recount)
                **({"formula": w["formula"]} if isinstance(w.get("formula"), dict) else {}),
                **({"scaled": w["scaled"]} if w.get("scaled") else {}),
            },
            0,
        )
        for w, seed in zip(workloads, seeds)
    ]
    counted: dict[int, dict[str, Any]] = {}
    reported = 0
    for index, reply, _ in ev._fan_out(requests, deadline):
        w = workloads[index]
        if not reply.get("ok"):
            cannot_evaluate(reply)
            raise StageFailed(
                "failed",
                f"{w['label']}: the candidate failed while its work was counted: {reply.get('error')}\n{reply.get('traceback', '')}".strip(),
            )
        counted[index] = reply
        while (
            reported in counted
        ):  # events in the workloads' order, whichever worker finished first
            _report(
                ev,
                workloads[reported],
                counted.pop(reported),
                target,
                constants,
                deadline,
                seeds[reported],
            )
            reported += 1
    return {"workloads": len(workloads), "note": f"predicted for {sim['label']}, not measured"}


def count_problems(
    reply: dict[str, Any],
    launches: list[tuple[dict[str, Any], dict[str, Any] | None]],
    cand_ops: list[dict[str, Any]],
    job: dict[str, Any],
    formula: Any,
    target: Target,
    constants: Constants,
    judged: bool,
    graph: bool = False,
) -> tuple[str | None, dict[str, Any], list[str]]:
    """(the first failure of a candidate's counts, its predicted side, notes on its values):
    every check sim_judge, sim_written, sim_narrow and the fake pass make before the reference
    is asked. `judged`: the task's values are compared (no check.py of its own); `graph`: the
    GPU would replay the workload in a CUDA graph (its launch costs). Pure, so that
    bench/sim_value_sweep.py applies what a `sim:` evaluation applies."""
    outputs = job["outputs"]
    found = (
        sim_judge.stray_problem(reply)
        or sim_judge.unknown_op_problem(reply)
        or sim_judge.differs_problem(reply)
        or sim_judge.slow_problem(reply)
        or sim_written.problem(
            reply.get("written"), [o["name"] for o in outputs], reply.get("written_high")
        )
        or fake_pass_problem(reply, launches, cand_ops)
        or sim_judge.formula_problem(formula, launches, cand_ops)
        or sim_narrow.problem(
            [s for s, _ in launches],
            cand_ops,
            [str(x.get("dtype")) for x in job["inputs"] + outputs if x.get("dtype")],
        )
    )
    candidate = predict_side(launches, cand_ops, target, constants, graph)
    if found or not judged:
        return found, candidate, []
    unchecked, notes = sim_judge.unchecked_problem(
        reply.get("values"), outputs, launches, candidate["median_us"], target, constants
    )
    return unchecked, candidate, notes


def drawn_share(ev: Evaluation, w: dict[str, Any], seed: int, deadline: float) -> float | None:
    """The share of the task's byte formula the workload's drawn inputs need (the task's
    reference.py `bytes_share`, run by the trusted worker on the inputs the count was given), or
    None where the task does not say. Asked only of a count that falls short of the formula."""
    from core.harness.runner import _workload

    got = ev._trusted_call({"op": "sim_share", "workload": _workload(w), "seed": seed}, deadline)
    share = got.get("share")
    if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 <= share <= 1:
        return None
    return float(share)


def _report(
    ev: Evaluation,
    w: dict[str, Any],
    reply: dict[str, Any],
    target: Target,
    constants: Constants,
    deadline: float,
    seed: int,
) -> None:
    """One workload's predictions, from the candidate's counts and the baseline's."""
    from core.harness.runner import StageFailed, _workload

    try:
        launches = checked_launches(reply)
        cand_ops = checked_ops(reply.get("torch_ops", []), "candidate")
    except MalformedCounts as exc:
        raise StageFailed(
            "failed", f"{w['label']}: the candidate's worker sent malformed counts: {exc}"
        ) from None
    refused = refused_launch(reply)
    if refused:
        raise StageFailed(
            "failed",
            f"{w['label']}: {refused}, so it would fail on that GPU at its first launch; it ran here only in Triton's interpreter",
        )
    uncounted = uncounted_launch(reply)
    if uncounted:
        message, fault = uncounted
        raise StageFailed(
            "failed" if fault == "candidate" else "error", f"{w['label']}: {message}", fault
        )
    judged = sim_hybrid.values_compared(ev.job.get("task_sources"))  # values compared at all
    graph = bool(w.get("gpu_graph"))  # a graph replay on the GPU: its launch costs (sim_model)
    formula = w.get("formula")
    if isinstance(formula, dict) and sim_judge.formula_problem(formula, launches, cand_ops):
        # short of the byte formula: what do the drawn inputs need? (padding tokens move nothing)
        share = drawn_share(ev, w, seed, deadline)
        if share is not None:
            formula = {**formula, "bytes_share": share}
    found, candidate, value_notes = count_problems(
        reply, launches, cand_ops, ev.job, formula, target, constants, judged, graph
    )
    if found:
        raise StageFailed("failed", f"{w['label']}: {found}")
    checked = check_values(ev, w, reply, seed, deadline)
    known = w.get("measured_baseline")
    if (
        isinstance(known, dict)
        and isinstance(known.get("median_us"), (int, float))
        and known["median_us"] > 0
    ):
        baseline, base = (
            known_baseline(known, target),
            {"source": known.get("source"), "impl": known.get("impl")},
        )
        base["note"] = baseline_note(known, target)
    else:
        base = ev._trusted_call(
            {
                "op": "predict_baseline",
                "workload": _workload(w),
                "seed": w["seed"],
                "formula": w["formula"],
            },
            deadline,
        )
        baseline = predict_side(
            [], checked_ops(base["torch_ops"], "baseline"), target, constants, graph
        )
    seconds = reply.get("seconds")
    candidate["count_s"] = (
        float(seconds) if isinstance(seconds, (int, float)) and math.isfinite(seconds) else None
    )
    if isinstance(
        reply.get("impl"), str
    ):  # what the candidate says it ran (a label: sim_predict.ran_impl)
        candidate["impl"] = reply["impl"][:40]
    baseline["source"] = base.get("source")
    baseline["impl"] = base.get("impl")
    anchor = w.get("anchor")
    anchored = (
        anchor_candidate(candidate, anchor, baseline, target, constants, graph, ev.job["sim"])
        if isinstance(anchor, dict)
        else None
    )
    notes = [str(n)[:300] for n in (reply.get("notes") or [])[:8] if isinstance(n, str)]
    if base.get("note"):
        notes.append(str(base["note"]))
    if anchored:
        notes.append(anchored)
    notes += [*value_notes, checked]
    ev.emit(
        {
            "type": "workload_timed",
            "workload": w["label"],
            "axes": w["axes"],
            "mode": "predicted",
            "rounds": 0,
            "candidate": candidate,
            "baseline": baseline,
            "notes": notes,
        }
    )


def anchor_candidate(
    candidate: dict[str, Any],
    anchor: dict[str, Any],
    baseline: dict[str, Any],
    target: Target,
    constants: Constants,
    graph: bool,
    sim: dict[str, Any],
) -> str | None:
    """Anchor the candidate's predicted time to the measured baseline, in place: × measured /
    model(baseline), the engine's count of the implementation baseline.py runs here
    (core/devices/sim/anchors.py) priced with the same constants, so that the speedup over that
    implementation is model(baseline) / model(candidate). Its band is the anchored fit's
    (sim["anchored_band"]) and, where the speedup divides another implementation's figure than
    the anchor's, compounded with the anchor figure's own band (the divided-by figure's band is
    the baseline side's). Returns the workload's note, None where the anchor prices to nothing."""
    try:
        launches = checked_launches({"launches": anchor.get("launches") or []})
        ops = checked_ops(anchor.get("torch_ops") or [], "baseline")
    except MalformedCounts as exc:
        return f"not anchored: the anchor's counts are malformed ({exc})"
    model_us = predict_side(launches, ops, target, constants, graph)["median_us"]
    measured_us = float(anchor.get("measured_us") or 0.0)
    if not (model_us > 0 and measured_us > 0 and math.isfinite(model_us)):
        return None
    factor = measured_us / model_us
    impl = str(anchor.get("impl") or "torch")[:40]
    band = float(sim.get("anchored_band", candidate["band"]))
    if impl != baseline.get("impl"):
        band = (1 + band) * (1 + float(anchor.get("band") or 0.02)) - 1
    t = candidate["median_us"] * factor
    candidate.update(
        median_us=t,
        low_us=t / (1 + band),
        high_us=t * (1 + band),
        band=band,
        anchor={"impl": impl, "model_us": model_us, "measured_us": measured_us, "factor": factor},
    )
    return (
        f"anchored: the candidate's modelled time × {factor:.3f}, the measured time of `{impl}` "
        f"({measured_us:.1f} µs) over the model's count of it ({model_us:.1f} µs, "
        "core/data/sim_anchors.json)"
    )
