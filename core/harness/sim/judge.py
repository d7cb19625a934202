"""What the harness parent fails in a `sim:` device's counted call before it predicts a time
(docs/integrity.md, "Simulated devices"). The simulator never skips a check silently: what it
cannot count, resolve or check is a failure of the stage, never a note.

- `sim_stray_access`: a kernel loaded or stored outside every tensor the call was given or made.
- `sim_unknown_op`: a torch op whose cost the model does not know (a product, a convolution,
  linear algebra without a FLOP formula).
- `sim_exact_differs`: an exact program counted unlike its sampled twin (sim_count): the kernel
  tells the programs it is watched in apart.
- `sim_less_work`: the call's counted bytes or arithmetic fall short of what the task's own
  formulas say any implementation must do (work done where the count does not see it, or
  skipped at GPU sizes).
- `sim_unchecked_output`: an output of which no element could be compared with the reference,
  unless the output is declared written by atomics, is written by torch's partial writes, or
  lies behind sampled launches that carry at least half the call's predicted time (a chain of
  launches: a kernel cannot hide its work behind one without paying for it).

Pure functions of the candidate worker's reply, its checked launch summaries and torch ops, and
the job; sim_stage raises their messages. Imports only the harness.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from core.harness.sim.launch import SAMPLING_Z
from core.harness.sim.model import Constants, Target, launch_time

BYTES_HOLD = 0.8  # share of the task's byte formula the counted call must move
FLOPS_HOLD = 0.8  # ... and of its FLOP formula, where the task is bound by a matrix unit
MATRIX_PEAKS = ("bf16", "fp16", "fp8", "tf32")
CHAIN_SHARE = 0.5  # share of the predicted time an output's unknown roots must carry to excuse it


def _num(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


def stray_problem(reply: dict[str, Any]) -> str | None:
    strays = reply.get("strays")
    if not isinstance(strays, list) or not strays or not isinstance(strays[0], dict):
        return None
    s = strays[0]
    what = []
    if _num(s.get("store_bytes")):
        what.append(f"stored {int(_num(s['store_bytes']))} bytes")
    if _num(s.get("load_bytes")):
        what.append(f"loaded {int(_num(s['load_bytes']))} bytes")
    return (
        f"sim_stray_access: kernel `{str(s.get('kernel'))[:80]}` {' and '.join(what) or 'accessed memory'} outside every "
        f"tensor its call was given or made (first at {str(s.get('address'))[:20]}): a store there is no output's, and "
        "what it wrote or read cannot be counted or checked; pass the tensors a kernel touches as its arguments"
    )


def unknown_op_problem(reply: dict[str, Any]) -> str | None:
    ops = reply.get("unknown_ops")
    if not isinstance(ops, list) or not ops:
        return None
    names = ", ".join(f"`{str(o)[:60]}`" for o in ops[:4])
    return (
        f"sim_unknown_op: the call runs {names}, whose cost the simulator's model does not know (it computes, and "
        "no FLOP formula is known for it): it cannot be billed by its bytes; use an op the model knows "
        "(mm, bmm, addmm, _grouped_mm, scaled_dot_product_attention, convolution) or a Triton kernel"
    )


def differs_problem(reply: dict[str, Any]) -> str | None:
    found = reply.get("exact_differs")
    if not isinstance(found, list) or not found or not isinstance(found[0], dict):
        return None
    d = found[0]
    return (
        f"sim_exact_differs: program {d.get('program')} of kernel `{str(d.get('kernel'))[:80]}` counted "
        f"{_num(d.get('exact')):.6g} {str(d.get('count'))[:40]} when it ran exactly and {_num(d.get('sampled')):.6g} when "
        "it ran as every billed program does: a kernel that tells the programs whose values are checked apart is "
        "billed for work its other programs do not do"
    )


def slow_problem(reply: dict[str, Any]) -> str | None:
    slow = reply.get("exact_slow")
    if not isinstance(slow, list) or not slow:
        return None
    return (
        f"sim_unchecked_output: a program of kernel `{str(slow[0])[:80]}` did not finish one exact run within the "
        "simulator's limit (60 s in Triton's interpreter), so none of its values can be checked; give each program "
        "less work (a GPU would run more, smaller programs)"
    )


@dataclass
class Counted:
    """What the count bills (launches' extrapolated totals and torch ops), and the standard
    errors of the launches' sample extrapolations (independent samples: in quadrature)."""

    nbytes: float
    arith: float
    bytes_se: float = 0.0
    arith_se: float = 0.0


def counted_work(
    launches: list[tuple[dict[str, Any], Any]], ops: list[dict[str, Any]]
) -> tuple[float, float]:
    """(bytes, arithmetic) the count bills: launches' DRAM bytes and torch ops' bytes; dot FLOPs,
    ALU and special-function operations, and torch ops' FLOPs."""
    found = counted(launches, ops)
    return found.nbytes, found.arith


def counted(launches: list[tuple[dict[str, Any], Any]], ops: list[dict[str, Any]]) -> Counted:
    nbytes = sum(_num(s.get("dram_bytes")) for s, _ in launches)
    arith = 0.0
    for s, _ in launches:
        p = s["per_program"]
        per = sum(_num(v) for v in (p.get("dot_flops") or {}).values())
        per += _num(p.get("alu_ops")) + _num(p.get("sfu_ops"))
        arith += per * _num(s.get("programs"))
    nbytes += sum(_num(o.get("bytes")) for o in ops)
    arith += sum(_num(o.get("flops")) for o in ops)
    return Counted(
        nbytes,
        arith,
        math.sqrt(sum(_num(s.get("dram_se")) ** 2 for s, _ in launches)),
        math.sqrt(sum(_num(s.get("arith_se")) ** 2 for s, _ in launches)),
    )


def formula_problem(
    formula: Any,
    launches: list[tuple[dict[str, Any], Any]],
    ops: list[dict[str, Any]],
    z: float = SAMPLING_Z,
) -> str | None:
    """`sim_less_work` where the counted call moves less than `BYTES_HOLD` of the task's byte
    formula, or (a task bound by a matrix unit) computes less than `FLOPS_HOLD` of its FLOP
    formula. The formulas are the task's minimum: what any implementation reads and writes
    once, and the products it must form. A count below them is work the simulator did not see
    (numpy, host code) or work skipped where only the count looks.

    Where the drawn inputs need less than the byte formula (padding tokens that move nothing:
    `bytes_share`, from the task's reference.py through the trusted worker), the hold is of that
    share. A count that sampled its launches' programs fails only where it falls short by more
    than `z` standard errors of its samples (`z=0`: its point estimate, as the candidate's
    worker judges whether to recount with more programs, sim_predict)."""
    if not isinstance(formula, dict):
        return None
    share = formula.get("bytes_share")
    share = min(1.0, max(0.0, _num(share))) if share is not None else 1.0
    want_bytes, want_flops = share * _num(formula.get("bytes")), _num(formula.get("flops"))
    # the task's own share where its byte formula is an expectation over the drawn data
    # (task.yaml `bytes_hold`, checked in (0, 1] by the loader: the experts a routed batch touches)
    hold = _num(formula.get("bytes_hold")) or BYTES_HOLD
    found = counted(launches, ops)
    nbytes, arith = found.nbytes, found.arith
    if want_bytes > 0 and nbytes + z * found.bytes_se < hold * want_bytes:
        need = (
            f"any implementation reads and writes on these drawn inputs ({100 * share:.0f}% of the "
            f"task's byte formula; at least {100 * hold:.0f}%)"
            if share < 1
            else f"the task's byte formula says any implementation reads and writes (at least {100 * hold:.0f}%)"
        )
        return (
            f"sim_less_work: the counted call moves {nbytes:.4g} bytes{_spread(found.bytes_se, z)}, "
            f"{100 * nbytes / want_bytes:.0f}% of the {want_bytes:.4g} {need}: work the count does not see, "
            "or skipped at GPU sizes"
        )
    dtype = str(formula.get("dtype") or "")
    if (
        want_flops > 0
        and dtype.startswith(MATRIX_PEAKS)
        and arith + z * found.arith_se < FLOPS_HOLD * want_flops
    ):
        return (
            f"sim_less_work: the counted call computes {arith:.4g} FLOPs{_spread(found.arith_se, z)}, "
            f"{100 * arith / want_flops:.0f}% of the {want_flops:.4g} the task's FLOP formula says it must "
            f"(at least {100 * FLOPS_HOLD:.0f}%): work the count does not see, or skipped at GPU sizes"
        )
    return None


def _spread(se: float, z: float) -> str:
    """How far the sampled programs let the figure be off, for a failure's message."""
    if z * se <= 0:
        return ""
    return f" (± {z * se:.3g}: {z:g} standard errors of its sampled programs)"


def unchecked_problem(
    values: Any,
    outputs: list[dict[str, Any]],
    launches: list[tuple[dict[str, Any], Any]],
    total_us: float,
    target: Target,
    constants: Constants,
) -> tuple[str | None, list[str]]:
    """(failure, notes) for the outputs of which no element was known (sim_values' `why` and
    `roots`). Excused, with a note: an output declared written by atomics, one written by torch's
    partial writes (scatter, index_put: a pure PyTorch call, held to the formulas), and one behind
    sampled launches that carry at least `CHAIN_SHARE` of the call's predicted time. Anything else
    is `sim_unchecked_output`."""
    given = values.get("outputs") if isinstance(values, dict) else None
    if not isinstance(given, list):
        return None, []
    notes = []
    for i, sample in enumerate(given):
        if not isinstance(sample, dict) or sample.get("index") or i >= len(outputs):
            continue
        spec = outputs[i]
        if spec.get("inplace_of"):
            continue  # judged by the bytes the reference changes (sim_written.inplace_problem)
        name = str(spec.get("name"))
        why: dict[str, Any] = sample["why"] if isinstance(sample.get("why"), dict) else {}
        reasons = {str(k) for k, v in why.items() if _num(v) > 0}
        if reasons and reasons <= {"atomic"} and spec.get("atomic"):
            notes.append(
                f"value check: output `{name}` is written by atomics (declared in task.yaml)"
            )
            continue
        if reasons and reasons <= {"torch_partial"}:
            notes.append(f"value check: output `{name}` is written by torch's partial writes only")
            continue
        if "chained" in reasons and reasons <= {"chained", "sampled"}:
            roots = [int(r) for r in sample.get("roots") or [] if isinstance(r, int)]
            share = _roots_share(roots, launches, total_us, target, constants)
            if share >= CHAIN_SHARE:
                notes.append(
                    f"value check: output `{name}` is computed from the sampled output of kernel(s) carrying "
                    f"{100 * share:.0f}% of the predicted time: no element of it is known"
                )
                continue
            return (
                f"sim_unchecked_output: no element of output `{name}` can be compared with the reference: it is "
                f"computed from what sampled launches left partial, and they carry {100 * share:.0f}% of the call's "
                f"predicted time (at least {100 * CHAIN_SHARE:.0f}% would excuse it)"
            ), notes
        because = (
            ", ".join(f"{k}: {int(_num(v))}" for k, v in sorted(why.items())) or "nothing sampled"
        )
        return (
            f"sim_unchecked_output: no element of output `{name}` can be compared with the reference ({because}): "
            "the simulator must see what a GPU would compute before it bills the work; an output written by "
            "atomics is declared in task.yaml (`atomic: true`)"
        ), notes
    return None, notes


def _roots_share(
    roots: list[int],
    launches: list[tuple[dict[str, Any], Any]],
    total_us: float,
    target: Target,
    constants: Constants,
) -> float:
    if total_us <= 0:
        return 0.0
    last = len(launches) - 1  # launches past the reply's cap are merged into its last entry
    picked = {min(r, last) for r in roots if r >= 0}
    time = sum(launch_time(*launches[r], target, constants).time_us for r in picked)
    return time / total_us
