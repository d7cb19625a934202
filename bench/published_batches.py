"""Rewards at the rate RL needs, on the candidates a policy really writes (issue 42).

Per task, a GRPO-shaped batch of 16 made of what a policy writes: kernels rewritten after
published libraries (bench/published/README.md: Liger, Unsloth, FlagGems, vLLM, SGLang, the
Triton tutorials; several `@triton.autotune`), the starter, the task's baseline submitted as a
candidate (it imports the vendor library), a broken file (the starter, its first output plus
one), edited variants and byte-identical copies (`batch_of`, the composition is written into
the JSON). Everything goes through the public API: one `Arena([device])`, sandboxed (the
default), the harness's trace on (core/harness/trace.py).

    PYTHONPATH=. python3 bench/published_batches.py --device cuda:0 --out $OUT/pb --budget-s 480
    PYTHONPATH=. python3 bench/published_batches.py --device cpu --tasks activation/silu_mul --out /tmp/pb
    PYTHONPATH=. python3 bench/published_batches.py --device cpu --phases ratio --out /tmp/ratio
    python3 bench/published_batches.py --render /tmp/pb/published_batches.json   # the tables again

Phases (`--phases`, in this order, each skipped with a note when `--budget-s` has run out):
- `warmup`: a batch of 4 of the first task (other bytes than the measured ones, another seed):
  the harness's start, the slots' first forks, the task's libraries preloaded;
- `turn`: warm visible-only `train` turns (an episode's) of an autotuned candidate: the same
  source 4 times (the first cold), then 2 edits of it (new sources, compiled afresh);
- `batches`: each task's batch of 16 in `train` (aevaluate_many), gemm last: rewards per
  minute, every candidate's status, speedup, stage seconds and what its autotuners tried, and
  the trace summed over the batch (where its seconds went: import, Triton compile, cache hits,
  launcher builds, autotune trials, CUDA contexts, correctness runs, timing);
- `singles`: candidates of each batch one at a time in `full` (what `arena eval`, boards and
  runs pay), round-robin over the tasks: `full` evaluations per minute, the trace per candidate,
  and the batch's verdicts and speedups against these (the fidelity issue's bounds);
- `ratio` (the CPU and sim: devices, issue 42 item 4): `--ratio-n` candidates of a task
  (starter variants) one at a time, then as one batch, alternating `--ratio-repeats` times.

Writes OUT/published_batches.json (every figure) and OUT/published_batches.md (`--render`).
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(1, str(ROOT / "bench"))

os.environ.setdefault("ARENA_HARNESS_TRACE", "1")  # read by the engine as it starts its harness

PUBLISHED = ROOT / "bench" / "published"
TESTS_PUBLISHED = ROOT / "tests" / "published"
# Per task: (name, file, (old, new) of an edited variant: what a policy's next sample changes).
KERNELS: dict[str, list[tuple[str, Path, tuple[str, str]]]] = {
    "activation/silu_mul": [
        ("liger", TESTS_PUBLISHED / "liger_swiglu.py", ("else 4\n", "else 2\n")),
        ("unsloth", PUBLISHED / "silu_unsloth.py", ("1024", "2048")),
        (
            "flaggems*",
            PUBLISHED / "silu_flaggems.py",
            ('"BLOCK_N": 128}, num_warps=4', '"BLOCK_N": 128}, num_warps=2'),
        ),
    ],
    "norm/add_rmsnorm": [
        ("liger", TESTS_PUBLISHED / "liger_fused_add_rmsnorm.py", ("else 4\n", "else 2\n")),
        ("unsloth", PUBLISHED / "rmsnorm_unsloth.py", ("else 4\n", "else 8\n")),
        (
            "flaggems*",
            PUBLISHED / "rmsnorm_flaggems.py",
            ('"BLOCK_N": 256}, num_warps=1', '"BLOCK_N": 256}, num_warps=2'),
        ),
    ],
    "elementwise/rope": [
        ("unsloth", PUBLISHED / "rope_unsloth.py", ("ROPE_GROUP_SIZE = 4", "ROPE_GROUP_SIZE = 8")),
        (
            "flaggems*",
            PUBLISHED / "rope_flaggems.py",
            ('"BLOCK_H": 32}, num_warps=8', '"BLOCK_H": 32}, num_warps=4'),
        ),
    ],
    "moe/route_topk_softmax": [
        (
            "vllm",
            PUBLISHED / "topk_vllm.py",
            ("BLOCK_E: tl.constexpr, BLOCK_K", "BLOCK_E: tl.constexpr,  BLOCK_K"),
        ),
        (
            "rows*",
            PUBLISHED / "topk_rows.py",
            ('"ROWS": 32}, num_warps=8', '"ROWS": 32}, num_warps=4'),
        ),
    ],
    "gemm/bf16_gemm": [
        ("tutorial*", PUBLISHED / "gemm_tutorial.py", ('"GROUP_SIZE_M": 8', '"GROUP_SIZE_M": 4')),
        ("flaggems*", PUBLISHED / "gemm_flaggems.py", ('"GROUP_M": 8', '"GROUP_M": 4')),
        ("persistent", PUBLISHED / "gemm_persistent.py", ("GROUP_M=8", "GROUP_M=4")),
    ],
}
TASKS = tuple(KERNELS)

# The harness's trace spans, grouped: where a candidate's seconds go (core/harness/trace.py,
# core/harness/triton_trace.py). A name matches a group if it starts with one of its prefixes.
GROUPS = {
    "preload (task libraries)": ("harness: start: preload",),
    "CUDA context (warm)": ("candidate: warm",),
    "worker set-up": ("candidate: setup",),
    "import": ("candidate: compile: import",),
    "first call": ("candidate: compile: first call",),
    "Triton compile": ("candidate: triton: compile",),
    "Triton cache hits": ("candidate: triton: cache hit",),
    "C builds (launchers, utils)": ("candidate: triton: build",),
    "autotune trials": ("candidate: triton: autotune trial",),
    "correctness runs": (
        "candidate: run_shared",
        "candidate: run",
        "candidate: attach",
        "candidate: detach",
    ),
    "timing (candidate)": ("candidate: time",),
    "trusted: load": ("trusted: load_task",),
    "trusted: inputs and references": ("trusted: stage", "trusted: expect"),
    "trusted: judge": ("trusted: judge", "trusted: check"),
    "trusted: baseline timing": ("trusted: time", "trusted: serve_round"),
    "trusted: baseline compile": ("trusted: triton:",),
    "sim: counting": ("candidate: predict",),
}


def batch_of(task: Any, count: int = 16) -> list[tuple[str, str]]:
    """The batch's (name, source), in submission order: the starter, the baseline as a
    candidate, a broken one, each published kernel, an edited variant of each, then copies
    (byte-identical) of the published kernels and the starter until `count`."""
    from batch_rewards import BROKEN  # the starter, its first output plus one

    starter = task.file("starter.py").read_text()
    kernels = [(name, path.read_text(), edit) for name, path, edit in KERNELS[task.id]]
    made = [
        ("starter", starter),
        ("baseline", task.file("baseline.py").read_text()),
        ("broken", starter + BROKEN),
    ]
    made += [(name, source) for name, source, _ in kernels]
    for name, source, (old, new) in kernels:
        if old in source:
            made.append((f"{name}-edit", source.replace(old, new, 1)))
    pool = [(f"{name}-copy", source) for name, source, _ in kernels] + [("starter-copy", starter)]
    k = 0
    while len(made) < count:
        made.append(pool[k % len(pool)])
        k += 1
    return made[:count]


def groups(spans: dict[str, float]) -> dict[str, float]:
    out = {}
    for group, prefixes in GROUPS.items():
        seconds = sum(v for k, v in spans.items() if k.startswith(prefixes))
        if seconds:
            out[group] = round(seconds, 3)
    return out


def trace_lines(root: Path, start: float, end: float) -> list[dict[str, Any]]:
    """The trace's spans that began within [start, end], every process's, by start."""
    from core.harness import trace

    rows = [row for path in root.rglob(trace.FILE_NAME) for row in trace.spans(path, start, end)]
    return sorted(rows, key=lambda r: r["start"])


def spans_between(root: Path, start: float, end: float) -> dict[str, float]:
    from core.harness import trace

    return trace.by_name(trace_lines(root, start, end))


def row(name: str, rr: Any) -> dict[str, Any]:
    r = rr.result
    return {
        "candidate": name,
        "status": r.status,
        "failed_stage": r.failed_stage,
        "reward": rr.reward,
        "speedup": r.speedup,
        "seconds": r.seconds,
        "stages": {s.name: round(s.seconds or 0.0, 3) for s in r.stages},
        "timing_worker": next((s.message for s in r.stages if s.name == "performance"), None),
        "autotune": r.autotune,
        "flags": r.integrity_flags,
        "workloads": {w.label: w.speedup for w in r.workloads},
        "baseline_impl": r.baseline_impl,
        # what a failure said: the H200 batches of 2026-12-02 failed as infrastructure
        # errors and the rows kept no word of why (docs/performance.md)
        "message": (r.stage(r.failed_stage).message or "")[:500] if r.failed_stage else None,
    }


TIMED = ("candidate: time", "baseline: time")  # the device alone: one side's timed round


def timeline(rows: list[dict[str, Any]], start: float, end: float) -> dict[str, Any]:
    """A batch's wall clock in its phases: the task's preload, the untimed phase (K slots at
    once, until the first timed round), the timed phase (one candidate at a time) and, inside
    it, the seconds of timed rounds against everything between them (resuming a kept worker,
    the baseline's worker, the rounds' set-up), and how many candidate processes were busy on
    average in the untimed phase (their top-level ops: no nested spans)."""

    def key(r: dict[str, Any]) -> str:
        return f"{r['role']}: {r['name']}"

    timed = [r for r in rows if key(r) in TIMED]
    first = min((r["start"] for r in timed), default=end)
    preload = sum(r["seconds"] for r in rows if key(r) == "harness: start: preload")
    busy = sum(
        min(r["seconds"], first - r["start"])
        for r in rows
        if r["role"] == "candidate" and ":" not in r["name"] and r["start"] < first
    )
    untimed = first - start
    rounds = sum(r["seconds"] for r in timed)
    return {
        "preload_s": round(preload, 2),
        "untimed_s": round(untimed, 2),
        "untimed_busy_candidates": round(busy / max(untimed - preload, 1e-9), 2),
        "timed_s": round(end - first, 2),
        "timed_rounds_s": round(rounds, 2),
        "timed_between_rounds_s": round(end - first - rounds, 2),
        "timed_round_count": len(timed),
    }


def harness_logs(root: Path, lines: int = 40) -> dict[str, str]:
    """The last lines of each harness's log under the Arena's folder (gone when it closes): what
    the harness itself said of an infrastructure error."""
    logs = {}
    for path in sorted(root.rglob("harness.log")):
        text = path.read_text(errors="replace").splitlines()
        logs[str(path.relative_to(root))] = "\n".join(text[-lines:])
    return logs


def median(values: list[float]) -> float | None:
    return round(statistics.median(values), 3) if values else None


class Bench:
    def __init__(self, args: argparse.Namespace):
        from core.tasks.discovery import discover

        self.args = args
        self.end = time.monotonic() + args.budget_s
        self.tasks = {t.id: t for t in discover()}
        self.report: dict[str, Any] = {
            "device": args.device,
            "command": " ".join(sys.argv),
            "machine": machine(args.device),
            "tasks": {},
            "skipped": [],
        }

    def left(self) -> float:
        return self.end - time.monotonic()

    def skip(self, what: str) -> None:
        self.report["skipped"].append(what)
        print(f"skipped (budget): {what}", flush=True)

    def save(self) -> None:
        self.args.out.mkdir(parents=True, exist_ok=True)
        (self.args.out / "published_batches.json").write_text(
            json.dumps(self.report, indent=1, default=str)
        )

    async def batch(
        self, arena: Any, task: Any, cands: list[tuple[str, str]], seed: int
    ) -> dict[str, Any]:
        from core.harness import trace
        from core.rl.arena import EvalRequest

        t0 = time.monotonic()
        results = await arena.aevaluate_many(
            [EvalRequest(task.id, source, seed=seed, profile="train") for _, source in cands]
        )
        t1 = time.monotonic()
        wall = t1 - t0
        rows = [row(name, rr) for (name, _), rr in zip(cands, results)]
        lines = trace_lines(arena.root, t0, t1)
        spans = trace.by_name(lines)
        if self.args.out and lines:  # the raw spans, for a timeline drawn later
            self.args.out.mkdir(parents=True, exist_ok=True)
            name = task.id.replace("/", "_")
            with gzip.open(self.args.out / f"trace_{name}.jsonl.gz", "wt") as out:
                out.writelines(json.dumps(r) + "\n" for r in lines)
        passed = [x for x in rows if x["status"] == "passed"]
        return {
            "composition": [name for name, _ in cands],
            "wall_s": round(wall, 2),
            "rewards_per_minute": round(len(rows) / wall * 60, 2),
            "statuses": "".join(x["status"][0] for x in rows),
            "median_stage_s": {
                s: median([x["stages"].get(s, 0.0) for x in rows])
                for s in ("compile", "correctness", "generalization", "performance")
            },
            "timed_in_kept_worker": sum(
                1 for x in passed if (x["timing_worker"] or "").startswith("its own worker")
            ),
            "per_candidate_s": {k: round(v / len(rows), 3) for k, v in groups(spans).items()},
            "timeline": timeline(lines, t0, t1),
            "spans_s": {
                k: round(v, 3) for k, v in sorted(spans.items(), key=lambda kv: -kv[1])[:40]
            },
            "rows": rows,
        }

    async def run(self) -> None:
        from core.rl.arena import Arena

        phases = self.args.phases.split(",")
        chosen = [self.tasks[t] for t in self.args.tasks]
        seed = self.args.seed
        if "ratio" in phases:
            await self.ratio()
        if not set(phases) & {"warmup", "batches", "turn", "singles"}:
            return
        timing = None
        if self.args.max_calls:  # a before/after of `train`'s calls a round, in one call
            from dataclasses import replace

            from core.evaluation.job import Timing

            timing = replace(Timing.for_device("cuda", "train"), max_calls=self.args.max_calls)
            self.report["max_calls"] = self.args.max_calls
        async with Arena([self.args.device], timing=timing) as arena:
            if "warmup" in phases:
                self.report["warmup_s"] = await self.warm_up(arena, chosen[0], seed)
            if "turn" in phases:  # early: the budget may end inside the batches
                await self.turns(arena, seed)
            made = {t.id: batch_of(t, self.args.candidates) for t in chosen}
            for task in chosen:
                entry = self.report["tasks"].setdefault(task.id, {})
                entry["composition"] = [name for name, _ in made[task.id]]
                if "batches" not in phases:
                    continue
                if self.left() < self.args.reserve_s:
                    self.skip(f"{task.id}: train batch")
                    continue
                if self.args.warmup_each and (task is not chosen[0] or "warmup" not in phases):
                    entry["warmup_s"] = await self.warm_up(arena, task, seed)
                entry["train"] = await self.batch(arena, task, made[task.id], seed)
                t = entry["train"]
                print(
                    f"{task.id}: train batch of {len(made[task.id])}: {t['wall_s']} s, {t['rewards_per_minute']}/min, "
                    f"{t['statuses']}, kept {t['timed_in_kept_worker']}, per candidate {t['per_candidate_s']}",
                    flush=True,
                )
                odd = next((r for r in t["rows"] if r["status"] == "infrastructure_error"), None)
                if odd is not None:  # the harness's failure, not a candidate's: said at once
                    print(
                        f"  infrastructure error ({odd['candidate']}): {odd['message']}", flush=True
                    )
                    t["harness_logs"] = harness_logs(arena.root)
                    for name, tail in t["harness_logs"].items():
                        print(f"  {name} (last lines):\n{tail}", flush=True)
                self.save()
            if "singles" in phases:
                await self.singles(arena, chosen, made, seed)
        self.save()

    async def warm_up(self, arena: Any, task: Any, seed: int) -> float:
        """A batch of 4 of `task`: the harness's start, the slots' first forks, the task's
        libraries preloaded (once per task and harness: what a trainer's first batch of a task
        pays and its later ones do not)."""
        from core.rl.arena import EvalRequest

        t0 = time.monotonic()
        # Other sources than the measured batches' (a comment added): nothing of them is
        # reused by a batch's identical-source seeding; another seed, too.
        await arena.aevaluate_many(
            [
                EvalRequest(task.id, s + "\n# warm-up\n", seed=seed + 1, profile="train")
                for _, s in batch_of(task)[:4]
            ]
        )
        wall = round(time.monotonic() - t0, 2)
        print(f"warm-up batch of 4 ({task.id}): {wall} s", flush=True)
        return wall

    async def turns(self, arena: Any, seed: int) -> None:
        """Warm visible-only turns of an autotuned candidate (the tutorial's matmul on gemm)."""
        task = self.tasks[self.args.turn_task]
        name, path, (old, new) = next(k for k in KERNELS[task.id] if k[0].endswith("*"))
        source = path.read_text() + "\n# an episode's turn\n"  # not a batch member's bytes
        sources = [("same", source)] * 4 + [
            (f"edit{i}", source.replace(old, new, 1) + f"\n# edit {i}\n") for i in (1, 2)
        ]
        rows = []
        for label, src in sources:
            if self.left() < 15:
                self.skip(f"turn {label}")
                break
            t0 = time.monotonic()
            rr = await arena.aevaluate(task.id, src, seed=seed, visible_only=True, profile="train")
            wall = time.monotonic() - t0
            spans = spans_between(arena.root, t0, time.monotonic())
            rows.append(
                {
                    "turn": label,
                    "wall_s": round(wall, 3),
                    "status": rr.result.status,
                    "groups_s": groups(spans),
                    "autotune": rr.result.autotune,
                }
            )
            print(
                f"turn {label} ({name}): {wall:.2f} s {rr.result.status} {groups(spans)}",
                flush=True,
            )
        warm = [r["wall_s"] for r in rows[1:4]]
        self.report["turn"] = {
            "task": task.id,
            "candidate": name,
            "rows": rows,
            "warm_same_median_s": median(warm),
            "edited_median_s": median([r["wall_s"] for r in rows[4:]]),
        }
        self.save()

    async def singles(self, arena: Any, chosen: list[Any], made: dict[str, Any], seed: int) -> None:
        """Candidates one at a time in `full`, round-robin over the tasks (the published kernels
        first), with each one's trace; then the batch's fidelity against them."""
        first = ("starter", "baseline", "broken")  # after the published kernels
        order = {
            t.id: sorted(
                (i for i, (n, _) in enumerate(made[t.id]) if not n.endswith(("-copy", "-edit"))),
                key=lambda i, t=t: made[t.id][i][0] in first,
            )
            for t in chosen
        }
        done: dict[str, list[dict[str, Any]]] = {t.id: [] for t in chosen}
        walls: list[float] = []
        for k in range(max(len(v) for v in order.values())):
            for task in chosen:
                if k >= len(order[task.id]) or k >= self.args.singles:
                    continue
                if self.left() < self.args.single_s:
                    self.skip(f"{task.id}: single {k}")
                    continue
                name, source = made[task.id][order[task.id][k]]
                t0 = time.monotonic()
                rr = await arena.aevaluate(task.id, source, seed=seed, profile="full")
                wall = time.monotonic() - t0
                walls.append(wall)
                entry = row(name, rr)
                entry["wall_s"] = round(wall, 2)
                entry["groups_s"] = groups(spans_between(arena.root, t0, time.monotonic()))
                done[task.id].append(entry)
                print(
                    f"{task.id}: {name} alone, full: {wall:.1f} s {rr.result.status} {rr.result.speedup:.3f}x {entry['groups_s']}",
                    flush=True,
                )
                self.save()
        for task in chosen:
            entry = self.report["tasks"][task.id]
            entry["singles_full"] = done[task.id]
            if "train" in entry and done[task.id]:
                entry["fidelity"] = fidelity(entry["train"]["rows"], done[task.id])
        self.report["full_one_at_a_time"] = {
            "evaluations": len(walls),
            "median_s": median(walls),
            "per_minute_at_median": round(60 / statistics.median(walls), 2) if walls else None,
        }
        self.save()

    async def ratio(self) -> None:
        """Item 4: one at a time against one batch, same candidates, alternating."""
        from core.rl.arena import Arena, EvalRequest

        task = self.tasks[self.args.ratio_task]
        starter = task.file("starter.py").read_text()
        rows = []
        for rep in range(self.args.ratio_repeats):
            for kind in ("singles", "batch") if rep % 2 == 0 else ("batch", "singles"):
                if self.left() < 30:
                    self.skip(f"ratio {kind} {rep}")
                    continue
                sources = [
                    starter + f"\n# variant {rep} {kind} {i}\n" for i in range(self.args.ratio_n)
                ]
                # One slot per two cores of this process's affinity (the scheduler's default
                # counts the machine's cores, not those it may use: taskset in h200_issue42.sh).
                slots = max(1, len(os.sched_getaffinity(0)) // 2)
                async with Arena([self.args.device], cpu_slots=slots) as arena:
                    await arena.aevaluate(
                        task.id, starter, seed=7, profile="train"
                    )  # harness start
                    load = os.getloadavg()[0]
                    c0 = cpu_seconds()
                    t0 = time.monotonic()
                    if kind == "singles":
                        out = [
                            await arena.aevaluate(task.id, s, seed=7, profile="train")
                            for s in sources
                        ]
                    else:
                        out = await arena.aevaluate_many(
                            [EvalRequest(task.id, s, seed=7, profile="train") for s in sources]
                        )
                    wall = time.monotonic() - t0
                    cpu = (cpu_seconds() - c0) / len(sources)
                rows.append(
                    {
                        "kind": kind,
                        "repeat": rep,
                        "wall_s": round(wall, 2),
                        "each_s": round(wall / len(sources), 2),
                        "cpu_each_s": round(cpu, 2),
                        "statuses": "".join(r.result.status[0] for r in out),
                        "load_before": round(load, 2),
                        "load_after": round(os.getloadavg()[0], 2),
                    }
                )
                print(
                    f"ratio {kind} {rep}: {wall / len(sources):.2f} s each, load {load:.1f}",
                    flush=True,
                )
                self.save()
        singles = [r["each_s"] for r in rows if r["kind"] == "singles"]
        batches = [r["each_s"] for r in rows if r["kind"] == "batch"]
        self.report["ratio"] = {
            "cpu_each_median_s": {
                k: median([r["cpu_each_s"] for r in rows if r["kind"] == k])
                for k in ("singles", "batch")
            },
            "task": task.id,
            "candidates": self.args.ratio_n,
            "cores": len(os.sched_getaffinity(0))
            if hasattr(os, "sched_getaffinity")
            else os.cpu_count(),
            "rows": rows,
            "singles_each_median_s": median(singles),
            "batch_each_median_s": median(batches),
            "ratio": round(statistics.median(singles) / statistics.median(batches), 2)
            if singles and batches
            else None,
        }
        self.save()


def cpu_seconds() -> float:
    """CPU seconds of this process's live descendants (the harness, its zygotes and workers),
    with what each of them has reaped: a phase's own work, whatever else loads the machine."""
    me = os.getpid()
    parent: dict[int, int] = {}
    spent: dict[int, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            fields = Path(f"/proc/{name}/stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        parent[int(name)] = int(fields[1])
        spent[int(name)] = sum(int(x) for x in fields[11:15]) / tick  # utime stime cutime cstime
    total = 0.0
    for pid, seconds in spent.items():
        up = pid
        while up in parent and up != me:
            up = parent[up]
        if up == me and pid != me:
            total += seconds
    return total


def fidelity(batch_rows: list[dict[str, Any]], singles: list[dict[str, Any]]) -> dict[str, Any]:
    """The batch's (`train`) verdicts and speedups against the same candidates alone (`full`),
    on the workloads both timed."""
    from batch_rewards import kendall_tau

    alone = {s["candidate"]: s for s in singles}
    pairs, agree = [], []
    for r in batch_rows:
        s = alone.get(r["candidate"])
        if s is None:
            continue
        agree.append(r["status"] == s["status"])
        common = [
            w
            for w in r["workloads"]
            if w in s["workloads"] and r["workloads"][w] and s["workloads"][w]
        ]
        if r["status"] == s["status"] == "passed" and common:
            ratio = statistics.geometric_mean(
                [r["workloads"][w] / s["workloads"][w] for w in common]
            )
            pairs.append(
                {"candidate": r["candidate"], "ratio": round(ratio, 4), "workloads": len(common)}
            )
    batch_speed = [
        statistics.geometric_mean([r["workloads"][w] for w in r["workloads"]])
        for r in batch_rows
        if r["candidate"] in {p["candidate"] for p in pairs}
    ]
    alone_speed = [
        statistics.geometric_mean(
            [alone[p["candidate"]]["workloads"][w] for w in alone[p["candidate"]]["workloads"]]
        )
        for p in pairs
    ]
    return {
        "verdicts_agree": f"{sum(agree)}/{len(agree)}",
        "pairs": pairs,
        "median_abs_ratio_minus_1": median([abs(p["ratio"] - 1) for p in pairs]),
        "kendall_tau_ties_1pct": kendall_tau(batch_speed, alone_speed, 0.01)
        if len(pairs) > 1
        else None,
    }


def machine(device: str) -> dict[str, Any]:
    import torch

    info: dict[str, Any] = {
        "host": platform.node(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cores": len(os.sched_getaffinity(0))
        if hasattr(os, "sched_getaffinity")
        else os.cpu_count(),
        "load_at_start": os.getloadavg()[0],
    }
    try:
        import triton

        info["triton"] = triton.__version__
    except ImportError:
        pass
    if device.startswith("cuda"):
        import subprocess

        try:
            info["gpu"] = subprocess.run(
                ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                capture_output=True,
                text=True,
                timeout=20,
                check=False,
            ).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            info["gpu"] = "nvidia-smi unavailable"
    return info


def render(report: dict[str, Any]) -> str:
    """The markdown tables of docs/performance.md, from the JSON (CPU only)."""
    m = report.get("machine", {})
    lines = [
        f"# Published-kernel batches on {report['device']} ({m.get('gpu') or m.get('host')}; torch {m.get('torch')}, Triton {m.get('triton')}, {m.get('cores')} cores)",
        "",
        f"`{report.get('command', '')}`",
        "",
        "| task | `train` batch | rewards/min | verdicts | timed in kept workers | median s (compile / correctness / generalization / performance) |",
        "| --- | ---: | ---: | --- | ---: | --- |",
    ]
    for tid, e in report["tasks"].items():
        t = e.get("train")
        if not t:
            continue
        st = " / ".join(f"{v:.2f}" if v is not None else "-" for v in t["median_stage_s"].values())
        passed = t["statuses"].count("p")
        lines.append(
            f"| {tid} | {len(t['statuses'])} in {t['wall_s']} s | **{t['rewards_per_minute']}** | `{t['statuses']}` | {t['timed_in_kept_worker']} of {passed} | {st} |"
        )
    spans = [
        (tid, e["train"]["timeline"])
        for tid, e in report["tasks"].items()
        if (e.get("train") or {}).get("timeline")
    ]
    if spans:
        lines += [
            "",
            "The batch's wall clock in its phases (the trace; the untimed phase runs K slots at once, the timed one a candidate at a time):",
            "",
            "| task | warm-up batch of 4 before it | preload | untimed phase | busy candidates (mean) | timed phase | its timed rounds | between rounds |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        for tid, t in spans:
            warm = report["tasks"][tid].get("warmup_s")
            lines.append(
                f"| {tid} | {f'{warm} s' if warm is not None else '-'} | {t['preload_s']} s | {t['untimed_s']} s | {t['untimed_busy_candidates']} | {t['timed_s']} s | {t['timed_rounds_s']} s ({t['timed_round_count']}) | {t['timed_between_rounds_s']} s |"
            )
    lines += [
        "",
        "Composition (in order; `*` autotuned, `-copy` byte-identical, `-edit` one constant changed):",
        "",
    ]
    for tid, e in report["tasks"].items():
        lines.append(f"- {tid}: {', '.join(e.get('composition', []))}")
    names = [
        g
        for g in GROUPS
        if any(
            g in (e.get("train") or {}).get("per_candidate_s", {}) for e in report["tasks"].values()
        )
    ]
    if names:
        lines += [
            "",
            "Where a candidate's seconds go in the batch (trace, seconds per candidate, summed over its processes):",
            "",
        ]
        lines.append("| task | " + " | ".join(names) + " |")
        lines.append("| --- |" + " ---: |" * len(names))
        for tid, e in report["tasks"].items():
            per = (e.get("train") or {}).get("per_candidate_s", {})
            if per:
                lines.append(
                    f"| {tid} | " + " | ".join(f"{per.get(g, 0):.2f}" for g in names) + " |"
                )
    singles = [(tid, s) for tid, e in report["tasks"].items() for s in e.get("singles_full", [])]
    if singles:
        cols = [g for g in GROUPS if any(g in s.get("groups_s", {}) for _, s in singles)]
        lines += ["", "One at a time in `full` (seconds per evaluation, and where they went):", ""]
        lines.append("| task | candidate | status | speedup | wall s | " + " | ".join(cols) + " |")
        lines.append("| --- | --- | --- | ---: | ---: |" + " ---: |" * len(cols))
        for tid, s in singles:
            lines.append(
                f"| {tid} | {s['candidate']} | {s['status']} | {s['speedup']:.3f} | {s['wall_s']} | "
                + " | ".join(f"{s['groups_s'].get(g, 0):.2f}" for g in cols)
                + " |"
            )
        full = report.get("full_one_at_a_time") or {}
        lines += [
            "",
            f"`full` one at a time: {full.get('evaluations')} evaluations, median {full.get('median_s')} s: **{full.get('per_minute_at_median')} per minute**.",
        ]
        for tid, e in report["tasks"].items():
            f = e.get("fidelity")
            if f:
                lines.append(
                    f"- {tid}: verdicts agree {f['verdicts_agree']}; batch/alone speedup median |r-1| {f['median_abs_ratio_minus_1']}, tau (ties 1%) {f['kendall_tau_ties_1pct']}"
                )
    turn = report.get("turn")
    if turn:
        lines += [
            "",
            f"Warm visible-only `train` turns, {turn['task']} ({turn['candidate']}): the same source warm, median **{turn['warm_same_median_s']} s**; an edited source (compiled afresh), median {turn['edited_median_s']} s.",
            "",
        ]
        for r in turn["rows"]:
            lines.append(f"- {r['turn']}: {r['wall_s']} s {r['status']} {r['groups_s']}")
    ratio = report.get("ratio")
    if ratio:
        lines += [
            "",
            f"Batch against one at a time ({ratio['task']}, {ratio['candidates']} candidates, {ratio['cores']} cores): one at a time {ratio['singles_each_median_s']} s each, batch {ratio['batch_each_median_s']} s each: **{ratio['ratio']}x**.",
            "",
        ]
        for r in ratio["rows"]:
            lines.append(
                f"- {r['kind']} (repeat {r['repeat']}): {r['each_s']} s each ({r.get('cpu_each_s')} CPU s each), {r['statuses']}, load {r['load_before']} -> {r['load_after']}"
            )
    if report.get("skipped"):
        lines += ["", "Skipped (budget): " + "; ".join(report["skipped"])]
    return "\n".join(lines) + "\n"


def main() -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--device", default="cuda:0")
    p.add_argument("--tasks", nargs="*", default=list(TASKS))
    p.add_argument("--candidates", type=int, default=16)
    p.add_argument("--phases", default="warmup,batches,turn,singles")
    p.add_argument(
        "--max-calls",
        type=int,
        help="GPU `train` only: at most this many calls a timed round instead of the profile's",
    )
    p.add_argument(
        "--warmup-each",
        action="store_true",
        help="a warm-up batch of 4 before each task's batch (the task's libraries preloaded)",
    )
    p.add_argument("--budget-s", type=float, default=480.0)
    p.add_argument(
        "--reserve-s", type=float, default=20.0, help="a batch starts only with this much left"
    )
    p.add_argument(
        "--single-s", type=float, default=30.0, help="a single starts only with this much left"
    )
    p.add_argument("--singles", type=int, default=6, help="candidates per task one at a time")
    p.add_argument("--turn-task", default="gemm/bf16_gemm")
    p.add_argument("--ratio-task", default="activation/silu_mul")
    p.add_argument("--ratio-n", type=int, default=6)
    p.add_argument("--ratio-repeats", type=int, default=2)
    p.add_argument("--seed", type=int, default=20261202)
    p.add_argument("--out", type=Path)
    p.add_argument(
        "--render", type=Path, help="print the tables of a JSON this script wrote, and stop"
    )
    args = p.parse_args()
    if args.render:
        print(render(json.loads(args.render.read_text())))
        return 0
    if args.out is None:
        p.error("--out is required (or --render)")
    unknown = [t for t in args.tasks if t not in KERNELS]
    if unknown:
        p.error(f"no published kernels for {unknown}: choose from {', '.join(TASKS)}")
    bench = Bench(args)
    asyncio.run(bench.run())
    bench.report["wall_s"] = round(args.budget_s - bench.left(), 1)
    bench.save()
    (args.out / "published_batches.md").write_text(render(bench.report))
    print(render(bench.report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
