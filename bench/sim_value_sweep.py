"""Bundled single-device tasks' starters and baselines (and the published kernels of
tests/published/), counted at the first and last GPU workload as a `sim:h200` evaluation counts
them, then judged as its trusted worker judges them: the reference at GPU size on the CPU (its
cost is the `reference_s` column), the counted call's known elements against it
(`sim_wrong_output` must not fire), and the in-place outputs' written bytes against what the
reference changed (`sim_unwritten_output`). docs/integrity.md, "Simulated devices".

    PYTHONPATH=. python3 bench/sim_value_sweep.py [--billing] [--extra TASK=PATH ...] [TASK_SUBSTRING ...] > bench/results/sim_value_sweep.json

`--extra activation/silu_mul=/path/kernel.py` adds a candidate of one's own (a published kernel
wrapped as a candidate, kept outside the repository) to that task's sides.

`exact_s` is the interpreter time the count spent on its exact programs (sim_count: the time the
value check adds to a counted call); `--billing` counts each point again without exact programs
and says whether every launch summary is the same (`same_billing`): exact programs must not move
a prediction.
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
from core.evaluation.sim_scaled import scaled_json
from core.harness import checking
from core.harness.sim import count as sim_count
from core.harness.sim import gpu_inputs as sim_gpu_inputs
from core.harness.sim import hybrid as sim_hybrid
from core.harness.sim import predict as sim_predict
from core.harness.sim import reference as sim_reference
from core.harness.sim import stage as sim_stage
from core.harness.sim import written as sim_written
from core.harness.sim.model import Constants, Target
from core.harness.workers import _entry, _module_from_source, full_fp32
from core.tasks.discovery import discover

PUBLISHED = {
    "activation/silu_mul": ["liger_swiglu.py"],
    "norm/add_rmsnorm": ["liger_fused_add_rmsnorm.py"],
}


def _load(path: Path, name: str) -> object:
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def _billed(reply: dict) -> list[dict]:
    drop = ("interpreter_s", "resources")
    return [{k: v for k, v in s.items() if k not in drop} for s in reply["launches"]]


def _count(
    module: object,
    specs: list,
    workload: dict,
    custom: object,
    compiler: object,
    exact: int,
    outs: list | None = None,
    scaled: dict | None = None,
    judged: bool = True,
    formula: dict | None = None,
) -> dict:
    """One count of `module.run`, with `exact` exact programs per launch (none where the task
    judges with its own check.py: the stage asks for none there either); `formula`, as the
    stage sends it: a count of sampled launches that falls short of it is recounted."""
    sim_count.EXACT_PROGRAMS, kept = exact, sim_count.EXACT_PROGRAMS
    try:
        return sim_predict.predict_candidate(
            module.run,  # type: ignore[attr-defined]
            specs,
            workload,
            7,
            custom,  # type: ignore[arg-type]
            compiler,  # type: ignore[arg-type]
            exact=judged,
            outputs=outs,
            scaled=scaled,
            formula=formula,
        )
    finally:
        sim_count.EXACT_PROGRAMS = kept


def _formula(task: object, w: object) -> dict:
    """The workload's formulas, as a job carries them."""
    return {
        "flops": task.flops_for(w),  # type: ignore[attr-defined]
        "bytes": task.bytes_for(w),  # type: ignore[attr-defined]
        "bytes_hold": task.bytes_hold,  # type: ignore[attr-defined]
        "dtype": task.peak,  # type: ignore[attr-defined]
    }


def _problems(
    reply: dict,
    task: object,
    specs: list,
    outs: list,
    w: object,
    section: dict,
    share: float | None = None,
) -> str | None:
    """What a `sim:` evaluation's harness parent fails before it asks the reference
    (sim_stage.count_problems): strays, unknown ops, exact programs unlike their twins, the
    task's formulas (of `share` of the bytes: reference.py's bytes_share at the drawn inputs),
    outputs with no known element."""
    target, constants = (
        Target.from_json(section["target"]),
        Constants.from_json(section["constants"]),
    )
    launches = sim_stage.checked_launches(reply)
    ops = sim_stage.checked_ops(reply.get("torch_ops", []), "candidate")
    formula = _formula(task, w)
    if share is not None:
        formula["bytes_share"] = share
    checks = {n: task.file(n).read_bytes() for n in ("check.py",) if task.file(n).exists()}  # type: ignore[attr-defined]
    judged = sim_hybrid.values_compared(checks)
    found, _, _ = sim_stage.count_problems(
        reply, launches, ops, {"inputs": specs, "outputs": outs}, formula, target, constants, judged
    )
    return found


def main(filters: list[str], billing: bool = False) -> None:
    section = sim_section(sim_info("sim:h200"))
    compiler = sim_predict.CompileCache(section["aot"], None)
    from core.harness.triton_cpu import enable_interpreter

    enable_interpreter()
    rows = []
    for task in discover(ROOT / "tasks"):
        if task.multi_rank or (filters and not any(f in task.id for f in filters)):
            continue
        sources = {
            n: task.file(n).read_bytes() if task.file(n).exists() else None
            for n in ("reference.py", "inputs.py")
        }
        tag = task.id.replace("/", "_")
        custom = None
        if sources["inputs.py"]:
            custom = _module_from_source(
                sources["inputs.py"], f"inputs_{tag}", str(task.file("inputs.py"))
            ).make_inputs
        reference_module = _module_from_source(
            sources["reference.py"], f"ref_{tag}", str(task.file("reference.py"))
        )
        reference = full_fp32(_entry(reference_module, "reference.py"))
        bytes_share = getattr(reference_module, "bytes_share", None)
        specs, outs = [spec_json(s) for s in task.inputs], [spec_json(s) for s in task.outputs]
        check_source = (
            task.file("check.py").read_bytes() if task.file("check.py").exists() else None
        )
        check = (
            checking.check_from_source(check_source, str(task.file("check.py")))
            if check_source
            else None
        )
        names = [o["name"] for o in outs]
        rule = {
            "atol": task.correctness.atol,
            "rtol": task.correctness.rtol,
            "min_match": task.correctness.min_match,
        }
        visible = task.workloads(False).visible
        workloads = visible[:1] + visible[-1:] if len(visible) > 1 else visible
        sides = [("starter", task.file("starter.py")), ("baseline", task.file("baseline.py"))]
        sides += [(p, ROOT / "tests/published" / p) for p in PUBLISHED.get(task.id, [])]
        sides += [(Path(p).name, Path(p)) for t, p in EXTRA if t == task.id]
        for side, path in sides:
            module = _load(path, f"{side.replace('.', '_')}_{tag}")
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
                    # A sample grows for a second at most, so a cold first count can be sampled
                    # smaller than a warm one: with --billing, the counts without exact programs
                    # come before and after the one with them, which must equal one of them.
                    point = (module, specs, workload, custom, compiler)
                    plain = _count(*point, 0, outs) if billing else None
                    started = time.time()
                    scaled = scaled_json(task, w)
                    judged = sim_hybrid.values_compared(
                        {
                            n: task.file(n).read_bytes()
                            for n in ("check.py",)
                            if task.file(n).exists()
                        }
                    )
                    reply = _count(
                        *point, sim_count.EXACT_PROGRAMS, outs, scaled, judged, _formula(task, w)
                    )
                    counted = time.time()
                    same = None
                    if plain is not None:
                        same = _billed(plain) == _billed(reply) or _billed(
                            _count(*point, 0)
                        ) == _billed(reply)
                    share = sim_gpu_inputs.drawn_share(
                        bytes_share, specs, workload, 7, custom
                    )  # what the trusted worker says where the count falls short of `bytes`
                    problem = _problems(reply, task, specs, outs, w, section, share)
                    where = reply["values"].get("workload") or workload
                    entry = (
                        sim_reference.reference_entry(
                            reference, specs, outs, where, 7, custom, sources
                        )
                        if judged
                        else {}
                    )
                    got = (
                        sim_reference.serve(
                            reference,
                            {"inputs": specs, "outputs": outs, "correctness": rule},
                            custom,
                            check,
                            {**sources, "check.py": check_source},
                            {"workload": where, "seed": 7, "values": reply["values"]},
                        )
                        if judged
                        else {
                            "checked": 0,
                            "wrong": None,
                            "skipped": "not applicable: the task has its own check.py",
                            "changed_bytes": [None] * len(outs),
                        }
                    )
                    row = {
                        "checked": got["checked"],
                        "problem": problem,
                        "wrong": got["wrong"],
                        "skipped": got["skipped"],
                        "unwritten": sim_written.problem(reply["written"], names)
                        or sim_written.inplace_problem(
                            got["changed_bytes"], reply["values"]["written_bytes"], names
                        ),
                        "count_s": round(counted - started, 1),
                        "exact_s": round(float(reply.get("exact_s") or 0.0), 2),
                        "same_billing": same,
                        "notes": [n for n in reply.get("notes", []) if "exact" in n],
                        "reference_s": round(entry.get("seconds") or 0.0, 1),
                    }
                except Exception as exc:  # noqa: BLE001 - reported
                    row = {"error": f"{type(exc).__name__}: {str(exc)[:200]}"}
                rows.append({"task": task.id, "side": side, "axes": axes, **row})
                print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    print(json.dumps(rows, indent=1))


EXTRA: list[tuple[str, str]] = []  # (task id, candidate path) from --extra

if __name__ == "__main__":
    args, rest = sys.argv[1:], []
    while args:
        arg = args.pop(0)
        if arg == "--extra" and args:
            task_id, _, path = args.pop(0).partition("=")
            EXTRA.append((task_id, path))
        elif arg != "--billing":
            rest.append(arg)
    main(rest, "--billing" in sys.argv[1:])
