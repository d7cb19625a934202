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

from core.harness.sim import count as sim_count
from core.harness.sim import hybrid as sim_hybrid
from core.harness.sim import judge as sim_judge
from core.harness.sim import narrow as sim_narrow
from core.harness.sim import written as sim_written
from core.harness.sim.model import Constants, Target, predict_side

if TYPE_CHECKING:
    from core.harness.runner import Evaluation

MAX_LAUNCHES = 256
RESOURCE_KEYS = ("registers", "spill_bytes", "shared_bytes", "num_warps", "num_stages")
PER_PROGRAM_KEYS = sim_count.NUMERIC  # what a launch summary holds per program


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


class MalformedCounts(ValueError):
    """The candidate's worker sent counts that are not numbers of the expected shape."""


def _number(value: Any, where: str) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value < 0
    ):
        raise MalformedCounts(f"{where} is {value!r}, not a finite non-negative number")
    return float(value)


def checked_launches(reply: dict[str, Any]) -> list[tuple[dict[str, Any], dict[str, Any] | None]]:
    """The (summary, resources) pairs of a candidate's `predict` reply, validated and rebuilt
    from known keys only."""
    launches = reply.get("launches")
    if not isinstance(launches, list) or len(launches) > MAX_LAUNCHES:
        raise MalformedCounts("launches is not a list of at most 256 entries")
    out = []
    for i, s in enumerate(launches):
        if not isinstance(s, dict) or not isinstance(s.get("per_program"), dict):
            raise MalformedCounts(f"launch {i} is not a launch summary")
        p = s["per_program"]
        dots = p.get("dot_flops") or {}
        if not isinstance(dots, dict):
            raise MalformedCounts(f"launch {i}: dot_flops is not a mapping")
        grid = s.get("grid")
        if not isinstance(grid, list) or len(grid) != 3:
            raise MalformedCounts(f"launch {i}: grid is not three numbers")
        summary = {
            "kernel": str(s.get("kernel"))[:120],
            "grid": [int(_number(g, f"launch {i} grid")) for g in grid],
            "programs": int(_number(s.get("programs"), f"launch {i} programs")),
            "sampled": int(_number(s.get("sampled", 0), f"launch {i} sampled")),
            "options": {
                k: int(_number(v, f"launch {i} {k}"))
                for k, v in (s.get("options") or {}).items()
                if k in ("num_warps", "num_stages")
            },
            "per_program": {
                **{k: _number(p.get(k, 0.0), f"launch {i} {k}") for k in PER_PROGRAM_KEYS},
                "dot_flops": {
                    str(k)[:16]: _number(v, f"launch {i} dot_flops") for k, v in dots.items()
                },
            },
            "dram_bytes": _number(s.get("dram_bytes", 0.0), f"launch {i} dram_bytes"),
            "merged": max(1, int(_number(s.get("merged", 1), f"launch {i} merged"))),
        }
        r = s.get("resources")
        resources = None
        if isinstance(r, dict) and r.get("ok"):
            resources = {
                "ok": True,
                "mma": r.get("mma")
                if r.get("mma") in ("wgmma", "tcgen05", "mma", "mfma", None)
                else None,
                **{
                    k: int(_number(r[k], f"launch {i} {k}"))
                    for k in RESOURCE_KEYS
                    if r.get(k) is not None
                },
            }
        out.append((summary, resources))
    return out


def refused_launch(reply: dict[str, Any]) -> str | None:
    """What the target's compiler said about the first kernel it refused to build, or None."""
    for s in reply.get("launches") or []:
        r = s.get("resources") if isinstance(s, dict) else None
        if isinstance(r, dict) and r.get("rejected") is True:
            return f"kernel `{str(s.get('kernel'))[:80]}` does not build for the target ({str(r.get('error'))[:500]})"
    return None


def uncounted_launch(reply: dict[str, Any]) -> tuple[str, str] | None:
    """(message, fault) for the first launch the counts cannot stand for, or None: a kernel
    whose body calls host Python (interpreted, that runs outside the count; the candidate's
    fault), or one whose AOT compile failed in the simulator without the target refusing it
    (nothing to predict its occupancy and matrix path from: this device cannot evaluate it).
    Neither is forgiven with assumed figures any more: a kernel could hide there."""
    for s in reply.get("launches") or []:
        r = s.get("resources") if isinstance(s, dict) else None
        if not isinstance(r, dict):
            continue
        kernel = str(s.get("kernel"))[:80]
        calls = r.get("host_calls")
        if isinstance(calls, list) and calls:
            return (
                f"kernel `{kernel}` calls host Python from its body ({', '.join(str(c)[:80] for c in calls[:4])}): interpreted, that runs "
                "on every program outside the count (on a GPU, once at compile time); make it @triton.jit or @triton.constexpr_function"
            ), "candidate"
        if not r.get("ok") and not r.get("rejected"):
            return (
                f"cannot evaluate on this device: the simulator's AOT compile of kernel `{kernel}` failed ({str(r.get('error'))[:300]})",
                "infrastructure",
            )
    return None


def checked_ops(ops: Any, where: str) -> list[dict[str, Any]]:
    if not isinstance(ops, list):
        raise MalformedCounts(f"{where}: torch ops is not a list")
    return [
        {
            "name": str(o.get("name"))[:80],
            "flops": _number(o.get("flops", 0.0), f"{where} flops"),
            "bytes": _number(o.get("bytes", 0.0), f"{where} bytes"),
            "dtype": str(o.get("dtype") or "bf16")[:16],
            "glue": o.get("glue") is True,
        }
        for o in ops
        if isinstance(o, dict)
    ]


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


FAKE_PASS_SLACK = 1.1  # the real run may count this much more than the fake pass, no more


def fake_pass_problem(
    reply: dict[str, Any], launches: list[Any], ops: list[dict[str, Any]]
) -> str | None:
    scaled = reply.get("scaled_check")
    if isinstance(scaled, dict):  # above the budget: compared at the scaled workload
        try:
            real_ops = checked_ops(scaled.get("torch_ops", []), "scaled")
        except MalformedCounts:
            return "sim_fake_pass_differs: the candidate's worker sent a malformed scaled count"
        found = _fake_pass_differs(
            {"fake_count": scaled.get("fake")},
            [None] * int(_number(scaled.get("launches", 0), "launches")),
            real_ops,
        )
        return found and found.replace(
            "on GPU-sized tensors", f"at {str(scaled.get('label'))[:120]}"
        )
    return _fake_pass_differs(reply, launches, ops)


def _fake_pass_differs(
    reply: dict[str, Any], launches: list[Any], ops: list[dict[str, Any]]
) -> str | None:
    """A pure PyTorch call is counted twice, on fake tensors and then on GPU-sized CPU tensors
    (sim_predict): code that branches on neither values nor devices does the same ops both times.
    A real run that launched a kernel the fake pass did not, or counted clearly more or less
    work, is proof that the candidate tells the counting pass's fake tensors apart and does
    something else there (less, where the fake count is billed; or work the real run's count
    does not see: numpy): `sim_fake_pass_differs`; None otherwise."""
    fake = reply.get("fake_count")
    if not isinstance(fake, dict):
        return None
    try:
        fake_flops, fake_bytes = float(fake["flops"]), float(fake["bytes"])
    except (KeyError, TypeError, ValueError):
        return "sim_fake_pass_differs: the candidate's worker sent a malformed fake-pass count"
    flops = sum(float(o.get("flops") or 0.0) for o in ops)
    nbytes = sum(float(o.get("bytes") or 0.0) for o in ops)
    if launches:
        done = f"launched {len(launches)} Triton kernel(s)"
    elif (
        flops > FAKE_PASS_SLACK * fake_flops + 1e6
        or nbytes > FAKE_PASS_SLACK * fake_bytes + 1e6
        or flops < fake_flops / FAKE_PASS_SLACK - 1e6
        or nbytes < fake_bytes / FAKE_PASS_SLACK - 1e6
    ):
        done = f"did {flops:.3g} FLOPs and moved {nbytes:.3g} bytes"
    else:
        return None
    return (
        f"sim_fake_pass_differs: on GPU-sized tensors the call {done}, on the fake tensors of the "
        f"counting pass {fake_flops:.3g} FLOPs and {fake_bytes:.3g} bytes: it tells the counting "
        "pass apart and does something else there"
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
) -> tuple[str | None, dict[str, Any], list[str]]:
    """(the first failure of a candidate's counts, its predicted side, notes on its values):
    every check sim_judge, sim_written, sim_narrow and the fake pass make before the reference
    is asked. `judged`: the task's values are compared (no check.py of its own). Pure, so that
    bench/sim_value_sweep.py applies what a `sim:` evaluation applies."""
    outputs = job["outputs"]
    found = (
        sim_judge.stray_problem(reply)
        or sim_judge.unknown_op_problem(reply)
        or sim_judge.differs_problem(reply)
        or sim_judge.slow_problem(reply)
        or sim_written.problem(reply.get("written"), [o["name"] for o in outputs])
        or fake_pass_problem(reply, launches, cand_ops)
        or sim_judge.formula_problem(formula, launches, cand_ops)
        or sim_narrow.problem(
            [s for s, _ in launches],
            cand_ops,
            [str(x.get("dtype")) for x in job["inputs"] + outputs if x.get("dtype")],
        )
    )
    candidate = predict_side(launches, cand_ops, target, constants)
    if found or not judged:
        return found, candidate, []
    unchecked, notes = sim_judge.unchecked_problem(
        reply.get("values"), outputs, launches, candidate["median_us"], target, constants
    )
    return unchecked, candidate, notes


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
    found, candidate, value_notes = count_problems(
        reply, launches, cand_ops, ev.job, w.get("formula"), target, constants, judged
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
        baseline = predict_side([], checked_ops(base["torch_ops"], "baseline"), target, constants)
    seconds = reply.get("seconds")
    candidate["count_s"] = (
        float(seconds) if isinstance(seconds, (int, float)) and math.isfinite(seconds) else None
    )
    baseline["source"] = base.get("source")
    baseline["impl"] = base.get("impl")
    notes = [str(n)[:300] for n in (reply.get("notes") or [])[:8] if isinstance(n, str)]
    if base.get("note"):
        notes.append(str(base["note"]))
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
