"""The identity invariant and the timer's fidelity, on a GPU: one script, one table.

    PYTHONPATH=. python3 bench/fidelity.py identity --device cuda:0 --out DIR [--tasks ...]
        [--profiles full,train] [--runs 3] [--batch 5] [--singles] [--budget-s 500]
    PYTHONPATH=. python3 bench/fidelity.py conditions --device cuda:0 --out DIR [--tasks ...]
    python3 bench/fidelity.py report bench/results/fidelity_DATE --doc docs/fidelity.md
    python3 bench/fidelity.py offsets bench/results/fidelity_DATE --calls PREFIX ...   # timer_offset_us

`identity` goes through the public API a trainer uses (`core.rl.arena.Arena`, sandboxed unless
ARENA_SANDBOX=off): each task's own `baseline.py` submitted as the candidate, one at a time
(`--singles`) and in batches of `--batch` copies (`aevaluate_many`, the batch path), per
profile, `--runs` times. Each result's per-workload ratio (baseline median / candidate median),
the spread of that ratio across the workload's rounds, and the result's speedup and interval
are kept. The identity holds where every run's speedup is 1.00 ± 2% (`full`) or ± 3% (`train`).

`conditions` times one task's baseline in this one process under the conditions that could
differ between the two sides of an evaluation (calls queued back to back; a host wait before
each call; a host wait and an idle gap; a second process with its own CUDA context writing the
next call's inputs in the gap, as the trusted worker does for the candidate), alternating them
round by round, beside `triton.testing.do_bench` (and `do_bench_cudagraph` for decode-sized
workloads). It is how a cause is ruled in or out with a measurement.

The independent check of the timer is `conditions --only` TIMER_CHECK: the arena's timer
(queued, and graphed where the arena graphs) beside `do_bench`, `do_bench_cudagraph` and the
controls that name each gap (queued_fixed, do_bench_led, graph_warm: bench/timer_check.py);
its runs are saved as `timercheck_*`.

`report` reads a folder of those JSON files (identity runs named after the device call that
made them: `before_*`, `after_*`, `fourth_*` ... `twentyseventh_*`, `ahead_*`; the timer check's
`timercheck_*`) and regenerates the identity section of docs/fidelity.md. `identity --done
FILES` skips what earlier calls' files measured, so that one sweep can be split across device
calls.

Every subcommand saves its JSON after each step, so a call cut short keeps what it measured.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import math
import multiprocessing as mp
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import timer_check  # bench/, beside this script

# The single-device tasks whose identity the issue measured, first; every other is added after.
DEFAULT_TASKS = [
    "attention/prefill_gqa",
    "elementwise/rope",
    "elementwise/rope_qknorm",
    "norm/add_rmsnorm",
    "elementwise/kv_cache_write",
    "moe/route_topk_softmax",
    "moe/route_grouped_topk",
    "moe/align_permute",
    "norm/rmsnorm_fp8_quant",
    "activation/silu_mul_fp8_quant",
    "gemm/fp8_blockscale_gemm",
    "activation/silu_mul",
    "gemm/bf16_gemm",
    "gemm/small_m_gemm",
    "attention/decode_paged_gqa",
    "attention/mla_decode",
    "sampling/top_k_top_p_sampling",
]
BOUNDS = {"full": 0.02, "train": 0.03}
# `conditions`' ways of timing one baseline; `graph` and `do_bench_cudagraph` apply to
# decode-sized workloads only (the arena graphs those).
CONDITIONS = (
    "queued",
    "queued_fixed",
    "synced",
    "synced_idle_1ms",
    "synced_peer",
    "do_bench",
    "do_bench_led",
    "graph",
    "graph_warm",
)
# The timer check (bench/timer_check.py): the arena's timer, do_bench, and the controls, in
# the files named timercheck_* (the first check, 2026-12-02's timer_*, predates the lead flushes)
TIMER_CHECK = "queued,queued_fixed,do_bench,do_bench_led,graph,graph_warm"
TIMER_CHECK_STEM = "timercheck"


def _stamp(t0: float, text: str) -> None:
    print(f"[{time.monotonic() - t0:6.1f}s] {text}", flush=True)


def _save(path: Path, raw: dict[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(raw, indent=1, default=str))
    tmp.replace(path)


def _tasks(names: list[str] | None) -> list[Any]:
    from core.tasks.discovery import discover

    every = {t.id: t for t in discover() if t.world_size is None and not t.external}
    wanted = names or [t for t in DEFAULT_TASKS if t in every] + sorted(
        t for t in every if t not in DEFAULT_TASKS
    )
    missing = [t for t in wanted if t not in every]
    if missing:
        raise SystemExit(f"unknown or multi-rank task(s): {', '.join(missing)}")
    return [every[t] for t in wanted]


# --- identity: the baseline as the candidate, through the public API -----------------------


def _figures(result: Any) -> dict[str, Any]:
    """What the identity table needs of one Result."""
    workloads = []
    for w in result.workloads:
        rounds_c = [r.get("median_us") for r in w.candidate.get("rounds") or []]
        rounds_b = [r.get("median_us") for r in w.baseline.get("rounds") or []]
        # what each side's rounds cost the host's clock, and how many calls they timed
        walls = {
            side: [
                [round(float(r.get("wall_s") or 0.0), 4), int(r.get("calls") or 0)]
                for r in (getattr(w, side).get("rounds") or [])
            ]
            for side in ("candidate", "baseline")
        }
        ratios = [b / c for b, c in zip(rounds_b, rounds_c) if b and c]
        workloads.append(
            {
                "label": w.label,
                "mode": w.mode,
                "candidate_us": w.candidate.get("median_us"),
                "baseline_us": w.baseline.get("median_us"),
                "ratio": w.speedup,
                "round_ratios": ratios,
                "rounds_candidate_us": rounds_c,
                "rounds_baseline_us": rounds_b,
                "interval": getattr(w, "interval", None),
                "notes": w.notes,
                "round_walls": walls,
            }
        )
    return {
        "status": result.status,
        "stage_s": {s.name: round(s.seconds or 0.0, 3) for s in result.stages},
        "failed_stage": result.failed_stage,
        "speedup": result.speedup,
        "interval": getattr(result, "speedup_interval", None),
        "baseline_impl": result.baseline_impl,
        "seconds": result.seconds,
        "workloads": workloads,
        "message": next(
            (s.message for s in result.stages if s.status not in ("passed", "skipped")), None
        ),
        # an identity flagged as a cheat fails with every stage passed: say which flag
        "integrity_flags": [str(f) for f in result.integrity_flags],
    }


async def _identity(args: argparse.Namespace, raw: dict[str, Any], path: Path) -> None:
    from core.rl.session import Arena

    t0 = time.monotonic()
    tasks = _tasks(args.tasks)
    deadline = t0 + args.budget_s
    timing = None
    if args.round_wall_ms or args.max_calls or args.interleave:
        from dataclasses import replace

        from core.evaluation.job import Timing

        if args.profiles not in ("full", "train"):
            raise SystemExit(
                "--round-wall-ms, --max-calls and --interleave need one profile: `--profiles full` or `train`"
            )
        timing = Timing.for_device("cuda", args.profiles)
        if args.round_wall_ms:
            cap = None if args.round_wall_ms == "off" else float(args.round_wall_ms)
            timing = replace(timing, round_wall_ms=cap)
            raw["round_wall_ms"] = cap
        if args.max_calls:
            timing = replace(timing, max_calls=args.max_calls)
            raw["max_calls"] = args.max_calls
        if args.interleave:
            asked = {"on": True, "off": False, "auto": None}[args.interleave]
            timing = replace(timing, interleave=asked)
            raw["interleave"] = args.interleave
    missing = [str(p) for p in args.done or () if not p.is_file()]
    if missing:
        raise SystemExit(f"--done: no such file {', '.join(missing)} (give earlier identity JSON)")
    done = {
        (e["task"], e["profile"], int(e.get("k") or 1), int(e.get("run") or 0))
        for earlier in args.done or ()
        for e in json.loads(earlier.read_text()).get("identity", [])
    }
    async with Arena([args.device], timing=timing) as arena:
        raw.setdefault("identity", [])
        for run in range(args.runs):
            for task in tasks:
                source = task.file("baseline.py").read_text()
                for profile in args.profiles.split(","):
                    shapes = ([1] if args.singles else []) + ([args.batch] if args.batch else [])
                    for k in shapes:
                        if (task.id, profile, k, run) in done:
                            continue  # an earlier call measured it (--done)
                        if time.monotonic() > deadline:
                            _stamp(t0, "budget spent: stopping")
                            return
                        start = time.monotonic()
                        if k == 1:
                            rs = [await arena.aevaluate(task.id, source, profile=profile, seed=run)]
                        else:
                            from core.rl.requests import EvalRequest

                            rs = await arena.aevaluate_many(
                                [EvalRequest(task.id, source, profile=profile)] * k
                            )
                        wall = time.monotonic() - start
                        for i, r in enumerate(rs):
                            raw["identity"].append(
                                {
                                    "task": task.id,
                                    "profile": profile,
                                    "k": k,
                                    "run": run,
                                    "member": i,
                                    "wall_s": wall,
                                    **_figures(r.result),
                                }
                            )
                        _save(path, raw)
                        got = ", ".join(f"{r.result.speedup:.3f}" for r in rs)
                        called = sum(
                            any("timed call by call" in n for n in w.notes or ())
                            for r in rs
                            for w in r.result.workloads
                        )
                        if called:
                            got += f" [{called} workloads timed call by call]"
                        _stamp(t0, f"{task.id} {profile} K={k} run {run + 1}: {got} ({wall:.1f} s)")


# --- conditions: one baseline, timed the ways the two sides could differ -------------------


def _peer_main(conn: Any, device: str) -> None:
    """A second process with its own CUDA context: on each request (a byte count) it writes
    that many bytes into a buffer of its own and waits for them, as the trusted worker refills
    the candidate's inputs between the candidate's timed calls."""
    import torch

    torch.cuda.set_device(torch.device(device))
    buf = torch.empty(0, dtype=torch.int32, device=device)
    gen = torch.Generator(device).manual_seed(0)
    while True:
        nbytes = conn.recv()
        if nbytes is None:
            return
        if buf.numel() * 4 < nbytes:
            buf = torch.empty(nbytes // 4 + 1, dtype=torch.int32, device=device)
        buf[: nbytes // 4 + 1].random_(generator=gen)
        torch.cuda.synchronize()
        conn.send(True)


class Peer:
    """The `_peer_main` process, started once."""

    def __init__(self, device: str):
        ctx = mp.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_peer_main, args=(child, device), daemon=True)
        self.proc.start()

    def refill(self, nbytes: int) -> None:
        self.conn.send(nbytes)
        self.conn.recv()

    def close(self) -> None:
        self.conn.send(None)
        self.proc.join(10)


def baseline_and_inputs(task: Any, w: Any, device: str) -> tuple[Any, Any]:
    """Task `task`'s baseline entry point and its fresh inputs for workload `w` on `device`, as
    the trusted worker makes them (inputs.FreshInputs; the task's inputs.py where it has one)."""
    import torch

    from core.evaluation.job import spec_json
    from core.harness import inputs
    from core.harness.trusted_task import entry, module_from_source

    specs = [spec_json(s) for s in task.inputs]
    shapes = {s.name: list(s.concrete_shape(w.axes)) for s in task.inputs if s.shape is not None}
    for s in task.outputs:
        if s.shape is not None:
            shapes[s.name] = list(s.concrete_shape(w.axes))
    workload = {"axes": w.axes, "shapes": shapes}
    custom = None
    if task.file("inputs.py").exists():
        custom = module_from_source(
            task.file("inputs.py").read_bytes(), "fid_inputs", str(task.file("inputs.py"))
        ).make_inputs
    module = module_from_source(
        task.file("baseline.py").read_bytes(), f"fid_{task.name}", str(task.file("baseline.py"))
    )
    fn = entry(module, "baseline.py")
    return fn, inputs.FreshInputs(specs, workload, 1234, torch.device(device), custom)


def _condition_rounds(
    task: Any, w: Any, device: str, rounds: int, peer: Peer | None, only: set[str]
) -> dict[str, Any]:
    import torch
    import triton.testing

    from core.harness import timing

    dev = torch.device(device)
    fn, fresh = baseline_and_inputs(task, w, device)
    args0 = fresh(0)
    nbytes = sum(a.numel() * a.element_size() for a in args0 if isinstance(a, torch.Tensor))

    def gap(kind: str):
        def refill(i: int) -> list[Any]:
            got = fresh(i)
            timing._sync("cuda")
            if kind == "idle":
                time.sleep(0.001)
            elif kind == "peer":
                assert peer is not None  # started whenever its condition is asked for
                peer.refill(nbytes)
            return got

        return refill

    graphed, graph_error = _arena_graphs(task, w, device), None
    clock = timer_check.SmClock(dev.index or 0)
    budget = 60.0
    out: dict[str, list[float]] = {}
    clocks: dict[str, list[int | None]] = {}

    def add(name: str, us: float) -> None:
        out.setdefault(name, []).append(us)
        clocks.setdefault(name, []).append(clock.mhz())

    for r in range(rounds):
        first = (r + 1) * 100_000
        plans = {
            "queued": (fresh, False),
            "queued_fixed": (lambda i: args0, False),
            "synced": (fresh, True),
            "synced_idle_1ms": (gap("idle"), False),
            "synced_peer": (gap("peer"), False),
        }
        for name, (refill, sync_each) in plans.items():
            if name not in only:
                continue
            rnd = timing.Round(budget, 10, 400, first, False, sync_each)
            got = timing.time_round(fn, refill, dev, rnd)
            add(name, statistics.median(got["times_us"]))
        call = lambda: fn(*args0)  # do_bench's own form: a call on fixed inputs
        if "do_bench" in only:
            ms = triton.testing.do_bench(call, warmup=25, rep=100, return_mode="all")
            add("do_bench", statistics.median(ms) * 1e3)  # the arena's statistic: the median
            out.setdefault("do_bench_mean", []).append(statistics.fmean(ms) * 1e3)  # its default
        if "do_bench_led" in only:
            add("do_bench_led", timer_check.do_bench_led(call))
        if graphed and "graph" in only:
            rnd = timing.Round(budget, 10, 400, first, True, False)
            got = timing.time_round(fn, fresh, dev, rnd)
            if got["mode"] != "graph":  # not capturable: the arena times it eagerly, as queued
                graphed, graph_error = False, got.get("graph_error", "")
                continue
            add("graph", statistics.median(got["times_us"]))
            add(
                "do_bench_cudagraph",
                triton.testing.do_bench_cudagraph(call, rep=100, return_mode="median") * 1e3,
            )
        if graphed and "graph_warm" in only:
            add("graph_warm", timer_check.graph_warm(call))
            add("graph_floor", timer_check.graph_floor())
    return {"rounds_us": out, "clock_mhz": clocks, "graphed": graphed, "graph_error": graph_error}


@functools.cache
def _device_info(device: str) -> Any:
    from core.devices.device import probe

    return probe(device)


def _arena_graphs(task: Any, w: Any, device: str) -> bool:
    """Whether the arena times workload `w` from CUDA graph replays (its roofline under
    GRAPH_BELOW_US on this device), as core/evaluation/job.py decides it."""
    from core.evaluation.job import GRAPH_BELOW_US, roofline_for

    roof = roofline_for(task, w, _device_info(device))
    return roof is not None and roof < GRAPH_BELOW_US


def _conditions(args: argparse.Namespace, raw: dict[str, Any], path: Path) -> None:
    t0 = time.monotonic()
    raw.setdefault("conditions", [])
    only = set(args.only.split(","))
    unknown = only - set(CONDITIONS)
    if unknown:
        raise SystemExit(
            f"--only: unknown condition(s) {', '.join(sorted(unknown))}; "
            f"choose from {','.join(CONDITIONS)}"
        )
    # A second CUDA context on the GPU slows every other condition down (time slicing between
    # contexts): the peer runs only when its own condition is asked for.
    peer = Peer(args.device) if "synced_peer" in only else None
    try:
        _conditions_with(args, raw, path, peer, only, t0)
    finally:
        if peer is not None:
            peer.close()


def _conditions_with(
    args: argparse.Namespace,
    raw: dict[str, Any],
    path: Path,
    peer: Peer | None,
    only: set[str],
    t0: float,
) -> None:
    for task in _tasks(args.tasks):
        for w in [*task.gpu.visible, *task.gpu.hidden.fixed]:
            if time.monotonic() - t0 > args.budget_s:
                _stamp(t0, "budget spent: stopping")
                return
            try:
                got = _condition_rounds(task, w, args.device, args.rounds, peer, only)
            except Exception as exc:  # noqa: BLE001 - one workload's failure is recorded, the rest go on
                raw["conditions"].append(
                    {"task": task.id, "label": w.label, "error": f"{type(exc).__name__}: {exc}"}
                )
                _stamp(t0, f"{task.id} {w.label}: {type(exc).__name__}: {exc}")
                continue
            raw["conditions"].append({"task": task.id, "label": w.label, **got})
            _save(path, raw)
            summary = "  ".join(
                f"{k} {statistics.median(v):.1f}" for k, v in got["rounds_us"].items() if v
            )
            _stamp(t0, f"{task.id} {w.label}: {summary}")


def _device_record(device: str) -> dict[str, Any]:
    import torch

    d = torch.device(device)
    if d.type != "cuda":
        return {"name": device, "torch": torch.__version__, "date": time.strftime("%Y-%m-%d")}
    if not torch.cuda.is_available():
        raise SystemExit(
            f"--device {device}: this machine has no CUDA GPU (--device cpu runs here)"
        )
    props = torch.cuda.get_device_properties(d)
    import triton

    return {
        "name": props.name,
        "sms": props.multi_processor_count,
        "l2_mib": props.L2_cache_size / 2**20,
        "torch": torch.__version__,
        "triton": triton.__version__,
        "cuda": torch.version.cuda,
        "date": time.strftime("%Y-%m-%d"),
    }


# --- report -----------------------------------------------------------------------------------


def _fmt_ratio(x: float | None) -> str:
    return "–" if x is None or not math.isfinite(x) else f"{x:.3f}"


def _round_spread(entry: dict[str, Any]) -> float | None:
    """The largest spread, over the result's workloads, of its alternations' paired ratios
    ((max − min) / median)."""
    spreads = [
        (max(w["round_ratios"]) - min(w["round_ratios"])) / statistics.median(w["round_ratios"])
        for w in entry["workloads"]
        if len(w.get("round_ratios") or []) >= 2
    ]
    return max(spreads) if spreads else None


def identity_table(
    entries: list[dict[str, Any]], timer: dict[str, str] | None = None
) -> tuple[list[str], int, int]:
    """Rows per (task, profile, K): the speedup of the baseline as the candidate in each run
    (a batch contributes one per member), the worst distance from 1, the widest spread of
    one result's paired alternations, how many results' own intervals (`speedup_interval`, as
    the arena scores it today: `rescored`) hold 1.0, a reward then being exactly 1.0
    (scoring.tied_speedup), and whether the bound holds; with `timer` (task -> its workloads'
    verdicts, timer_check.per_task), the timer against do_bench as a last column."""
    lines = [
        "| task | profile | K | speedup of each result | worst \\|1 − x\\| | widest round spread | interval holds 1.0 | bound | holds |"
        + (" the timer against do_bench (workloads) |" if timer is not None else ""),
        "| --- | --- | ---: | --- | ---: | ---: | ---: | ---: | --- |"
        + (" --- |" if timer is not None else ""),
    ]
    groups: dict[tuple[str, str, int], list[dict[str, Any]]] = {}
    for e in entries:
        groups.setdefault((e["task"], e["profile"], e["k"]), []).append(e)
    held = 0
    for (task, profile, k), members in sorted(groups.items()):
        xs = [e["speedup"] for e in members if e["status"] == "passed"]
        worst = max((abs(x - 1) for x in xs), default=math.inf)
        spreads = [x for x in (_round_spread(e) for e in members) if x is not None]
        intervals = [
            e["interval"] for e in members if e["status"] == "passed" and e.get("interval")
        ]
        tied = sum(1 for low, high in intervals if low <= 1.0 <= high)
        ok = len(xs) == len(members) and worst <= BOUNDS[profile]
        held += ok
        lines.append(
            f"| {task} | {profile} | {k} | {', '.join(_fmt_ratio(x) for x in xs) or 'failed'} | "
            f"{worst * 100:.1f}% | {f'{max(spreads) * 100:.1f}%' if spreads else '–'} | "
            f"{f'{tied} of {len(intervals)}' if intervals else '–'} | "
            f"±{BOUNDS[profile] * 100:.0f}% | {'yes' if ok else '**no**'} |"
            + (f" {timer.get(task, 'not measured')} |" if timer is not None else "")
        )
    return lines, held, len(groups)


SMALL_GRAPHED_US = 25.0  # graph-replayed workloads under this many µs: where an offset shows


def evaluation_offset_us(entry: dict[str, Any]) -> float | None:
    """One identity result's additive offset between its two processes: the median over its
    graph-replayed workloads under `SMALL_GRAPHED_US` of candidate minus baseline (µs). Those
    move together through one evaluation (docs/fidelity.md, "The timer offset"); larger ones
    drown it. None with fewer than two such workloads."""
    gaps = [
        float(w["candidate_us"]) - float(w["baseline_us"])
        for w in entry.get("workloads") or []
        if w.get("mode") == "graph"
        and w.get("candidate_us")
        and w.get("baseline_us")
        and float(w["baseline_us"]) < SMALL_GRAPHED_US
    ]
    return statistics.median(gaps) if len(gaps) >= 2 else None


def offsets(raws: dict[str, dict[str, Any]], prefixes: tuple[str, ...]) -> dict[str, Any]:
    """The timer offset a device's peaks entry records (`timer_offset_us`): the 95th
    percentile of |offset| over the identity results of the files named by `prefixes`.

        python3 bench/fidelity.py offsets bench/results/fidelity_2026-12-02 --calls twentyseventh ahead
    """
    found = sorted(
        abs(o)
        for stem, raw in raws.items()
        if stem.startswith(prefixes)
        for e in raw.get("identity", [])
        if e.get("status") == "passed" and (o := evaluation_offset_us(e)) is not None
    )
    if not found:
        raise SystemExit(
            f"no identity result with two graphed workloads under {SMALL_GRAPHED_US:g} µs in {prefixes}"
        )

    def at(q: float) -> float:
        return found[min(len(found) - 1, int(q * len(found)))]

    return {
        "results": len(found),
        "median_us": statistics.median(found),
        "p90_us": at(0.9),
        "p95_us": at(0.95),
        "max_us": found[-1],
    }


def settings_table(folder: Path, arms: list[str]) -> str:
    """The identity under several timing settings, one row each: `folder`/ARM/run*/identity.json
    (as `sh bench/h200_wave.sh $OUT 60` writes them), each task's results in run order as
    "speedup (offset in ns)", the offset `evaluation_offset_us`'s.

        python3 bench/fidelity.py settings bench/results/issue35_2026-12-06 --arms default inside new_stream
    """
    rows: dict[str, dict[str, list[str]]] = {}
    for arm in arms:
        runs = sorted((folder / arm).glob("run*/identity.json"), key=lambda p: p.parent.name)
        if not runs:
            raise SystemExit(f"{folder / arm}: no run*/identity.json (the arms are {arms})")
        cells = rows.setdefault(arm, {})
        for path in runs:
            for e in json.loads(path.read_text()).get("identity", []):
                if e.get("status") != "passed":
                    cells.setdefault(e["task"], []).append(e.get("status") or "failed")
                    continue
                offset = evaluation_offset_us(e)
                ns = None if offset is None else round(offset * 1000)
                shown = "–" if ns is None else f"{ns:+d}" if ns else "0"
                cells.setdefault(e["task"], []).append(f"{e['speedup']:.3f} ({shown})")
    tasks = sorted({t for cells in rows.values() for t in cells})
    head = "| setting | " + " | ".join(f"{t}: identity (offset, ns)" for t in tasks) + " |"
    lines = [head, "| --- |" + " --- |" * len(tasks)]
    for arm, cells in rows.items():
        lines.append(f"| {arm} | " + " | ".join(", ".join(cells.get(t, [])) for t in tasks) + " |")
    return "\n".join(lines)


def _interval_coverage(entries: list[dict[str, Any]]) -> tuple[int, int, int]:
    """How many passed results' intervals hold 1.0 as scored today, how many held it from
    their alternations alone (`interval_reported`), and how many results had one."""
    passed = [e for e in entries if e.get("status") == "passed" and e.get("interval")]

    def holds(interval: list[float] | None) -> bool:
        return bool(interval) and interval[0] <= 1.0 <= interval[1]  # type: ignore[index]

    return (
        sum(holds(e["interval"]) for e in passed),
        sum(holds(e.get("interval_reported", e["interval"])) for e in passed),
        len(passed),
    )


# The oldest call whose code still stands for the table "as it stands" (the lead flushes; the
# calls before measured code that has changed since).
AS_IT_STANDS_FROM = "after"


# Calls that measured the same timing code: the "as it stands" table pools their runs of a
# group rather than taking the newest call's alone (the stopping rule of up to 32 alternations
# for noisy workloads; the later calls changed nothing the rounds measure).
SAME_CODE = (
    ("twentyfifth", "twentyfourth", "twentythird"),
    ("twentyfirst", "twentieth", "nineteenth"),
)


def _newest_groups(raws: dict[str, dict[str, Any]], phases: list[str]) -> list[dict[str, Any]]:
    """Every identity entry of the newest of `phases` (newest first) that measured its (task,
    profile, K), with the runs of the calls SAME_CODE pools with it."""
    era = {phase: pool[0] for pool in SAME_CODE for phase in pool}
    chosen: dict[tuple[str, str, int], str] = {}
    entries: list[dict[str, Any]] = []
    for phase in phases:
        for stem, raw in raws.items():
            if not stem.startswith(phase):
                continue
            for e in raw.get("identity", []):
                group = (e["task"], e["profile"], int(e.get("k") or 1))
                mine = era.get(phase, phase)
                if chosen.setdefault(group, mine) == mine:
                    entries.append(e)
    return entries


def rescored(entry: dict[str, Any], timer_offset_us: float = 0.0) -> dict[str, Any]:
    """An identity entry with its speedup as the arena scores it today, from its stored
    alternations (core/evaluation/scoring.py `workload_speedup`: the Hodges-Lehmann estimate of
    each workload's paired ratios since the sixth session of 2026-12-02, the pooled medians'
    ratio before): the geometric mean over its workloads; and its interval with each
    workload's widened by the device's `timer_offset_us` (scoring.offset_widened, since
    2026-12-05). The figures as first reported stay under `speedup_reported` and
    `interval_reported`. An entry without two alternations on every workload is as it was."""
    from core.evaluation.scoring import geomean, offset_widened
    from core.harness.ratios import hodges_lehmann

    workloads = entry.get("workloads") or []
    if entry.get("status") != "passed" or not workloads:
        return entry
    ratios = [[r for r in w.get("round_ratios") or [] if r and r > 0] for w in workloads]
    if any(len(rs) < 2 for rs in ratios):
        return entry
    again = {
        **entry,
        "speedup": geomean(hodges_lehmann(rs) for rs in ratios),
        "speedup_reported": entry.get("speedup"),
    }
    if timer_offset_us > 0 and all(w.get("interval") and w.get("candidate_us") for w in workloads):
        ends = [
            offset_widened(tuple(w["interval"]), float(w["candidate_us"]), timer_offset_us)
            for w in workloads
        ]
        again["interval"] = [geomean(e[0] for e in ends), geomean(e[1] for e in ends)]
        again["interval_reported"] = entry.get("interval")
    return again


def timer_offset(device_name: str) -> float:
    """The timer offset (µs) the arena scores a GPU named `device_name` with (its peaks entry,
    read as the verdict reads it: DeviceInfo.sol_peaks); 0 where it has none."""
    from core.devices.device import info_from_probe

    info = info_from_probe("cuda:0", {"type": "cuda", "vendor": "", "model": device_name})
    peaks = info.sol_peaks
    return float(peaks.timer_offset_us or 0.0) if peaks else 0.0


def estimators(raws: dict[str, dict[str, Any]], prefixes: tuple[str, ...]) -> str:
    """Per (call, task, profile, K) group of the files whose stem starts with one of
    `prefixes`: the worst |1 - x| of its results scored from the pooled medians (as first
    reported) and from the paired alternations (`rescored`), and how many groups hold each way.

        python3 bench/fidelity.py estimators bench/results/fidelity_2026-12-02 \\
            --calls fourth fifth sixth seventh eighth ninth unpinned
    """
    groups: dict[tuple[str, str, str, int], dict[str, list[float]]] = {}
    for stem, raw in sorted(raws.items()):
        call = next((c for c in prefixes if stem.startswith(c)), None)
        if call is None:
            continue
        for e in raw.get("identity", []):
            again = rescored(e)
            if "speedup_reported" not in again:
                continue  # failed, or a workload without two alternations
            key = (call, e["task"], e["profile"], int(e.get("k") or 1))
            got = groups.setdefault(key, {"pooled": [], "paired": []})
            got["pooled"].append(float(again["speedup_reported"]))
            got["paired"].append(float(again["speedup"]))
    lines, held = [], {"pooled": 0, "paired": 0}
    for (call, task, profile, k), got in sorted(groups.items()):
        bound = BOUNDS[profile]
        worst = {name: max(abs(1 - x) for x in xs) for name, xs in got.items()}
        for name in held:
            held[name] += worst[name] <= bound
        lines.append(
            f"{call:10s} {task:40s} {profile:5s} K={k}  pooled {worst['pooled']:6.1%}  "
            f"paired {worst['paired']:6.1%}"
        )
    lines.append(
        f"holds in {held['pooled']} of {len(groups)} groups from the pooled medians, "
        f"{held['paired']} from the paired alternations"
    )
    return "\n".join(lines)


def report(raws: dict[str, dict[str, Any]]) -> str:
    """The identity tables of docs/fidelity.md from `raws` (file stem -> its JSON): the
    results named `before_*` (the code as the issue found it) and `after_*` (as it stands)."""
    device = next((raw["device"] for raw in raws.values() if raw.get("device")), {})
    offset = timer_offset(str(device.get("name", "")))
    raws = {
        stem: {**raw, "identity": [rescored(e, offset) for e in raw.get("identity", [])]}
        for stem, raw in raws.items()
    }
    out = [
        f"Machine: {device.get('name', '?')} ({device.get('sms', '?')} SMs, {device.get('l2_mib', '?'):g} MiB L2), "
        f"torch {device.get('torch', '?')}, Triton {device.get('triton', '?')}, CUDA {device.get('cuda', '?')}, "
        f"{device.get('date', '?')}; sandboxed (bubblewrap) through `core.rl.session.Arena`, liger-kernel 0.8.5.",
        "",
        "Every speedup below is re-scored from its result's stored alternations with the arena's "
        "estimator as it stands (core/evaluation/scoring.py: the Hodges–Lehmann estimate of each "
        "workload's paired ratios, since the sixth session of 2026-12-02), and every interval "
        f"with its workloads' widened by the device's timer offset ({offset:g} µs, the peaks "
        "table: since 2026-12-05); the figures as first reported (the pooled medians' ratio, "
        "the interval of its alternations alone) stay in the raw files as `speedup` and "
        "`interval`.",
        "",
    ]
    phases = (
        (
            "landing",
            "As it lands (2026-12-06), on the machine above: the eleven tasks of the issue's "
            "table and silu_mul one at a time, three runs in `full` and in `train` (two for "
            "silu_mul in `train`), and the eleven in batches of 5 in `train` (three batches, "
            "two on align_permute and the fp8 GEMM); the fourteen other single-device tasks "
            "one at a time, once in each profile; all but the grouped fp8 GEMM (90 s a run in "
            "`full`). bench/h200_wave.sh step 64, then its `bench/fidelity.py identity` "
            "commands inline in three more calls of one warm lease",
        ),
        (
            "ahead",
            "As it lands: every single-device task one at a time, three runs in `train` and in "
            "`full` (two in `full` on the last five tasks: the device budget's end), and a batch "
            "of 5 in `train`, on the code whose baseline's worker is forked as the correctness "
            "stages begin (2026-12-05, bench/h200_wave.sh step 48, then step 52 three times: one "
            "sweep split across four device calls, each going on where the last stopped)",
        ),
        (
            "twentyseventh",
            "As it lands: every single-device task one at a time, three runs in `train` and two "
            "in `full` (one on fp8_blockscale_grouped_gemm, which takes 90 s a run in `full`), "
            "on the code as it lands (2026-12-04, bench/h200_wave.sh steps 43-46: one sweep "
            "split across four device calls, each going on where the last stopped)",
        ),
        (
            "twentysixth",
            "As it lands: the host probe asked in a workload's first round only, its flush buffer "
            "touched before its time is measured; the two host-bound tasks one at a time in "
            "`train`, once (2026-12-04, bench/h200_wave.sh step 42)",
        ),
        (
            "twentyfifth",
            "The sixteen single-device tasks the calls above did not reach, in `train` one at a "
            "time, once (fifth call of 2026-12-04: bench/h200_wave.sh step 40)",
        ),
        (
            "twentyfourth",
            "The two host-bound tasks in `train` once more, one at a time and in a batch of 5; "
            "`full` on mla_prefill one at a time and in a batch of 5 and on the grouped GEMM one "
            "at a time (fourth call of 2026-12-04: bench/h200_wave.sh step 39)",
        ),
        (
            "twentythird",
            "After both sides release their allocators' cached blocks before a workload's first "
            "round: the two host-bound tasks in `train` one at a time and in a batch of 5, and "
            "six tasks of the issue's table in a batch of 5 (third call of 2026-12-04: "
            "bench/h200_wave.sh step 38)",
        ),
        (
            "twentysecond",
            "With a workload whose baseline waits on the host timed call by call (interleaved "
            "rounds), before the allocators' release: the host-bound tasks and prefill_gqa in "
            "`train` (second call of 2026-12-04: bench/h200_wave.sh step 37)",
        ),
        (
            "twentyfirst",
            "The two host-bound tasks in `train` once more, an extra round checking one timed "
            "call, and four steady tasks, one at a time and a batch of 5 (third call of "
            "2026-12-03's fourth session: bench/h200_wave.sh step 35)",
        ),
        (
            "twentieth",
            "The two host-bound tasks one at a time, two runs in `train` and one of mla_prefill "
            "in `full` (second call of 2026-12-03's fourth session: bench/h200_wave.sh step 34)",
        ),
        (
            "nineteenth",
            "The two host-bound tasks in `train` with a noisy workload timed on until its paired "
            "ratios' interval is narrow (up to 32 alternations): one at a time and in batches of "
            "5 (first call of 2026-12-03's fourth session: bench/h200_wave.sh step 33; the "
            "budget cut the third run)",
        ),
        (
            "eighteenth",
            "The two host-bound tasks in `train` as they stand, with a tuning's configurations "
            "compiled at once, two runs one at a time and two batches of 5 (third call of "
            "2026-12-03's third session: bench/h200_wave.sh step 29)",
        ),
        (
            "seventeenth",
            "As it stands: `train` at 32 calls a round and Triton's once-a-process costs paid in "
            "the harness parent, nothing overridden (third call of 2026-12-03's second session: "
            "bench/h200_wave.sh step 26)",
        ),
        (
            "sixteenth",
            "`train` at 32 calls a round, what it is since (second call of 2026-12-03's second "
            "session: bench/h200_wave.sh step 25, `--max-calls 32`), one at a time and a batch of 5",
        ),
        (
            "fifteenth",
            "The same call's `train` at 64 calls a round, as it was: the control",
        ),
        (
            "fourteenth",
            "decode_paged_local in `full` after drawn workloads were bounded by the largest "
            "declared one's bytes (first call of 2026-12-03's second session: bench/h200_wave.sh "
            "step 24)",
        ),
        (
            "thirteenth",
            "`full` one at a time with that cap, once, on the 22 other single-device tasks (second "
            "call of 2026-12-03: bench/h200_wave.sh step 20)",
        ),
        (
            "twelfth",
            "`full` one at a time, each timed round at most 80 ms of the host's clock, two runs on "
            "five tasks (first call of 2026-12-03: bench/h200_wave.sh step 19)",
        ),
        (
            "uncapped",
            "The same call's `full` without that cap (`--round-wall-ms off`): the timer before it",
        ),
        (
            "eleventh",
            "`full` one at a time, three runs, on eight more tasks (eleventh call of 2026-12-02: "
            "bench/h200_wave.sh step 15; the last of them cut by the device budget)",
        ),
        (
            "tenth",
            "`full` one at a time, three runs, on two tasks (tenth call of 2026-12-02: "
            "bench/h200_wave.sh step 14)",
        ),
        (
            "ninth",
            "One at a time, sandboxed and not (`ARENA_SANDBOX=off`), the two host-bound tasks "
            "(ninth call of 2026-12-02: bench/h200_wave.sh step 13)",
        ),
        (
            "eighth",
            "After extra rounds became only for paired ratios over 6% apart (eighth call of "
            "2026-12-02)",
        ),
        (
            "seventh",
            "One at a time: the host-bound tasks' round-to-round modes are the task's, not the "
            "batch's (seventh call of 2026-12-02)",
        ),
        (
            "sixth",
            "After the candidate's round times the baseline's calls, on the same drawn inputs "
            "(sixth call of 2026-12-02); `full` one at a time on four more tasks",
        ),
        (
            "fifth",
            "After the slots' trusted workers give back their memory and the extra rounds while "
            "unsettled (fifth call of 2026-12-02): the tasks the fourth found out of memory, noisy "
            "or did not reach",
        ),
        (
            "fourth",
            "After the memory bound on a batch's slots and the pinned timing CPU (fourth call of "
            "2026-12-02)",
        ),
        (
            "third",
            "The tasks not covered above, after the NVML fix (third call of 2026-12-02; before "
            "the memory bound on a batch's slots and the pinned timing CPU)",
        ),
        ("after", "The second call of 2026-12-02, after the lead flushes"),
        (
            "wall80",
            "The twentieth call's `train` with `full`'s 80 ms wall cap a round "
            "(`--round-wall-ms 80`: a diagnosis, not the default)",
        ),
        (
            "interoff",
            "The twenty-second call's prefill_gqa and mla_prefill one at a time, two runs, with "
            "interleaved rounds off (`--interleave off`: the two-round alternation before them)",
        ),
        (
            "interon",
            "The same, interleaved from the second round on (`--interleave on`): the times read "
            "as the two-round ones do",
        ),
        (
            "unpinned",
            "The seventh call's fp8_blockscale_grouped_gemm one at a time with "
            "`ARENA_TIMING_CPU=off` (a diagnosis: not the default)",
        ),
        ("worker", "With the baseline's own worker, before the lead flushes"),
        (
            "oldpath",
            "While isolated candidates could not map CUDA IPC handles (the old path, fixed since)",
        ),
        ("before", "Before (the code the issue measured)"),
    )
    names = [phase for phase, _ in phases]
    newest = _newest_groups(raws, names[: names.index(AS_IT_STANDS_FROM) + 1])
    timer = [
        e
        for stem, raw in raws.items()
        if stem.startswith(TIMER_CHECK_STEM)
        for e in raw.get("conditions", [])
    ]
    if newest:
        lines, held, total = identity_table(newest, timer_check.per_task(timer))
        tied, alone, results = _interval_coverage(newest)
        out += [
            "### As it stands: each (task, profile, K) from the newest call that measured it",
            "",
            f"The identity holds in {held} of {total} (task, profile, K) groups. The last column "
            + (
                "is the timer check of the last section (the baseline's median against "
                "do_bench's, per workload: within 3%, or the gap explained by a control, "
                "bench/timer_check.py). "
                if timer
                else "is the timer check (bench/timer_check.py), not measured on this machine. "
            )
            + f"The results' own 95% intervals hold 1.0 in {tied} of {results} ({alone} of them "
            "from their alternations alone, before the timer offset). "
            "The sections below are the calls one by one, newest first.",
            "",
            *lines,
            "",
        ]
    for phase, title in phases:
        entries = [
            e
            for stem, raw in raws.items()
            if stem.startswith(phase)
            for e in raw.get("identity", [])
        ]
        if not entries:
            continue
        lines, held, total = identity_table(entries)
        out += [
            f"### {title}",
            "",
            f"The identity holds in {held} of {total} (task, profile, K) groups.",
            "",
            *lines,
            "",
        ]
    if timer:
        lines, counts = timer_check.timer_table(timer)
        out += [
            "### The timer against `triton.testing.do_bench`",
            "",
            f"Of {sum(counts.values())} workloads, the arena's median agrees with do_bench's "
            f"within {timer_check.BOUND:.0%} on {counts['agrees']}; on {counts['explained']} a "
            "control closes the gap (bench/timer_check.py); on "
            f"{counts['inconclusive']} one side's own two rounds differ by more than the gap; "
            f"unexplained: {counts['unexplained']}.",
            "",
            *lines,
            "",
        ]
    return "\n".join(out)


BEGIN, END = "<!-- identity:begin (bench/fidelity.py report) -->", "<!-- identity:end -->"


def markers(section: str) -> tuple[str, str]:
    """The generated part's markers on the page: `identity` (the H200's), or another
    machine's section (`identity-h100`)."""
    return BEGIN.replace("identity:", f"{section}:"), END.replace("identity:", f"{section}:")


def write_doc(doc: Path, text: str, section: str = "identity") -> None:
    """Replace the generated part of `doc` (between the section's markers) with `text`."""
    begin, end = markers(section)
    old = doc.read_text()
    if begin not in old or end not in old:
        raise SystemExit(f"{doc} has no {begin} ... {end} section to regenerate")
    head, rest = old.split(begin, 1)
    doc.write_text(f"{head}{begin}\n{text}\n{end}{rest.split(end, 1)[1]}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    for name in ("identity", "conditions"):
        p = sub.add_parser(name)
        p.add_argument("--device", default="cuda:0")
        p.add_argument("--out", type=Path, required=True)
        p.add_argument("--tasks", nargs="*")
        p.add_argument("--budget-s", type=float, default=500.0)
        p.add_argument("--rounds", type=int, default=5)
        p.add_argument("--runs", type=int, default=3)
        p.add_argument("--profiles", default="full,train")
        p.add_argument("--batch", type=int, default=0)
        p.add_argument("--singles", action="store_true")
        p.add_argument(
            "--round-wall-ms",
            help="identity in one profile: the rounds' wall cap instead of the profile's (a "
            "number, or `off`: the timer before the cap), for a before/after in one call",
        )
        p.add_argument(
            "--max-calls",
            type=int,
            help="identity in one profile: at most this many calls a round instead of the profile's",
        )
        p.add_argument(
            "--interleave",
            choices=("on", "off", "auto"),
            help="identity in one profile: time alternations call by call always (on), never "
            "(off: the two-round timer before it) or where the baseline waits on the host (auto)",
        )
        p.add_argument(
            "--done",
            type=Path,
            nargs="*",
            help="identity: earlier calls' JSON files; the (task, profile, K, run) they measured "
            "is skipped, so that a sweep split across device calls goes on where the last stopped",
        )
        p.add_argument(
            "--only",
            default=",".join(CONDITIONS),
            help=f"conditions: which ways to time ({TIMER_CHECK} is the timer check, "
            "bench/timer_check.py)",
        )
    rep = sub.add_parser("report")
    rep.add_argument(
        "folder", type=Path, help="a folder of identity JSON: before_*.json, after_*.json"
    )
    rep.add_argument("--doc", type=Path, help="regenerate this page's identity section")
    rep.add_argument(
        "--section",
        default="identity",
        help="which generated section of --doc: identity (the H200's), identity-h100, ...",
    )
    off = sub.add_parser("offsets")
    off.add_argument("folder", type=Path, help="a folder of identity JSON")
    off.add_argument("--calls", nargs="+", required=True, help="file-name prefixes: the calls")
    arms = sub.add_parser("settings")
    arms.add_argument("folder", type=Path, help="a folder of ARM/run*/identity.json")
    arms.add_argument("--arms", nargs="+", required=True, help="its subfolders, in row order")
    est = sub.add_parser("estimators")
    est.add_argument("folder", type=Path, help="a folder of identity JSON")
    est.add_argument("--calls", nargs="+", required=True, help="file-name prefixes: the calls")
    args = parser.parse_args()
    if args.cmd == "offsets":
        raws = {p.stem: json.loads(p.read_text()) for p in sorted(args.folder.glob("*.json"))}
        print(json.dumps(offsets(raws, tuple(args.calls)), indent=1))
        return 0
    if args.cmd == "settings":
        print(settings_table(args.folder, args.arms))
        return 0
    if args.cmd == "estimators":
        raws = {p.stem: json.loads(p.read_text()) for p in sorted(args.folder.glob("*.json"))}
        print(estimators(raws, tuple(args.calls)))
        return 0
    if args.cmd == "report":
        raws = {p.stem: json.loads(p.read_text()) for p in sorted(args.folder.glob("*.json"))}
        text = report(raws)
        if args.doc:
            write_doc(args.doc, text, args.section)
        print(text)
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"{args.cmd}.json"
    raw: dict[str, Any] = {"device": _device_record(args.device), "argv": sys.argv}
    if args.cmd == "identity":
        asyncio.run(_identity(args, raw, path))
    elif args.cmd == "conditions":
        _conditions(args, raw, path)
    _save(path, raw)
    return 0


if __name__ == "__main__":
    sys.exit(main())
