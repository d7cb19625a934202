"""Imported tasks on a GPU, in one device call: a sample of converted KernelBench problems
(levels 1, 2 and 3) and of AgentKernelArena tasks (converted and external), each evaluated with
its own source (expected: passed, about 1.00x) and with a wrong candidate (expected: failed).

    PYTHONPATH=. python3 bench/interop_gpu.py --kb-dir .kbtasks --aka-dir .akatasks --out $OUT
    python3 bench/interop_gpu.py --table $OUT/interop_gpu.json     # the docs table again, on the CPU

The candidates are made from the imported task folders, as a user of the other benchmark holds
them, and go through the task's adapter (core/evaluation/adapter.py):

- KernelBench `own`: the problem's Model as a `ModelNew` file (the module, Model renamed);
  `wrong`: the same with its output x 1.001 + 1e-3: outside KernelBench's fp32 tolerance
  (atol = rtol = 1e-4) at every magnitude (x 1.001 alone stayed inside it for LeNet-5's small
  logits on the H200, 2026-12-02);
  `own` against `torch_compile`: the same file timed against KernelBench's compile baseline;
- AgentKernelArena converted `own`: the task's source file as it ships (baseline.py before its
  arena entry); `wrong`: the same with the entry's outputs changed (x 1.01 + 0.01, or + 1);
- AgentKernelArena external `own`: the editable file as shipped (starter.py); `wrong`: the same
  with the entry's returned tensor changed; judged by the task's own commands and rules.

Writes interop_gpu.json (every record, rewritten after each evaluation: a call cut short keeps
what it finished) and interop_gpu.md under --out.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
import time
import traceback
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# (which folder, task id, candidate, baseline_impl); the order is the order of importance.
PLAN: list[tuple[str, str, str, str | None]] = [
    ("kb", "kernelbench/l2_001_conv2d_relu_biasadd", "own", None),
    ("kb", "kernelbench/l2_001_conv2d_relu_biasadd", "wrong", None),
    ("aka", "agentkernelarena/vllm_gather_block_tables", "own", None),
    ("aka", "agentkernelarena/vllm_gather_block_tables", "wrong", None),
    ("aka", "agentkernelarena/vllm_bmm", "own", None),
    ("aka", "agentkernelarena/vllm_bmm", "wrong", None),
    ("kb", "kernelbench/l1_001_square_matrix_multiplication", "own", None),
    ("kb", "kernelbench/l1_001_square_matrix_multiplication", "wrong", None),
    ("kb", "kernelbench/l3_004_lenet5", "own", None),
    ("kb", "kernelbench/l3_004_lenet5", "wrong", None),
    ("aka", "agentkernelarena/vllm_pack_seq", "own", None),
    ("aka", "agentkernelarena/vllm_pack_seq", "wrong", None),
    ("kb", "kernelbench/l2_001_conv2d_relu_biasadd", "own", "torch_compile"),
]

ARENA_ENTRY = "\n# --- arena entry, written by `arena import"


def kb_candidate(folder: Path, wrong: bool) -> str:
    """The problem's module with Model renamed ModelNew (what a KernelBench user writes when the
    kernel is PyTorch's own); `wrong` changes its output by 0.001 x |out| + 0.001, which no
    element passes: |d| > atol + rtol |out| for atol = rtol = 1e-4 (KernelBench's fp32)."""
    source = (folder / "starter.py").read_text().split(ARENA_ENTRY, 1)[0]
    text = re.sub(r"\bModel\b", "ModelNew", source)
    if wrong:
        text += (
            "\n\n_arena_forward = ModelNew.forward\n\n\n"
            "def _arena_wrong(self, *args):\n"
            "    out = _arena_forward(self, *args)\n"
            "    bump = lambda o: o + (o.abs() + 1) * 1e-3 * o.sign()  # away from zero, same dtype\n"
            "    return tuple(bump(o) for o in out) if isinstance(out, tuple) else bump(out)\n\n\n"
            "ModelNew.forward = _arena_wrong\n"
        )
    return text


_BUMP = """

import torch as _arena_wrong_torch


def _arena_bump(t):
    if t.is_floating_point():
        t.mul_(1.01).add_(0.01)
    elif t.dtype == _arena_wrong_torch.bool:
        t.logical_not_()
    else:
        t.add_(1)
"""


def aka_candidate(folder: Path, wrong: bool) -> str:
    """The task's source file as it ships; `wrong` changes every output of its entry after the
    call (the written argument where it writes in place)."""
    source = (folder / "baseline.py").read_text().split(ARENA_ENTRY, 1)[0]
    if not wrong:
        return source
    tree = ast.parse((folder / "adapter.py").read_text())
    found = {
        t.id: n.value
        for n in tree.body
        if isinstance(n, ast.Assign)
        for t in n.targets
        if isinstance(t, ast.Name)
    }
    entry = ast.literal_eval(found["ADAPTS"])
    outputs = ast.literal_eval(found["_ARENA_OUTPUTS"])
    written = [i for kind, i in outputs if kind == "inplace"]
    return (
        source
        + _BUMP
        + f"""
_arena_entry = {entry}


def {entry}(*args, **kwargs):
    out = _arena_entry(*args, **kwargs)
    values = list(args) + list(kwargs.values())
    for i in {written!r}:
        _arena_bump(values[i])
    if out is not None:
        for o in (out if isinstance(out, (tuple, list)) else [out]):
            if isinstance(o, _arena_wrong_torch.Tensor) and all(o.data_ptr() != values[i].data_ptr() for i in {written!r}):
                _arena_bump(o)
    return out
"""
    )


def external_candidate(folder: Path, wrong: bool) -> str:
    """The editable file as shipped; `wrong` changes the tensor its entry returns (the entry is
    the name the task's runner asserts besides its kernels, as the converted tasks find it)."""
    source = (folder / "starter.py").read_text()
    if not wrong:
        return source
    import yaml

    config = yaml.safe_load((folder / "files" / "config.yaml").read_text()) or {}
    kernels = set(config.get("target_kernel_functions") or [])
    runner = (folder / "files" / "scripts" / "task_runner.py").read_text()
    names = re.findall(r"hasattr\(\w+,\s*[\"'](\w+)[\"']\)", runner)
    entry = next(n for n in names if n not in kernels)
    return (
        source
        + _BUMP
        + f"""
_arena_entry = {entry}


def {entry}(*args, **kwargs):
    out = _arena_entry(*args, **kwargs)
    if isinstance(out, _arena_wrong_torch.Tensor):
        out = out.clone()
        _arena_bump(out)
    return out
"""
    )


def record(task: Any, role: str, impl: str | None, result: Any, seconds: float) -> dict[str, Any]:
    visible = next((w for w in result.workloads if not w.hidden), None)
    stage = result.stage(result.failed_stage) if result.failed_stage else None
    return {
        "task": task.id,
        "kind": "external" if task.external is not None else "converted",
        "candidate": role,
        "baseline_impl_asked": impl,
        "baseline_impl": result.baseline_impl,
        "status": result.status,
        "failed_stage": result.failed_stage,
        "message": (stage.message or "")[:400] if stage else None,
        "integrity_flags": list(result.integrity_flags),
        "review_notes": list(result.review_notes),
        "speedup": result.speedup,
        "sol_fraction": result.sol_fraction,
        "timing_kind": result.timing_kind,
        "visible_baseline_us": visible.baseline.get("median_us") if visible else None,
        "visible_candidate_us": visible.candidate.get("median_us") if visible else None,
        "seconds": round(seconds, 1),
    }


def table(data: dict[str, Any]) -> str:
    device = data.get("device", {})
    lines = [
        f"{device.get('model', '?')}, {data.get('date', '?')}, torch {device.get('versions', {}).get('torch', '?')}; "
        f"profile {data.get('profile', '?')}; {data.get('seconds', 0):.0f} s for {len(data['records'])} evaluations",
        "",
        "| task | kind | candidate | baseline | status | baseline µs (visible) | candidate µs | speedup | s |",
        "| --- | --- | --- | --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for r in data["records"]:
        if r.get("status") in ("passed", "failed", "infrastructure_error"):
            status = r["status"] + (f" ({r['failed_stage']})" if r.get("failed_stage") else "")
        else:
            status = (
                f"error: {(r.get('error') or '').splitlines()[-1][:80] if r.get('error') else '?'}"
            )
        base = r.get("visible_baseline_us")
        cand = r.get("visible_candidate_us")
        speed = f"{r['speedup']:.2f}×" if r.get("status") == "passed" and r.get("speedup") else "–"
        lines.append(
            f"| {r['task']} | {r.get('kind', '?')} | {r['candidate']} | {r.get('baseline_impl') or r.get('baseline_impl_asked') or '–'} | {status} | "
            f"{f'{base:.1f}' if base else '–'} | {f'{cand:.1f}' if cand else '–'} | {speed} | {r.get('seconds', '–')} |"
        )
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--kb-dir", type=Path, default=Path(".kbtasks"))
    parser.add_argument("--aka-dir", type=Path, default=Path(".akatasks"))
    parser.add_argument("--out", type=Path, default=Path("."))
    parser.add_argument(
        "--budget-s", type=float, default=200.0, help="start no evaluation after this many seconds"
    )
    parser.add_argument(
        "--profile",
        default="train",
        choices=("train", "full"),
        help="train (default: one timed workload per regime, to fit a short device call) or full",
    )
    parser.add_argument("--table", type=Path, help="regenerate the table from this JSON and stop")
    parser.add_argument(
        "--items",
        nargs="*",
        metavar="WHERE:TASK:ROLE[:IMPL]",
        help="evaluate these instead of the plan (kb|aka, task id, own|wrong, a baseline name): a CPU trial on fixture tasks",
    )
    args = parser.parse_args()
    if args.table:
        data = json.loads(args.table.read_text())
        print(table(data), end="")
        return 0

    from core.evaluation.evaluator import Evaluator
    from core.tasks.discovery import find_task

    args.out.mkdir(parents=True, exist_ok=True)
    candidates = args.out / "candidates"
    t0 = time.monotonic()
    data: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d"),
        "profile": args.profile,
        "records": [],
    }
    with Evaluator(args.device) as evaluator:
        data["device"] = {**evaluator.info.to_json(), "versions": evaluator.info.versions}
        plan = PLAN
        if args.items:
            plan = [(*i.split(":")[:3], (i.split(":") + [""])[3] or None) for i in args.items]  # type: ignore[misc]
        for where, task_id, role, impl in plan:
            if time.monotonic() - t0 > args.budget_s:
                data["records"].append(
                    {"task": task_id, "candidate": role, "status": "not run (budget)"}
                )
                continue
            start = time.monotonic()
            try:
                task = find_task(task_id, args.kb_dir if where == "kb" else args.aka_dir)
                make = (
                    kb_candidate
                    if where == "kb"
                    else external_candidate
                    if task.external
                    else aka_candidate
                )
                path = (
                    candidates
                    / task_id.replace("/", "__")
                    / role
                    / (
                        "solution.py"
                        if where == "kb" or not task.external
                        else Path(task.external.editable[0]).name
                    )
                )
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(make(task.path, role == "wrong"))
                evaluator.baseline_impl = impl
                result = evaluator.evaluate(task, path, seed=1234, profile=args.profile)
                r = record(task, role, impl, result, time.monotonic() - start)
            except Exception:  # noqa: BLE001 - one broken task must not hide the others
                r = {
                    "task": task_id,
                    "candidate": role,
                    "baseline_impl_asked": impl,
                    "status": "error",
                    "error": traceback.format_exc()[-2000:],
                    "seconds": round(time.monotonic() - start, 1),
                }
            data["records"].append(r)
            data["seconds"] = time.monotonic() - t0
            (args.out / "interop_gpu.json").write_text(json.dumps(data, indent=1, default=str))
            (args.out / "interop_gpu.md").write_text(table(data))
            print(
                f"[{time.monotonic() - t0:6.1f}s] {task_id} {role} {impl or ''}: {r['status']} {r.get('failed_stage') or ''} "
                f"{r.get('speedup') or 0:.2f}x ({r.get('seconds')} s) {(r.get('message') or r.get('error') or '')[-300:]}",
                flush=True,
            )
    print(table(data), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
