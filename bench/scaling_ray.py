"""Throughput of the Ray backend against the number of CPU worker nodes of a local cluster.

    PYTHONPATH=. python3 bench/scaling_ray.py                       # N = 1, 2 worker nodes
    PYTHONPATH=. python3 bench/scaling_ray.py --nodes 1 2 4 --jobs 8 --json bench/results/cpu_ray_scaling.json

One `ray.cluster_utils.Cluster` on this machine: a head node with no CPUs (it schedules
nothing) and worker nodes of one CPU each, added one at a time. For each N, `--jobs` evaluations
of one task's starter go through `core.rl.arena.evaluate_many(..., devices=["ray:cpu"])`: one slot
per worker node, each evaluation a Ray task that starts a fresh harness on its node. A warm-up
evaluation first (the probe, the workers' start-up) is not timed. `--local` also times the same
batch on this machine's `cpu` device with N slots (one warm harness per slot), the reference
the Ray figures are read against. The whole bench stops adding N past `--budget-s`.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from core.evaluation.job import Timing
from core.rl import arena as rl

SHORT = Timing(
    alternations=1, budget_ms=50.0, min_calls=1, max_calls=5
)  # evaluation cost, not timing, is measured


def batch(
    args: argparse.Namespace, devices: list[str], cpu_slots: int | None = None
) -> tuple[float, int]:
    requests = [(args.task, _starter(args.task))] * args.jobs
    t0 = time.perf_counter()
    results = rl.evaluate_many(requests, devices=devices, cpu_slots=cpu_slots, timing=SHORT)
    return time.perf_counter() - t0, sum(r.result.passed for r in results)


def _starter(task_id: str) -> str:
    from core.tasks.discovery import find_task

    return find_task(task_id).file("starter.py").read_text()


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--nodes", type=int, nargs="+", default=[1, 2], help="worker-node counts, ascending"
    )
    parser.add_argument("--jobs", type=int, default=4, help="evaluations per batch")
    parser.add_argument("--task", default="activation/silu_mul")
    parser.add_argument(
        "--local",
        action="store_true",
        help="also time the batch on the local cpu device with N slots",
    )
    parser.add_argument(
        "--budget-s", type=float, default=600.0, help="stop adding N past this many seconds"
    )
    parser.add_argument("--json", type=Path, help="write the rows here")
    args = parser.parse_args()

    import ray
    from ray.cluster_utils import Cluster

    started = time.perf_counter()
    rows = []
    cluster = Cluster(
        initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False}
    )
    ray.init(address=cluster.address, log_to_driver=False, logging_level="ERROR")
    try:
        for n in sorted(args.nodes):
            if time.perf_counter() - started > args.budget_s:
                print(f"stopping before N={n}: past the {args.budget_s:.0f} s budget", flush=True)
                break
            while len([x for x in ray.nodes() if x["Alive"] and x["Resources"].get("CPU")]) < n:
                cluster.add_node(num_cpus=1)
            cluster.wait_for_nodes()
            rl.evaluate_many(
                [(args.task, _starter(args.task))], devices=["ray:cpu"], timing=SHORT
            )  # warm-up
            seconds, passed = batch(args, ["ray:cpu"])
            row = {
                "backend": "ray:cpu",
                "workers": n,
                "jobs": args.jobs,
                "passed": passed,
                "seconds": round(seconds, 2),
                "evals_per_min": round(60 * args.jobs / seconds, 2),
            }
            if args.local:
                local_s, local_passed = batch(args, ["cpu"], cpu_slots=n)
                row.update(
                    local_seconds=round(local_s, 2),
                    local_evals_per_min=round(60 * args.jobs / local_s, 2),
                    local_passed=local_passed,
                )
            rows.append(row)
            print(json.dumps(row), flush=True)
    finally:
        ray.shutdown()
        cluster.shutdown()
    if rows:
        base = rows[0]["evals_per_min"] / rows[0]["workers"]
        for row in rows:
            row["ratio_to_linear"] = round(row["evals_per_min"] / (base * row["workers"]), 2)
    if args.json:
        args.json.write_text(
            json.dumps({"command": " ".join(sys.argv), "task": args.task, "rows": rows}, indent=2)
            + "\n"
        )
    for row in rows:
        print(
            f"N={row['workers']}: {row['evals_per_min']:.1f} evaluations/min ({row['ratio_to_linear']:.2f} of linear)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
