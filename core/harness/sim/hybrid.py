"""A `sim:` device's value check for a task with its own check.py (docs/integrity.md, issue 37).

The counted call's known elements are a few thousand scattered elements, and most check.py
rules judge whole outputs (a sampler's statistics, routing ids as sets, a permutation's
segments as multisets): those cannot judge a sample. A check.py whose rule is elementwise at
heart (a tolerance on every element, with rules over rows or the whole output that a handful
of reference-valued elements cannot break: the fp8 GEMMs', fused_moe's) says so with
`ELEMENTWISE = True`; the trusted worker then judges a *hybrid* with it: the reference's output,
at the output's declared dtype, with the candidate's known elements in their places. Only the
candidate's elements can fail it. Without the marker a check.py task's values are not compared
(its count runs no exact program either), as before.
"""

from __future__ import annotations

import re
from typing import Any

import torch

from core.harness import checking, inputs

MARKER = re.compile(rb"^ELEMENTWISE\s*=\s*True\b", re.MULTILINE)


def well_formed(
    index: Any, value: Any, numel: int, most: int | None = None
) -> tuple[list[int], list[float]] | None:
    """A candidate's sampled values of one output, (index, value), where they are well formed:
    two lists of one length (at most `most`), every index an element of the output and every
    value a number; else None."""
    ok = (
        isinstance(index, list)
        and isinstance(value, list)
        and len(index) == len(value)
        and (most is None or len(index) <= most)
        and all(isinstance(j, int) and not isinstance(j, bool) and 0 <= j < numel for j in index)
        and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)
    )
    return (index, value) if ok else None


def malformed(name: str) -> str:
    return (
        f"the values of output `{name}` are not {{index: [...], value: [...]}} within its elements"
    )


def elementwise(check_source: bytes | str | None) -> bool:
    """Whether a task's check.py declares its rule elementwise (the text, as the job carries it)."""
    if check_source is None:
        return False
    raw = check_source if isinstance(check_source, bytes) else str(check_source).encode()
    return MARKER.search(raw) is not None


def values_compared(task_sources: dict[str, Any] | None) -> bool:
    """Whether a `sim:` evaluation compares the counted call's values with the reference (and so
    runs exact programs): a task without check.py, or one whose check.py is elementwise."""
    sources = task_sources or {}
    return "check.py" not in sources or elementwise(sources.get("check.py"))


def judge(
    entry: dict[str, Any],
    values: Any,
    out_specs: list[dict[str, Any]],
    rule: dict[str, Any],
    check: Any,
    make_args: Any,
) -> dict[str, Any]:
    """The trusted worker's reply (as sim_reference.judge's) with check.py on the hybrid."""
    reply: dict[str, Any] = {
        "ok": True,
        "wrong": None,
        "checked": 0,
        "skipped": entry.get("skipped"),
        "malformed": None,
        "changed_bytes": list(entry.get("changed") or [None] * len(out_specs))[: len(out_specs)],
    }
    if reply["skipped"]:
        return reply
    want = entry["outputs"]
    given = values.get("outputs") if isinstance(values, dict) else None
    if not isinstance(given, list):
        reply["skipped"] = str((values or {}).get("reason") or "no values")[:300]
        return reply
    hybrid = []
    for i, spec in enumerate(out_specs):
        ref = want[i] if i < len(want) else None
        if not isinstance(ref, torch.Tensor):
            reply["skipped"] = f"the reference gave no tensor for output `{spec['name']}`"
            return reply
        out = ref.detach().to(inputs.dtype_of(spec["dtype"])).clone().reshape(-1)
        sample = given[i] if i < len(given) else None
        if isinstance(sample, dict) and sample.get("index"):
            pair = well_formed(sample.get("index"), sample.get("value"), out.numel())
            if pair is None:
                reply["malformed"] = malformed(spec["name"])
                return reply
            index, value = pair
            out[torch.tensor(index, dtype=torch.long)] = torch.tensor(value).to(out.dtype)
            reply["checked"] += len(index)
        hybrid.append(out.reshape(ref.shape))
    if not reply["checked"]:
        return reply
    verdicts = checking.judge(out_specs, hybrid, want, make_args(), rule, check)
    for name, verdict in verdicts.items():
        if not verdict.get("passed"):
            reply["wrong"] = (
                f"sim_wrong_output: the counted call's output `{name}`, its {reply['checked']} known elements set into the "
                f"reference, fails the task's check.py ({str(verdict.get('message', ''))[:300]}): a kernel that computes "
                "less when it is counted than when it is checked is predicted for work it does not do"
            )
            return reply
    return reply
