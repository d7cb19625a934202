"""Every multi-rank task (comm/, moe/dispatch, moe/combine, …) on one host's GPUs, in one call:
each task's baseline and starter at every world size the task supports and the host has,
with bus bandwidth against the nccl-tests formula and the link's speed (docs/collectives.md).

    PYTHONPATH=. python3 bench/comm_gpu.py --gpus 8 --out $OUT          # device groups cuda:0-1 … cuda:0-7
    PYTHONPATH=. python3 bench/comm_gpu.py --gpus 1 --out $OUT          # one GPU: worlds of 1 (the NCCL set-up path)
    PYTHONPATH=. python3 bench/comm_gpu.py --device cpu --out /tmp/c    # the same on gloo (plumbing only)

NVLink multicast stays off (NCCL_NVLS_ENABLE=0, TORCH_SYMM_MEM_DISABLE_MULTICAST=1,
NVSHMEM_DISABLE_NVLS=1), as the lent machines require. Writes comm_gpu.json after every
evaluation (a run cut short keeps what it measured) and comm_gpu.md, the table for
docs/performance.md. Exits 1 if a baseline or a starter failed or was flagged.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

MULTICAST_OFF = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}
os.environ.update(MULTICAST_OFF)  # before any harness starts: it inherits them

from core.evaluation.evaluator import Evaluator
from core.tasks.discovery import discover


def worlds(
    sizes: tuple[int, ...], device: str, gpus: int, asked: list[int] | None
) -> list[tuple[str, int]]:
    """(device id, world size) pairs to run: every supported size the host can hold."""
    if device == "cpu":
        return [("cpu", n) for n in sizes if n <= 4 and (not asked or n in asked)]
    return [
        (f"cuda:0-{n - 1}" if n > 1 else "cuda:0", n)
        for n in sizes
        if n <= gpus and (not asked or n in asked)
    ]


def row(task_id: str, role: str, device: str, world: int, result) -> list[dict]:
    rows = []
    for w in result.workloads:
        bw = w.bandwidth or {}
        rows.append(
            {
                "task": task_id,
                "role": role,
                "device": device,
                "world": world,
                "workload": w.label,
                "hidden": w.hidden,
                "candidate_us": w.candidate.get("median_us"),
                "candidate_spread": w.candidate.get("spread"),
                "baseline_us": w.baseline.get("median_us"),
                "rank_medians_us": w.candidate.get("rank_medians_us"),
                "size_bytes": bw.get("size_bytes"),
                "busbw_gbps": bw.get("candidate_busbw_gbps"),
                "baseline_busbw_gbps": bw.get("baseline_busbw_gbps"),
                "link_gbps": bw.get("link_gbps"),
                "sol": w.sol_fraction,
            }
        )
    return rows


def table(rows: list[dict]) -> str:
    lines = [
        "| task | file | W | workload | S (MiB) | time (µs) | spread | busbw (GB/s) | link (GB/s) | busbw / link | baseline (µs) |",
        "| --- | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        if r["hidden"]:
            continue
        frac = (
            f"{r['busbw_gbps'] / r['link_gbps'] * 100:.1f}%"
            if r["busbw_gbps"] and r["link_gbps"]
            else "–"
        )
        lines.append(
            f"| {r['task']} | {r['role']} | {r['world']} | {r['workload']} | {(r['size_bytes'] or 0) / 2**20:.2f} | "
            f"{r['candidate_us']:.1f} | ±{(r['candidate_spread'] or 0) * 100:.1f}% | {r['busbw_gbps'] or 0:.3g} | "
            f"{r['link_gbps'] or '–'} | {frac} | {r['baseline_us']:.1f} |"
        )
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument(
        "--gpus", type=int, default=1, help="GPUs on this host (cuda): world sizes up to this many"
    )
    parser.add_argument("--world-sizes", type=int, nargs="*", help="only these world sizes")
    parser.add_argument("--tasks", nargs="*", help="task ids (default: every multi-rank task)")
    parser.add_argument(
        "--roles", nargs="+", default=["baseline", "starter"], choices=["baseline", "starter"]
    )
    parser.add_argument("--out", type=Path, default=Path("."))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    tasks = [t for t in discover() if t.multi_rank and (not args.tasks or t.id in args.tasks)]
    rows: list[dict] = []
    failures: list[str] = []
    meta = {
        "env": MULTICAST_OFF,
        "started": time.strftime("%Y-%m-%d %H:%M:%S"),
        "command": " ".join(sys.argv),
    }
    plan = [
        (t, dev, n)
        for t in tasks
        for dev, n in worlds(t.world_size.sizes, args.device, args.gpus, args.world_sizes)
    ]  # type: ignore[union-attr]
    print(f"{len(plan)} task × world pairs, {len(args.roles)} file(s) each", flush=True)
    evaluators: dict[str, Evaluator] = {}
    try:
        for i, (task, dev, n) in enumerate(plan, 1):
            evaluator = evaluators.get(dev) or evaluators.setdefault(dev, Evaluator(dev))
            meta.setdefault("devices", {})[dev] = {
                **evaluator.info.to_json(),
                "versions": evaluator.info.versions,
            }
            for role in args.roles:
                t0 = time.monotonic()
                result = evaluator.evaluate(task, task.file(f"{role}.py"), world_size=n)
                status = result.status + (
                    f" at {result.failed_stage}" if result.failed_stage else ""
                )
                print(
                    f"[{i}/{len(plan)}] {task.id} {role} W={n} on {dev}: {status} ({time.monotonic() - t0:.0f} s)",
                    flush=True,
                )
                if result.status != "passed" or result.integrity_flags or result.review_notes:
                    stage = result.stage(result.failed_stage) if result.failed_stage else None
                    failures.append(
                        f"{task.id} {role} W={n}: {status}: {(stage.message if stage else '') or result.integrity_flags or result.review_notes}"
                    )
                rows += row(task.id, role, dev, n, result)
                (args.out / "comm_gpu.json").write_text(
                    json.dumps({**meta, "rows": rows, "failures": failures}, indent=1)
                )
    finally:
        for evaluator in evaluators.values():
            evaluator.close()
    (args.out / "comm_gpu.md").write_text(table(rows))
    print(table(rows))
    for line in failures:
        print("FAILED:", line)
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
