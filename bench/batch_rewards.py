"""Rewards per minute on batches (issue 20): what a trainer gets per GPU from the batch path, in
the `train` and `full` profiles, against one-at-a-time evaluations with the timing protocol of
before (every round, no early stop), on the same candidates and seeds; plus where the seconds
go, the harness's own cost per timed call, and the cheat suite through the batch path.

    PYTHONPATH=. python3 bench/batch_rewards.py --device cuda:0 --out $OUT --budget-s 330
    PYTHONPATH=. python3 bench/batch_rewards.py --device cpu --tasks norm/add_rmsnorm activation/silu_mul --candidates 6 --out /tmp/b

Per task a batch of N candidates is made from its starter (docs/performance.md): the starter, a
copy of it (another sha256, the same code), tile-size and warp variants where the starter has
such constants, "slow" variants (k extra calls on copies of the inputs before the real call, so
in-place tasks stay right), and a broken one (its first output plus one). Phases, each within
its share of `--budget-s` (what did not fit is listed as skipped, never silently dropped):

1. warm: harness start, the starter once (`train`, visible only), then the same again: the
   warm visible-only evaluation an episode's turn costs;
2. `train` batch and 3. `full` batch, through Evaluator.aevaluate_batch;
4. one at a time with the timing of before (`--singles` candidates of each task);
5. the cheat suite of tests/gpu/run_cheats.py, batched per task (`--cheats`);
6. the harness's cost per timed call, by component (refill, L2 flush, event pair, sampled
   output copy, a channel round trip), measured in this process on the device.

Writes OUT/batch_rewards.json (everything) and OUT/batch_rewards.md (the tables).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import platform
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from core.evaluation.evaluator import Evaluator
from core.evaluation.job import Timing, build_job
from core.harness import trace
from core.model.result import Result
from core.model.task import Task
from core.tasks.discovery import discover

TASKS = (
    "gemm/bf16_gemm",
    "norm/add_rmsnorm",
    "activation/silu_mul",
    "elementwise/rope",
    "moe/route_topk_softmax",
    "attention/decode_paged_gqa",
)
# Timing of before: every round runs (no early stop), as the protocol did before issue 20.
BEFORE = {
    "cuda": Timing(alternations=5, budget_ms=100.0, min_calls=3, max_calls=1000),
    "cpu": Timing(alternations=3, budget_ms=500.0, min_calls=1, max_calls=50),
}
# (pattern, replacements) per task: tile sizes and warps of the starter.
KNOBS: dict[str, list[tuple[str, list[str]]]] = {
    "gemm/bf16_gemm": [
        (
            "BLOCK_M, BLOCK_N, BLOCK_K = 32, 32, 32",
            [
                f"BLOCK_M, BLOCK_N, BLOCK_K = {m}, {n}, {k}"
                for m, n, k in (
                    (64, 64, 32),
                    (64, 128, 32),
                    (128, 128, 32),
                    (128, 64, 64),
                    (32, 64, 64),
                    (16, 64, 64),
                    (64, 32, 64),
                    (128, 128, 64),
                    (16, 128, 128),
                )
            ],
        )
    ],
    "norm/add_rmsnorm": [
        ("num_warps=8 if BLOCK >= 4096 else 4", [f"num_warps={w}" for w in (1, 2, 4, 8, 16, 32)])
    ],
    "activation/silu_mul": [
        ("BLOCK = 1024", [f"BLOCK = {b}" for b in (128, 256, 512, 2048, 4096, 8192)])
    ],
    "elementwise/rope": [
        (
            "BLOCK_D=triton.next_power_of_2(half),",
            [f"BLOCK_D=triton.next_power_of_2(half), num_warps={w}," for w in (1, 2, 4, 8, 16)],
        )
    ],
    "moe/route_topk_softmax": [
        ("else 1\n", [f"else {r}\n" for r in (2, 4, 8)]),
        (
            "BLOCK_K=triton.next_power_of_2(top_k),",
            [f"BLOCK_K=triton.next_power_of_2(top_k), num_warps={w}," for w in (1, 2, 8)],
        ),
    ],
    "attention/decode_paged_gqa": [
        (
            'BLOCK_N = 64 if q.device.type != "cpu" else 32',
            [f'BLOCK_N = {b} if q.device.type != "cpu" else 32' for b in (16, 32, 128)],
        ),
        (
            "BLOCK_D=max(16, triton.next_power_of_2(D)),",
            [f"BLOCK_D=max(16, triton.next_power_of_2(D)), num_warps={w}," for w in (1, 2, 8)],
        ),
    ],
}
SLOW = """

import torch as _torch_slow
_run_fast = run


def run(*args):
    for _ in range({k}):  # extra calls on copies of the inputs: k+1 times the work, outputs unchanged
        _run_fast(*[a.clone() if isinstance(a, _torch_slow.Tensor) else a for a in args])
    return _run_fast(*args)
"""
BROKEN = """

_run_right = run


def run(*args):
    out = _run_right(*args)
    (out[0] if isinstance(out, (tuple, list)) else out).add_(1)  # wrong on purpose
    return out
"""


def variants(task: Task, count: int) -> list[tuple[str, str]]:
    """`count` candidates made from the task's starter (names, sources), ordered so that any
    prefix mixes kinds: the starter, the broken one, slow ones, tile and warp variants, a copy."""
    starter = task.file("starter.py").read_text()
    tiles = []
    for pattern, replacements in KNOBS.get(task.id, []):
        if pattern in starter:
            tiles += [
                (
                    f"v{len(tiles) + 1}:" + re.sub(r"[^A-Za-z0-9=,]+", "", r)[-28:],
                    starter.replace(pattern, r, 1),
                )
                for r in replacements
            ]
    slow = [(f"slow-x{k + 1}", starter + SLOW.format(k=k)) for k in range(1, count + 1)]
    rest = [slow[1], ("starter-copy", starter + "\n# the same kernel, another file\n")] + slow[2:]
    made = [("starter", starter), ("broken", starter + BROKEN), slow[0]]
    while len(made) < count and (tiles or rest):
        for pool in (tiles, tiles, rest):  # two tile variants for each slow one or copy
            if pool and len(made) < count:
                made.append(pool.pop(0))
    return made[:count]


def write(folder: Path, cands: list[tuple[str, str]]) -> list[Path]:
    paths = []
    for i, (name, source) in enumerate(cands):
        d = folder / f"{i:02d}-{name}"
        d.mkdir(parents=True, exist_ok=True)
        (d / "candidate.py").write_text(source)
        paths.append(d / "candidate.py")
    return paths


def stages_of(r: Result) -> dict[str, float]:
    return {s.name: round(s.seconds or 0.0, 3) for s in r.stages}


def summary(names: list[str], results: list[Result], wall: float) -> dict[str, Any]:
    rows = []
    for name, r in zip(names, results):
        rows.append(
            {
                "candidate": name,
                "status": r.status,
                "failed_stage": r.failed_stage,
                "speedup": r.speedup,
                "profile": r.profile,
                "seconds": r.seconds,
                "stages": stages_of(r),
                "flags": r.integrity_flags,
                # which worker timed it (core/harness/quiesce.py): kept, or fresh and why
                "timing_worker": next(
                    (st.message for st in r.stages if st.name == "performance"), None
                ),
                "workloads": {
                    w.label: {
                        "speedup": w.speedup,
                        "cand_ci_rel": w.candidate.get("ci_rel"),
                        "base_ci_rel": w.baseline.get("ci_rel"),
                        "rounds": len(w.candidate.get("rounds") or []),
                        "cand_n": w.candidate.get("n"),
                        "mode": w.mode,
                        "untimed_us_per_call": _untimed(w.candidate),
                        "base_untimed_us_per_call": _untimed(w.baseline),
                    }
                    for w in r.workloads
                },
            }
        )
    per_stage = {
        s: round(statistics.median([x["stages"].get(s, 0.0) for x in rows]), 3)
        for s in ("compile", "correctness", "generalization", "performance")
    }
    return {
        "wall_s": round(wall, 2),
        "candidates": len(results),
        "rewards_per_minute": round(len(results) / wall * 60, 2) if wall else None,
        "median_stage_s": per_stage,
        "timed_in_kept_worker": sum(
            1 for x in rows if (x["timing_worker"] or "").startswith("its own worker")
        ),
        "rows": rows,
    }


def _untimed(side: dict[str, Any]) -> float | None:
    """Harness time per timed call that the timer did not see: (round wall − reported) / calls."""
    per = [
        (x["wall_s"] - x["reported_s"]) / x["calls"] * 1e6
        for x in side.get("rounds") or []
        if x.get("calls")
    ]
    return round(statistics.median(per), 1) if per else None


TIE_REL = 0.01  # speedups closer than this are a tie in the fidelity's tau


def kendall_tau(a: list[float], b: list[float], tie_rel: float = 0.0) -> float | None:
    """Kendall's tau-b (ties in either ranking count as neither agreement nor disagreement).
    With `tie_rel`, two values within that relative distance are a tie: the timer resolves
    speedups to about ±1% (timing.ci_target), so two candidates closer than that (the starter
    and its copy: the same kernel) have no order for either path to get right or wrong."""
    n = len(a)
    if n < 2:
        return None

    def diff(x: float, y: float) -> float:
        return 0.0 if abs(x - y) <= tie_rel * max(abs(x), abs(y)) else x - y

    conc = disc = ties_a = ties_b = 0
    for i in range(n):
        for j in range(i + 1, n):
            da, db = diff(a[i], a[j]), diff(b[i], b[j])
            if da == 0 and db == 0:
                continue
            if da == 0:
                ties_a += 1
            elif db == 0:
                ties_b += 1
            elif (da > 0) == (db > 0):
                conc += 1
            else:
                disc += 1
    denom = math.sqrt((conc + disc + ties_a) * (conc + disc + ties_b))
    return (conc - disc) / denom if denom else None


def fidelity(batch: dict[str, Any], singles: dict[str, Any]) -> dict[str, Any]:
    """Each candidate's speedup on the batch path against one at a time (the timing of
    before), on the workloads both timed; candidates that passed both."""
    pairs = []
    by_name = {r["candidate"]: r for r in singles["rows"]}
    for r in batch["rows"]:
        s = by_name.get(r["candidate"])
        if s is None or r["status"] != "passed" or s["status"] != "passed":
            continue
        common = [w for w in r["workloads"] if w in s["workloads"]]
        if not common:
            continue
        gb = math.exp(statistics.fmean(math.log(r["workloads"][w]["speedup"]) for w in common))
        gs = math.exp(statistics.fmean(math.log(s["workloads"][w]["speedup"]) for w in common))
        pairs.append(
            {
                "candidate": r["candidate"],
                "batch": gb,
                "single": gs,
                "ratio": gb / gs,
                "workloads": len(common),
            }
        )
    agree = [
        s["status"] == r["status"]
        for r in batch["rows"]
        for s in singles["rows"]
        if s["candidate"] == r["candidate"]
    ]
    return {
        "pairs": pairs,
        "verdicts_agree": sum(agree),
        "verdicts_compared": len(agree),
        "median_abs_ratio_minus_1": statistics.median([abs(p["ratio"] - 1) for p in pairs])
        if pairs
        else None,
        "kendall_tau": kendall_tau([p["batch"] for p in pairs], [p["single"] for p in pairs]),
        "kendall_tau_ties_1pct": kendall_tau(
            [p["batch"] for p in pairs], [p["single"] for p in pairs], TIE_REL
        ),
    }


def overhead(device: str, task: Task, calls: int = 200) -> dict[str, Any]:
    """Microseconds per timed call of each piece of the harness's loop, on the task's first
    visible workload: measured in this process with the harness's own functions."""
    import socket

    import torch

    from core.devices.device import probe
    from core.harness import channel, inputs, timing

    if not device.startswith("cuda"):
        return {"skipped": "GPU only"}
    dev = torch.device(device)
    torch.cuda.set_device(dev)
    with tempfile.TemporaryDirectory() as tmp:
        job = build_job(task, task.file("starter.py"), probe(device), device, 1, Path(tmp))
    w = job["stages"]["performance"][0]
    fresh = inputs.FreshInputs(
        job["inputs"], {"axes": w["axes"], "shapes": w["shapes"]}, w["seed"], dev, None
    )
    fresh(0)
    flush = timing.flush_buffer(dev)
    ev = timing._Events("cuda")
    out = [a for a in fresh.args or [] if isinstance(a, torch.Tensor)][:1]

    def per_call(fn: Any) -> float:
        fn(0)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for i in range(calls):
            fn(i)
        torch.cuda.synchronize()
        return (time.perf_counter() - t0) / calls * 1e6

    start, end = ev.new(), ev.new()
    a, b = socket.socketpair()

    def rtt(_: int) -> None:
        channel.send(a, {"op": "time", "x": 1})
        channel.recv(b)
        channel.send(b, {"ok": True})
        channel.recv(a)

    figures = {
        "workload": w["label"],
        "refill_us": per_call(lambda i: fresh(i + 1)),
        "l2_flush_us": per_call(lambda i: timing._zero(flush)),
        "flush_bytes": flush.numel() * 4,
        "event_pair_us": per_call(lambda i: (ev.record(start), ev.record(end))),
        "sampled_copy_us": per_call(lambda i: inputs.snapshot(out)),
        "channel_round_trip_us": per_call(rtt),
    }
    return {k: (round(v, 2) if isinstance(v, float) else v) for k, v in figures.items()}


def cheat_suite(device: str, deadline: float, only: list[str] | None = None) -> dict[str, Any]:
    """The cheat suite through the batch path, batched per task: on a GPU the rows of
    tests/gpu/run_cheats.py (its cheats and the fixtures' honest candidates), on the CPU device
    those of tests/cheats/catalogue.py that need no special set-up, with tests/test_cheats.py's
    timing and limits. Every row's expectation is checked on its result in the batch."""
    from core.evaluation import sandbox
    from core.model.task import Limits
    from core.tasks.spec import load_task
    from tests.cheats import catalogue
    from tests.gpu import run_cheats as rc

    gpu = device.startswith("cuda")
    if gpu:
        rows = [r for r in rc.ROWS + rc.honest_rows() if r.task in rc.TASKS]
        timing, limits, hang = None, None, rc.HANG_LIMITS
    else:
        sandboxed = sandbox.is_sandboxed(sandbox.sandbox_status())
        rows = [
            rc.Row(c.file, c.path, c.task, c.expect, c.notes, c.marker, c.defense)
            for c in catalogue.CHEATS
            if c.special is None and (c.expect != "sandbox" or sandboxed)
        ]
        rows += [r for r in rc.honest_rows() if r.task in ("axpy",)]
        timing = Timing(alternations=3, budget_ms=60.0, min_calls=1, max_calls=50)
        limits, hang = (
            Limits(compile_s=30, correctness_s=30, performance_s=30),
            Limits(compile_s=10, correctness_s=3, performance_s=10),
        )
    rows = [r for r in rows if not only or r.task in only]
    groups: dict[tuple[str, bool], list[Any]] = {}
    for r in rows:
        groups.setdefault((r.task, r.name == "infinite_loop"), []).append(r)
    records, skipped = [], []
    with Evaluator(device, timing=timing) as ev:
        for (key, is_hang), members in groups.items():
            if time.monotonic() > deadline:
                skipped += [m.name for m in members]
                continue
            t0 = time.monotonic()
            task = load_task(catalogue.TASKS[key]) if key in catalogue.TASKS else rc._load(key)
            results = asyncio.run(
                ev.aevaluate_batch(
                    task, [m.path for m in members], limits=hang if is_hang else limits
                )
            )
            for m, res in zip(members, results):
                problems = rc.check(m, res)
                records.append(
                    {
                        "name": m.name,
                        "task": key,
                        "expect": m.expect,
                        "status": res.status,
                        "failed_stage": res.failed_stage,
                        "flags": [f.split(":")[0] for f in res.integrity_flags],
                        "ok": not problems,
                        "problems": problems,
                    }
                )
            print(
                f"cheats {key}: {len(members)} in {time.monotonic() - t0:.1f} s, {sum(r['ok'] for r in records[-len(members) :])} as expected",
                flush=True,
            )
    return {
        "rows": records,
        "as_expected": sum(r["ok"] for r in records),
        "total": len(records),
        "skipped": skipped,
    }


def main() -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--device", default="cuda:0")
    p.add_argument("--tasks", nargs="*", default=list(TASKS))
    p.add_argument("--candidates", type=int, default=16)
    p.add_argument(
        "--full-candidates",
        type=int,
        default=16,
        help="candidates in a task's `full` batch (the first ones)",
    )
    p.add_argument(
        "--full-tasks",
        type=int,
        default=6,
        help="tasks (the first ones) that also get the full batch, singles and the before figure",
    )
    p.add_argument(
        "--singles",
        type=int,
        default=6,
        help="candidates per task evaluated one at a time in `full` (fidelity)",
    )
    p.add_argument("--phases", default="train,warm,full,singles,before,overhead,cheats")
    p.add_argument(
        "--budget-s", type=float, default=300.0, help="wall-clock budget of the whole run"
    )
    p.add_argument(
        "--before-all",
        action="store_true",
        help="evaluate every candidate of the first task's full batch alone with the timing of before, not only the starter",
    )
    p.add_argument(
        "--reserve-s",
        type=float,
        default=50.0,
        help="kept, while sizing a train batch, for the task's full batch and singles",
    )
    p.add_argument(
        "--cheat-tasks",
        nargs="*",
        help="only the cheat rows of these fixture tasks (axpy, axpy_gpu, bf16_gemm, ...)",
    )
    p.add_argument("--cheats-s", type=float, default=60.0, help="of it, kept for the cheat suite")
    p.add_argument(
        "--trace",
        action="store_true",
        help="turn the harness's trace on (core/harness/trace.py): each batch's seconds per worker op",
    )
    p.add_argument("--seed", type=int, default=20261201)
    p.add_argument(
        "--concurrency",
        default="auto",
        help="slots of a batch's untimed stages (ARENA_BATCH_CONCURRENCY): a number, or auto",
    )
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args()
    if args.trace:  # read by the engine as it starts each harness
        os.environ[trace.ENV] = "1"
    args.out.mkdir(parents=True, exist_ok=True)
    os.environ["ARENA_BATCH_CONCURRENCY"] = str(args.concurrency)
    phases = args.phases.split(",")
    start = time.monotonic()
    end = start + args.budget_s
    tasks = {t.id: t for t in discover()}
    chosen = [tasks[t] for t in args.tasks]
    kind = "cuda" if args.device.startswith("cuda") else "cpu"
    report: dict[str, Any] = {
        "device": args.device,
        "machine": f"{platform.node()} {platform.processor() or platform.machine()}",
        "python": platform.python_version(),
        "command": " ".join(sys.argv),
        "tasks": {},
        "skipped": [],
    }
    tmp = Path(tempfile.mkdtemp(prefix="batch-bench-"))

    def save() -> None:
        (args.out / "batch_rewards.json").write_text(json.dumps(report, indent=1, default=str))

    made = {}
    for task in chosen:
        cands = variants(task, args.candidates)
        made[task.id] = ([name for name, _ in cands], write(tmp / task.id.replace("/", "_"), cands))
        report["tasks"][task.id] = {"candidates": made[task.id][0]}
    cut = end - args.cheats_s  # the tasks' phases stop here; the cheat suite has the rest

    def fits(what: str, need_s: float = 0.0) -> bool:
        if time.monotonic() + need_s > cut:
            report["skipped"].append(what)
            print(f"skipped (out of budget): {what}", flush=True)
            return False
        return True

    def batch_phase(
        ev: Evaluator,
        task: Task,
        phase: str,
        count: int,
        key: str | None = None,
        slots: str | None = None,
    ) -> None:
        names, paths = made[task.id]
        entry = report["tasks"][task.id]
        t0 = time.monotonic()
        os.environ["ARENA_BATCH_CONCURRENCY"] = slots or str(args.concurrency)
        try:
            results = asyncio.run(
                ev.aevaluate_batch(task, paths[:count], seed=args.seed, profile=phase)
            )
        finally:
            os.environ["ARENA_BATCH_CONCURRENCY"] = str(args.concurrency)
        phase = key or phase
        entry[phase] = summary(names[:count], results, time.monotonic() - t0)
        if args.trace:  # seconds per worker op and parent request, summed over the batch's slots
            spent = trace.totals(ev.root / trace.FILE_NAME, t0, time.monotonic())
            entry[phase]["trace_s"] = {
                k: round(v, 3) for k, v in sorted(spent.items(), key=lambda kv: -kv[1])[:30]
            }
        entry[phase]["concurrency"] = slots or str(args.concurrency)
        print(
            f"{task.id}: {phase} batch of {count}: {entry[phase]['wall_s']:.1f} s, {entry[phase]['rewards_per_minute']:.1f} rewards/min, {entry[phase]['timed_in_kept_worker']} timed in kept workers, "
            f"stages {entry[phase]['median_stage_s']}, {''.join(r.status[0] for r in results)}",
            flush=True,
        )
        save()

    with Evaluator(args.device) as ev, Evaluator(args.device, timing=BEFORE[kind]) as before:
        import torch

        report["versions"] = {"torch": torch.__version__}
        per_candidate = [3.0]  # seconds per candidate in a train batch, the latest measured
        for n, task in enumerate(chosen):
            entry = report["tasks"][task.id]
            names, paths = made[task.id]
            # `train`: as many candidates as the budget still allows (all of them, if it can).
            count = min(
                args.candidates,
                int(
                    (cut - time.monotonic() - args.reserve_s * (n < args.full_tasks))
                    / per_candidate[-1]
                ),
            )
            if "train" in phases and count >= 4:
                if count < args.candidates:
                    report["skipped"].append(
                        f"{task.id}: train batch cut to {count} of {args.candidates} candidates (budget)"
                    )
                batch_phase(ev, task, "train", count)
                per_candidate.append(entry["train"]["wall_s"] / count)
            elif "train" in phases:
                fits(f"{task.id}: train batch", 1e9)
            if (
                n == 0
                and "train_seq" in phases
                and fits(
                    f"{task.id}: train batch one candidate at a time (before the concurrent phase)",
                    30,
                )
            ):
                batch_phase(
                    ev, task, "train", min(count, args.candidates), key="train_seq", slots="1"
                )
            if "warm" in phases and fits(f"{task.id}: warm visible-only evaluation"):
                t0 = time.monotonic()
                one = asyncio.run(
                    ev.aevaluate(task, paths[0], seed=args.seed, visible_only=True, profile="train")
                )
                entry["warm"] = {
                    "visible_only_warm_s": round(time.monotonic() - t0, 2),
                    "status": one.status,
                    "stages": stages_of(one),
                }
                print(
                    f"{task.id}: visible-only train evaluation, warm: {time.monotonic() - t0:.1f} s ({one.status})",
                    flush=True,
                )
            if n >= args.full_tasks:
                continue
            # The first --full-tasks tasks: the `full` batch, one at a time in `full` (fidelity),
            # and (the first task) the starter with the timing of before.
            if "full" in phases and fits(f"{task.id}: full batch"):
                batch_phase(ev, task, "full", min(args.full_candidates, len(paths)))
            if "singles" in phases and fits(f"{task.id}: one at a time", 20):
                m, k = min(args.full_candidates, len(paths)), min(args.singles, len(paths))
                pick = sorted(
                    {round(i * (m - 1) / max(k - 1, 1)) for i in range(k)}
                )  # spread over the list: tiles and slow ones
                t0 = time.monotonic()
                results = [
                    ev.evaluate(task, paths[i], seed=args.seed, profile="full") for i in pick
                ]
                entry["singles_full"] = summary(
                    [names[i] for i in pick], results, time.monotonic() - t0
                )
                for phase in ("train", "full"):
                    if phase in entry:
                        entry[f"fidelity_{phase}"] = fidelity(entry[phase], entry["singles_full"])
                print(
                    f"{task.id}: {len(pick)} one at a time (full): {entry['singles_full']['wall_s']:.1f} s; fidelity "
                    f"{ {k: (v['median_abs_ratio_minus_1'], v['kendall_tau']) for k, v in entry.items() if k.startswith('fidelity')} }",
                    flush=True,
                )
                save()
            if (
                n == 0
                and "before" in phases
                and fits(f"{task.id}: the starter with the timing of before", 15)
            ):
                many = (
                    min(args.full_candidates, len(paths)) if args.before_all else 1
                )  # the full batch's candidates, or the starter
                t0 = time.monotonic()
                rs = [
                    before.evaluate(task, p, seed=args.seed, profile="full") for p in paths[:many]
                ]
                entry["before"] = summary(names[:many], rs, time.monotonic() - t0)
                print(
                    f"{task.id}: {len(rs)} alone, timing of before: {entry['before']['wall_s']:.1f} s, stages {entry['before']['median_stage_s']}",
                    flush=True,
                )
                save()
    if "overhead" in phases:
        try:
            report["overhead"] = {t.id: overhead(args.device, t) for t in chosen[:3]}
        except Exception as exc:  # noqa: BLE001 - a figure missing is reported, the rest kept
            report["overhead"] = {"error": f"{type(exc).__name__}: {exc}"}
        print(f"overhead per call: {report['overhead']}", flush=True)
    if "cheats" in phases:
        report["cheats"] = cheat_suite(
            args.device, max(end, time.monotonic() + 20), args.cheat_tasks
        )
        print(
            f"cheats through the batch path: {report['cheats']['as_expected']} of {report['cheats']['total']} as expected; "
            f"skipped {report['cheats']['skipped']}",
            flush=True,
        )
    report["wall_s"] = round(time.monotonic() - start, 1)
    save()
    (args.out / "batch_rewards.md").write_text(markdown(report))
    print(markdown(report))
    return 0


def markdown(report: dict[str, Any]) -> str:
    lines = [
        f"# Batch rewards on {report['device']} ({report['machine']})",
        "",
        "| task | train batch /min (n) | full batch /min (n) | starter alone, before /min | visible-only warm s | train stages s (c/cor/gen/perf) | full stages s | fidelity full (med abs, tau) | fidelity train (med abs, tau) | verdicts agree |",
        "| --- | ---: | ---: | ---: | ---: | --- | --- | --- | --- | --- |",
    ]

    def st(e: dict[str, Any] | None) -> str:
        return "/".join(f"{v:.2f}" for v in e["median_stage_s"].values()) if e else "-"

    def fid(e: dict[str, Any] | None) -> str:
        if not e or e["median_abs_ratio_minus_1"] is None:
            return "-"
        tau = e["kendall_tau"]
        return (
            f"{e['median_abs_ratio_minus_1'] * 100:.1f}%, {tau:.2f}"
            if tau is not None
            else f"{e['median_abs_ratio_minus_1'] * 100:.1f}%, -"
        )

    for tid, e in report["tasks"].items():
        rpm = lambda k, e=e: (
            f"{e[k]['rewards_per_minute']:.1f} ({e[k]['candidates']})" if k in e else "-"
        )
        agree = e.get("fidelity_full") or e.get("fidelity_train")
        lines.append(
            f"| {tid} | {rpm('train')} | {rpm('full')} | {rpm('before')} | {e.get('warm', {}).get('visible_only_warm_s', '-')} | "
            f"{st(e.get('train'))} | {st(e.get('full'))} | {fid(e.get('fidelity_full'))} | {fid(e.get('fidelity_train'))} | "
            f"{(str(agree['verdicts_agree']) + '/' + str(agree['verdicts_compared'])) if agree else '-'} |"
        )
    for tid, e in report["tasks"].items():
        if "train_seq" in e:
            lines.append(
                f"\n{tid}: the train batch one candidate at a time (concurrency 1): {e['train_seq']['rewards_per_minute']:.1f}/min "
                f"({e['train_seq']['candidates']} in {e['train_seq']['wall_s']:.1f} s)"
            )
    if report.get("cheats"):
        c = report["cheats"]
        lines += [
            "",
            f"Cheat suite through the batch path: {c['as_expected']} of {c['total']} rows as expected; skipped: {c['skipped'] or 'none'}.",
        ]
        lines += [
            f"- {r['name']} ({r['task']}): {r['status']} {r['failed_stage'] or ''} {r['flags']} {'; '.join(r['problems'])}"
            for r in c["rows"]
            if not r["ok"]
        ]
    if report.get("overhead"):
        lines += [
            "",
            "Harness cost per timed call (µs), by component:",
            "",
            "```",
            json.dumps(report["overhead"], indent=1),
            "```",
        ]
    if report.get("skipped"):
        lines += ["", "Skipped (out of budget): " + "; ".join(report["skipped"])]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
