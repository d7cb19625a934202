"""The published-kernel candidates of bench/published/ one at a time on a device, through the
public API (`Arena([device]).aevaluate`, sandboxed), each task's starter beside them: the
speedup of each and of each workload, written to `--out` as JSON and printed as a table
(docs/simulation.md, "Published kernels a policy would copy").

    PYTHONPATH=. python3 bench/published_on_sim.py --device sim:h200 --out /tmp/pub_sim.json
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

# each task's candidates in bench/published/ (README.md there says which library each follows)
CANDIDATES = {
    "elementwise/rope": ["rope_unsloth.py", "rope_flaggems.py"],
    "gemm/bf16_gemm": ["gemm_tutorial.py", "gemm_flaggems.py", "gemm_persistent.py"],
    "moe/route_topk_softmax": ["topk_vllm.py", "topk_rows.py"],
}


async def measure(device: str, profile: str) -> list[dict[str, Any]]:
    from core.rl.session import Arena
    from core.tasks.discovery import find_task

    rows = []
    async with Arena([device]) as arena:
        for task_id, files in CANDIDATES.items():
            task = find_task(task_id)
            named = [("starter", task.file("starter.py"))] + [
                (f, ROOT / "bench" / "published" / f) for f in files
            ]
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
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    rows = asyncio.run(measure(args.device, args.profile))
    args.out.write_text(
        json.dumps({"device": args.device, "profile": args.profile, "rows": rows}, indent=1)
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
