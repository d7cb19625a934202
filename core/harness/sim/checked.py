"""What the harness parent believes of a `sim:` candidate worker's counts (sim_stage): every
number validated and rebuilt from known keys only, the kernels the target refuses or the count
cannot stand for, and the fake pass of a pure PyTorch call against its real run. Imports only the
harness: it is shipped alone."""

from __future__ import annotations

import math
from typing import Any

from core.harness.sim import count as sim_count

MAX_LAUNCHES = 256
RESOURCE_KEYS = ("registers", "spill_bytes", "shared_bytes", "num_warps", "num_stages")
PER_PROGRAM_KEYS = sim_count.NUMERIC  # what a launch summary holds per program


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
        programs = int(_number(s.get("programs"), f"launch {i} programs"))
        per_program = {k: _number(p.get(k, 0.0), f"launch {i} {k}") for k in PER_PROGRAM_KEYS}
        flops = {str(k)[:16]: _number(v, f"launch {i} dot_flops") for k, v in dots.items()}
        nbytes = _number(s.get("dram_bytes", 0.0), f"launch {i} dram_bytes")
        arith = programs * (sum(flops.values()) + per_program["alu_ops"] + per_program["sfu_ops"])
        summary: dict[str, Any] = {
            "kernel": str(s.get("kernel"))[:120],
            "grid": [int(_number(g, f"launch {i} grid")) for g in grid],
            "programs": programs,
            "sampled": int(_number(s.get("sampled", 0), f"launch {i} sampled")),
            "options": {
                k: int(_number(v, f"launch {i} {k}"))
                for k, v in (s.get("options") or {}).items()
                if k in ("num_warps", "num_stages")
            },
            "per_program": {**per_program, "dot_flops": flops},
            "dram_bytes": nbytes,
            "merged": max(1, int(_number(s.get("merged", 1), f"launch {i} merged"))),
        }
        # the sampling errors of its extrapolated totals (judge.formula_problem), none above the
        # total itself (a sample's error is that large only where it saw a single busy program)
        summary["dram_se"] = min(_number(s.get("dram_se", 0.0), f"launch {i} dram_se"), nbytes)
        summary["arith_se"] = min(_number(s.get("arith_se", 0.0), f"launch {i} arith_se"), arith)
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
