"""Regions of finished and dead candidates on the device (issue 20): a `train` batch of N
candidates of a task with gigabytes of inputs per correctness region (decode_paged_gqa's KV
cache), then a batch with candidates that exit, segfault, hang or get flagged mid-correctness,
each recorded per candidate (status, failed stage, each stage's status and message, whether it
was an infrastructure error) with what each slot's trusted worker held after every candidate
and its peak GPU memory (torch.cuda.max_memory_allocated in the trusted worker, from its
`regions` op: the batch's trusted_regions.jsonl).

    PYTHONPATH=. python3 bench/regions_batch.py --device cuda:0 --out $OUT
    PYTHONPATH=. python3 bench/regions_batch.py --device cpu --task elementwise/rope --candidates 4 --out /tmp/r

Writes OUT/regions.json and prints one line per candidate and per slot.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from batch_rewards import variants, write

from core.evaluation.evaluator import Evaluator
from core.model.result import Result
from core.model.task import Limits
from core.tasks.discovery import discover

# Appended to the starter: its worker's second call (the first correctness run; the first
# call is the compile stage's) ends as named, after the trusted worker wrote its region.
SECOND_CALL = """

_run_kept = run
_calls = [0]


def run(*args):
    _calls[0] += 1
    if _calls[0] == 2:
        {action}
    return _run_kept(*args)
"""
DYING = {
    "exits": "import os; os._exit(3)",
    "segfaults": "import ctypes; ctypes.string_at(0)",
    "hangs": "import time; time.sleep(3600)",
    "flagged": "import torch; torch.allclose = lambda *a, **k: True",
}


def per_candidate(names: list[str], results: list[Result]) -> list[dict[str, Any]]:
    rows = []
    for name, r in zip(names, results):
        rows.append(
            {
                "name": name,
                "status": r.status,
                "failed_stage": r.failed_stage,
                "infrastructure": r.status == "infrastructure_error",
                "speedup": r.speedup,
                "flags": r.integrity_flags,
                "stages": {
                    s.name: {
                        "status": s.status,
                        "seconds": round(s.seconds or 0.0, 3),
                        "message": (s.message or "")[:300],
                    }
                    for s in r.stages
                },
            }
        )
    return rows


def trusted_side(work: Path) -> dict[str, Any]:
    """Per slot: its peak GPU memory, what it held after each candidate, and whether any
    line shows a finished candidate's region still held."""
    lines = [
        json.loads(line)
        for log in work.rglob("trusted_regions.jsonl")
        for line in log.read_text().splitlines()
    ]
    slots: dict[int, dict[str, Any]] = {}
    leaks = []
    for line in lines:
        slot = slots.setdefault(
            int(line.get("slot", 0)), {"peak_bytes": 0, "after": [], "freed_dead": 0}
        )
        cuda = line.get("cuda") or {}
        slot["peak_bytes"] = max(slot["peak_bytes"], int(cuda.get("max_allocated") or 0))
        slot["freed_dead"] = max(slot["freed_dead"], int(line.get("freed_dead") or 0))
        held = {**line.get("regions", {}), **line.get("orphans", {})}
        slot["after"].append(
            {
                "member": line["member"],
                "phase": line["phase"],
                "held_bytes": sum(held.values()),
                "allocated": cuda.get("allocated"),
            }
        )
        mine = (f"member{line['member']}:", f"alone{line['member']}:")
        if any(k.startswith(mine) for k in held):
            leaks.append(line)
    return {"slots": slots, "lines": len(lines), "leaks": leaks}


async def one_batch(
    device: str,
    task: Any,
    cands: list[tuple[str, str]],
    out: Path,
    label: str,
    limits: Limits | None,
) -> dict[str, Any]:
    paths = write(out / label / "candidates", cands)
    work = out / label / "work"
    t0 = time.monotonic()
    with Evaluator(device, workdir=work) as ev:
        results = await ev.aevaluate_batch(task, paths, seed=7, profile="train", limits=limits)
    wall = time.monotonic() - t0
    rows = per_candidate([n for n, _ in cands], results)
    report = {
        "task": task.id,
        "candidates": len(cands),
        "wall_s": round(wall, 2),
        "infrastructure_errors": sum(r["infrastructure"] for r in rows),
        "per_candidate": rows,
        "trusted": trusted_side(work),
    }
    print(f"== {label}: {len(cands)} in {wall:.1f} s, infra {report['infrastructure_errors']}")
    for r in rows:
        bad = r["stages"].get(r["failed_stage"] or "", {})
        print(
            f"  {r['name']:<28} {r['status']:<22} {r['failed_stage'] or '':<14} {bad.get('status', '')} {bad.get('message', '')[:120]}"
        )
    for n, slot in sorted(report["trusted"]["slots"].items()):
        held = [a["held_bytes"] for a in slot["after"]]
        print(
            f"  slot {n}: peak {slot['peak_bytes'] / 2**30:.2f} GiB, freed for dead {slot['freed_dead']}, held after each candidate {held}"
        )
    print(f"  finished candidates' regions still held: {len(report['trusted']['leaks'])}")
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--task", default="attention/decode_paged_gqa")
    parser.add_argument("--candidates", type=int, default=16)
    parser.add_argument("--phases", default="train,dying")
    parser.add_argument(
        "--correctness-s",
        type=float,
        default=30.0,
        help="the dying batch's correctness limit (the hanging candidate ends there, twice: "
        "once in the batch, once re-run alone)",
    )
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    task = next(t for t in discover() if t.id == args.task)
    report: dict[str, Any] = {"device": args.device}
    phases = args.phases.split(",")
    if "train" in phases:
        report["train"] = asyncio.run(
            one_batch(args.device, task, variants(task, args.candidates), args.out, "train", None)
        )
        (args.out / "regions.json").write_text(json.dumps(report, indent=1, default=str))
    if "dying" in phases:
        starter = task.file("starter.py").read_text()
        made = variants(task, 4)  # the starter, the broken one, a slow one, a tile variant
        cands = (
            made[:1]
            + [
                (name, starter + SECOND_CALL.format(action=action))
                for name, action in DYING.items()
            ]
            + made[1:]
        )
        limits = Limits(compile_s=120.0, correctness_s=args.correctness_s, performance_s=120.0)
        report["dying"] = asyncio.run(
            one_batch(args.device, task, cands, args.out, "dying", limits)
        )
        (args.out / "regions.json").write_text(json.dumps(report, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
