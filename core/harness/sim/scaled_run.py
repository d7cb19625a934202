"""A pure PyTorch call too large to run for real on the CPU, checked at a scaled workload
(docs/integrity.md, "Simulated devices"; the engine picks the workload: core/evaluation/sim_scaled.py).

At the GPU workload such a call is counted on fake tensors only: no memory, no time, and no
values. It is billed from that count, which the stage holds to the task's FLOP and byte
formulas (sim_stage.formula_problem). Its values are checked on a real run at the scaled
workload (the GPU workload's rows and columns where it can, its reduction axes shrunk), whose
known elements go to the trusted worker with that workload; and the scaled workload is counted
both ways, fake and real, so that a call that tells fake tensors apart is caught there as it is
below the budget (`sim_fake_pass_differs`). Imports only torch: the harness is shipped alone.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def billed_from_fake(
    real: dict[str, Any],
    ops: list[dict[str, Any]],
    written: list[Any],
    sizes: list[Any],
    found: dict[str, Any],
    scaled: dict[str, Any],
    specs: list[dict[str, Any]],
    seed: int,
    custom: Any,
    run: Callable[..., Any],
) -> dict[str, Any]:
    """The reply for such a call: `ops`, `written`, `sizes` and `found` are its fake count at
    the GPU workload (billed), `real` the reply of its real run at `scaled`."""
    from core.harness.sim import predict as sim_predict
    from core.harness.sim import torch_ops as sim_torch

    started = time.perf_counter()
    fake = sim_torch.count_fake(
        run,
        sim_predict.fake_inputs(specs, scaled, seed, custom),
        real_args=sim_predict.real_integers(specs, scaled, seed, custom),
    )
    flops, nbytes = sim_torch.total(fake)
    values = dict(real["values"])
    values["workload"] = {"axes": scaled["axes"], "shapes": scaled["shapes"]}
    label = scaled.get("label") or ", ".join(f"{k}={v}" for k, v in scaled["axes"].items())
    return {
        "ok": True,
        "launches": [],
        "torch_ops": ops,
        "unknown_ops": sorted(set(found.get("unknown", [])) | set(real.get("unknown_ops", []))),
        "notes": [
            "pure PyTorch above the real run's budget: billed from its fake count at this "
            f"workload, its values checked on a real run at {label}"
        ],
        "seconds": float(real.get("seconds") or 0.0) + time.perf_counter() - started,
        "written": written,
        "values": values,
        "strays": real.get("strays", []),
        "exact_differs": real.get("exact_differs", []),
        # The scaled workload, counted both ways (sim_stage.fake_pass_problem).
        "scaled_check": {
            "label": label,
            "fake": {"flops": flops, "bytes": nbytes, "ops": len(fake)},
            "launches": len(real.get("launches") or []),
            "torch_ops": real.get("torch_ops", []),
        },
        "fake_written_bytes": sizes,
    }
