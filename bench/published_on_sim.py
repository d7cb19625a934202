"""The published-kernel candidates of bench/published/ one at a time on a device, through the
public API (`Arena([device]).aevaluate`, sandboxed), each task's starter beside them: the
speedup of each and of each workload, written to `--out` as JSON and printed as a table
(docs/simulation.md, "Published kernels a policy would copy").

    PYTHONPATH=. python3 bench/published_on_sim.py --device sim:h200 --out /tmp/pub_sim.json \
        --tasks elementwise/rope gemm/bf16_gemm moe/route_topk_softmax
    PYTHONPATH=. python3 bench/published_on_sim.py --set sim_published --out /tmp/held_out.json

`--set sim_published` takes bench/sim_published/'s kernels instead (the held-out set, whose
counts bench/sim_heldout.py takes without exact programs: here each runs as a user's candidate
does, exact programs and their twins included).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(1, str(ROOT / "bench"))

# each task's published kernels, as the batches of bench/published_batches.py hold them
from published_batches import KERNELS


def held_out_set() -> dict[str, list[tuple[str, Path]]]:
    """bench/sim_published/'s kernels (the set `sim:h200` is validated on), by task."""
    from sim_published import KERNELS as CATALOGUE

    found: dict[str, list[tuple[str, Path]]] = {}
    for k in CATALOGUE:
        found.setdefault(k.task, []).append(
            (k.name, ROOT / "bench" / "sim_published" / f"{k.name}.py")
        )
    return found


async def measure(
    device: str, profile: str, tasks: list[str], catalogue: dict[str, list[tuple[str, Path]]]
) -> list[dict[str, Any]]:
    from core.rl.session import Arena
    from core.tasks.discovery import find_task

    rows = []
    async with Arena([device]) as arena:
        for task_id in tasks:
            task = find_task(task_id)
            named = [("starter", task.file("starter.py"))] + catalogue[task_id]
            for name, path in named:
                result = (await arena.aevaluate(task_id, path.read_text(), profile=profile)).result
                failed = next(
                    (s for s in result.stages if s.status not in ("passed", "skipped")), None
                )
                row = {
                    "task": task_id,
                    "candidate": name,
                    "status": result.status,
                    "speedup": result.speedup,
                    "workloads": {w.label: w.speedup for w in result.workloads},
                    "message": (failed.message or "")[:300] if failed else None,
                }
                rows.append(row)
                shown = f"{row['speedup']:.3f}" if row["speedup"] else row["status"]
                print(f"{task_id:24s} {name:20s} {shown}", flush=True)
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="sim:h200")
    ap.add_argument("--profile", default="train")
    ap.add_argument(
        "--set",
        choices=("published", "sim_published"),
        default="published",
        help="bench/published/ (the GPU batches' candidates) or bench/sim_published/ (the "
        "held-out set)",
    )
    ap.add_argument("--tasks", nargs="+", help="these tasks only (default: every task of the set)")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    catalogue = (
        held_out_set()
        if args.set == "sim_published"
        else {t: [(n, p) for n, p, _edit in kernels] for t, kernels in KERNELS.items()}
    )
    tasks = args.tasks or sorted(catalogue)
    unknown = sorted(set(tasks) - set(catalogue))
    if unknown:
        ap.error(f"--tasks: {', '.join(unknown)} has no kernel in bench/{args.set}/")
    rows = asyncio.run(measure(args.device, args.profile, tasks, catalogue))
    args.out.write_text(
        json.dumps(
            {"device": args.device, "profile": args.profile, "set": args.set, "rows": rows},
            indent=1,
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
