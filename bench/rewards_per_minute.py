"""Rewards per minute: how many scored candidates a trainer gets from the arena per minute.

The batch is every bundled task's starter (or the tasks named with --tasks), repeated N
times, sent at once through core.rl.arena.evaluate_many, which spreads it over every slot of the
devices given (the scheduler, a warm harness per slot). The clock runs from the call to the
last result, harness start-up included (a trainer pays it once per run: --warmup excludes it
by scoring one candidate per slot first).

    python bench/rewards_per_minute.py --device cpu --reps 1
    python bench/rewards_per_minute.py --from-records bench/results/h200_tasks.json   # derived from recorded evaluations
    python bench/rewards_per_minute.py --device cuda:0 --reps 5 --json bench/results/h200_rewards.json
    python bench/rewards_per_minute.py --device cuda:0 --device cuda:1 --hosts hosts.yaml --device box1/cuda:0
"""

from __future__ import annotations

import argparse
import asyncio
import fnmatch
import json
import platform
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from arena_tui.wiring import executor_factory
from core.rl.arena import Arena, EvalRequest, RewardedResult
from core.tasks.discovery import discover


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--device", action="append", dest="devices", help="device id, repeatable (default cpu)"
    )
    p.add_argument("--reps", type=int, default=1, help="repetitions of each starter (default 1)")
    p.add_argument(
        "--tasks",
        nargs="*",
        default=["*"],
        help="task ids, families or globs (default: every bundled task)",
    )
    p.add_argument(
        "--cpu-slots", type=int, help="evaluations at once per CPU device (default: half the cores)"
    )
    p.add_argument("--hosts", type=Path, help="hosts file for <host>/<device> devices")
    p.add_argument("--reward", default="default", help="reward function name (default: default)")
    p.add_argument(
        "--visible-only",
        action="store_true",
        help="score the visible workloads only (an episode's turns)",
    )
    p.add_argument(
        "--warmup", action="store_true", help="start every slot's harness before the clock starts"
    )
    p.add_argument("--json", type=Path, help="also write the figures here")
    p.add_argument(
        "--from-records",
        type=Path,
        nargs="+",
        metavar="FILE",
        help="no evaluation: derive one slot's rewards per minute from the per-evaluation seconds that bench/tasks_gpu.py recorded",
    )
    return p.parse_args()


def from_records(paths: list[Path]) -> dict:
    """One slot, evaluations back to back: rewards per minute = evaluations / their summed
    harness seconds. The records are full evaluations (compile, visible and hidden correctness,
    performance) of a task's file as the candidate; the latest record of each task and role
    counts once. Scheduler and start-up overhead are not in them."""
    seconds: dict[tuple[str, str], float] = {}
    device = None
    for path in paths:
        data = json.loads(path.read_text())
        device = device or data.get("device", {}).get("model")
        for record in data["records"]:
            for role in ("baseline", "starter"):
                result = record.get(role) or {}
                if result.get("status") == "passed" and result.get("seconds"):
                    seconds[(record["task"], role)] = float(result["seconds"])
    if not seconds:
        raise SystemExit(f"no passed evaluation with its seconds in {', '.join(map(str, paths))}")
    values = sorted(seconds.values())
    return {
        "source": [str(p) for p in paths],
        "device": device,
        "derived": True,
        "evaluations": len(values),
        "harness_s_median": statistics.median(values),
        "harness_s_min": values[0],
        "harness_s_max": values[-1],
        "rewards_per_minute_one_slot": round(len(values) / sum(values) * 60, 2),
        "per_evaluation": {f"{task} ({role})": s for (task, role), s in sorted(seconds.items())},
    }


async def run(args: argparse.Namespace) -> dict:
    devices = args.devices or ["cpu"]
    tasks = [
        t
        for t in discover()
        if any(t.id == p or t.family == p or fnmatch.fnmatch(t.id, p) for p in args.tasks)
    ]
    if not tasks:
        raise SystemExit(f"no task matches {args.tasks}")
    requests = [
        EvalRequest(t.id, t.file("starter.py").read_text(), visible_only=args.visible_only)
        for _ in range(args.reps)
        for t in tasks
    ]
    async with Arena(
        devices,
        args.reward,
        executor_factory=executor_factory(args.hosts),
        cpu_slots=args.cpu_slots,
    ) as arena:
        warm_s = 0.0
        if args.warmup:
            t0 = time.perf_counter()
            await arena.aevaluate_many(
                [
                    EvalRequest(
                        tasks[0].id, tasks[0].file("starter.py").read_text(), visible_only=True
                    )
                ]
                * len(arena.slots)
            )
            warm_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        done_at: list[float] = []

        async def one(r: EvalRequest) -> RewardedResult:
            rr = await arena.submit(r)
            done_at.append(time.perf_counter() - t0)
            return rr

        results = await asyncio.gather(*(one(r) for r in requests))
        wall = time.perf_counter() - t0
        slots = len(arena.slots)
    per_task: dict[str, list[RewardedResult]] = {}
    for r, rr in zip(requests, results):
        per_task.setdefault(r.task_id, []).append(rr)
    scored = [rr for rr in results if rr.reward is not None]
    return {
        "machine": f"{platform.node()} {platform.processor() or platform.machine()}",
        "python": platform.python_version(),
        "devices": devices,
        "slots": slots,
        "reps": args.reps,
        "tasks": len(tasks),
        "evaluations": len(results),
        "visible_only": args.visible_only,
        "warmup_s": round(warm_s, 2),
        "wall_s": round(wall, 2),
        "rewards_per_minute": round(len(scored) / wall * 60, 2),
        "evaluations_per_minute": round(len(results) / wall * 60, 2),
        "outcomes": dict(Counter(rr.outcome for rr in results)),
        "per_task": {
            tid: {
                "outcome": Counter(rr.outcome for rr in rrs).most_common(1)[0][0],
                "reward_mean": statistics.fmean(
                    [rr.reward for rr in rrs if rr.reward is not None] or [0.0]
                ),
                "harness_s_median": statistics.median([rr.result.seconds or 0.0 for rr in rrs]),
            }
            for tid, rrs in per_task.items()
        },
    }


def main() -> None:
    args = parse()
    if args.from_records:
        figures = from_records(args.from_records)
        print(
            f"derived from {figures['evaluations']} recorded evaluations on {figures['device']}: harness seconds median "
            f"{figures['harness_s_median']:.1f} (min {figures['harness_s_min']:.1f}, max {figures['harness_s_max']:.1f}); "
            f"one slot back to back: {figures['rewards_per_minute_one_slot']:.2f} rewards/min"
        )
        for name, sec in figures["per_evaluation"].items():
            print(f"  {name:<52} {sec:>7.1f} s")
        if args.json:
            args.json.write_text(json.dumps(figures, indent=2))
        return
    figures = asyncio.run(run(args))
    print(
        f"{figures['evaluations']} evaluations ({figures['tasks']} tasks × {figures['reps']}) on {', '.join(figures['devices'])} "
        f"({figures['slots']} slots): {figures['wall_s']:.1f} s, {figures['rewards_per_minute']:.1f} rewards/min"
        + (
            f" (warm-up {figures['warmup_s']:.1f} s not counted)"
            if args.warmup
            else " (harness start-up included)"
        )
    )
    print(f"outcomes: {figures['outcomes']}")
    print(f"{'task':<40} {'outcome':<22} {'reward':>7} {'harness s':>10}")
    for tid, row in figures["per_task"].items():
        print(
            f"{tid:<40} {row['outcome']:<22} {row['reward_mean']:>7.3f} {row['harness_s_median']:>10.1f}"
        )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
