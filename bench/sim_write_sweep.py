"""Every bundled single-device task's starter and baseline, counted at two GPU workloads as a
`sim:h200` evaluation counts them: the share of each output the counted call wrote
(`sim_unwritten_output` must not fire on them) and whether a dot narrower than the task's
dtypes appears (`sim_narrow_dot`). docs/integrity.md, "Red team".

    PYTHONPATH=. python3 bench/sim_write_sweep.py > bench/results/sim_write_sweep.json
"""

from __future__ import annotations

import importlib.util
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from core.devices.device import sim_info
from core.devices.sim import sim_section
from core.evaluation.job import spec_json
from core.harness.sim import (
    narrow as sim_narrow,
)
from core.harness.sim import (
    predict as sim_predict,
)
from core.harness.sim import (
    stage as sim_stage,
)
from core.harness.sim import (
    written as sim_written,
)
from core.tasks.discovery import discover


def main() -> None:
    section = sim_section(sim_info("sim:h200"))
    compiler = sim_predict.CompileCache(section["aot"], None)
    from core.harness.triton_cpu import enable_interpreter

    enable_interpreter()
    rows = []
    for task in discover(ROOT / "tasks"):
        if task.multi_rank:
            continue
        custom = None
        if (task.path / "inputs.py").is_file():
            spec = importlib.util.spec_from_file_location(
                f"inputs_{task.id.replace('/', '_')}", task.path / "inputs.py"
            )
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            custom = mod.make_inputs
        visible = task.workloads(False).visible
        workloads = visible[:1] + visible[-1:] if len(visible) > 1 else visible
        for side in ("starter", "baseline"):
            spec = importlib.util.spec_from_file_location(
                f"{side}_{task.id.replace('/', '_')}", task.path / f"{side}.py"
            )
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            for w in workloads:
                axes = dict(w.axes)
                workload = {
                    "axes": axes,
                    "shapes": {
                        s.name: list(s.concrete_shape(axes))
                        for s in task.inputs + task.outputs
                        if s.shape is not None
                    },
                }
                started = time.time()
                try:
                    reply = sim_predict.predict_candidate(
                        module.run,
                        [spec_json(s) for s in task.inputs],
                        workload,
                        7,
                        custom,
                        compiler,
                    )
                    launches = sim_stage.checked_launches(reply)
                    declared = [
                        s.dtype for s in task.inputs + task.outputs if getattr(s, "dtype", None)
                    ]
                    row = {
                        "written": reply.get("written"),
                        "unwritten": sim_written.problem(
                            reply.get("written"), [o.name for o in task.outputs]
                        ),
                        "narrow": sim_narrow.problem(
                            [s for s, _ in launches],
                            sim_stage.checked_ops(reply["torch_ops"], "c"),
                            declared,
                        ),
                    }
                except Exception as exc:  # noqa: BLE001 - reported
                    row = {"error": f"{type(exc).__name__}: {str(exc)[:200]}"}
                rows.append(
                    {
                        "task": task.id,
                        "side": side,
                        "axes": axes,
                        **row,
                        "s": round(time.time() - started, 1),
                    }
                )
                print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    print(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
