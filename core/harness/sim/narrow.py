"""Multiplying in a narrower dtype than the task has, only when counted (docs/integrity.md,
"Simulated devices").

On a `sim:` device correctness runs at CPU sizes and the count at GPU sizes, so a kernel can
multiply in bfloat16 where it is checked and in float8 where it is counted: the model bills fp8
dots at twice the bf16 rate, and every output is still written. No honest kernel of a task
whose inputs and outputs are all wider than 8 bits multiplies in 8 bits (the per-element
tolerance fails it on a GPU: tests/cheats/gemm_fp8.py), so such a dot in the count fails the
stage: `sim_narrow_dot`.
"""

from __future__ import annotations

from typing import Any

NARROW = (
    "fp8",
    "f8",
    "int8",
    "uint8",
    "i8",
    "fp4",
    "e2m1",
    "int4",
)  # Triton's and sim_torch's names of ≤ 8-bit operands
_DECLARED_NARROW = (
    "float8",
    "int8",
    "uint8",
    "int4",
    "float4",
)  # task.yaml dtypes that make them legitimate


def _narrow(dtype: str) -> bool:
    name = dtype.lower()
    return any(name.startswith(n) for n in NARROW)


def problem(
    launches: list[dict[str, Any]], ops: list[dict[str, Any]], declared: list[str]
) -> str | None:
    """The stage's failure message, or None. `launches` are checked launch summaries,
    `ops` the candidate's counted torch ops, `declared` the task's input and output dtypes."""
    if any(str(d).lower().startswith(_DECLARED_NARROW) for d in declared):
        return None
    for launch in launches:
        for dtype, flops in (launch.get("per_program", {}).get("dot_flops") or {}).items():
            if flops and _narrow(str(dtype)):
                return (
                    f"sim_narrow_dot: kernel `{launch.get('kernel')}` multiplies in {dtype} in the counted call, and no input or "
                    f"output of the task is 8-bit ({', '.join(sorted(set(declared)))}): predicted at a rate its checked calls "
                    "never showed"
                )
    for op in ops:
        if op.get("flops") and _narrow(str(op.get("dtype", ""))):
            return (
                f"sim_narrow_dot: torch op `{op.get('name')}` multiplies in {op.get('dtype')} in the counted call, and no input or "
                f"output of the task is 8-bit ({', '.join(sorted(set(declared)))})"
            )
    return None
