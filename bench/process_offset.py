"""Does a process carry an offset of its own? A diagnostic for the one identity group outside its
bound (docs/fidelity.md: norm/add_rmsnorm in `train`, whose 6.4 µs graphed workload read
0.92-0.99 through all of one evaluation and 1.02-1.05 through another).

An evaluation times its two sides in two processes, each round with the arena's timer
(core/harness/timing.py), on inputs both read from one place. Here pairs of fresh processes do
that and nothing else: the parent allocates one set of inputs and a few refill sources, shares
them with both children through the device's IPC, and asks the children for rounds in turn
(side a, side b, then b, a), each round `timing.time_round` pinned to one CPU as the
performance stage pins it. A pair's offset is the median of its rounds' a/b ratios; its
`after_other` the same on the rounds where each side follows the other process's, as an
evaluation's rounds all do (`after_other`, below). If the
offsets of many pairs spread wider than one pair's rounds do, each process carries an offset of
its own, which more rounds cannot remove. The variants say what moves it:

- `arena`: the timer as the performance stage runs it (a new graph and flush buffer each
  round, the caching allocator emptied before the first).
- `same_process`: both sides in one child, the control: what is left with one process.
- `shared_flush`: both children zero one flush buffer, the parent's.
- `replaced`: each round empties the caching allocator and allocates a pad of a random size
  before the capture, so that each round's graph, its outputs and the flush buffer lie
  somewhere else; a process's placement then changes from round to round.
- `read_flush`: the flush reads its buffer (a max over it) instead of zeroing it, so the L2
  it leaves holds clean lines only: a kernel after it evicts without writing anything back.
  If the offset is the write-back of the flush's dirty lines, landing on the channels of each
  process's own flush buffer, it goes here.
- `warm_pages`: after each flush, one byte of every 64 KiB of the workload's inputs and
  outputs is read (a strided max per tensor, before the call's start event): the address
  translations the call needs are fetched again, while its data (one line in 512) stays cold.
  If the offset is the page-table walk each process's own page tables cost once the flush has
  evicted their entries from the L2, it goes here.
- `no_flush`: no flush at all, the control for both: what is left once nothing is evicted.
  (Both ran on an H200 on 2026-12-06, step 62, three pairs each: offsets as large as the
  `arena` variant's, up to 128 ns without any flush; docs/fidelity.md. `warm_pages` reads
  about 2 µs slower on both sides, most likely because the host's time launching its touches
  (a few tensor operations each) leaves the flush's 55 µs too short to hide the graph's
  launch behind; its null calls, untouched, read as the other variants'.)

Every round keeps where its outputs and flush buffer lay and the CPU it ran on, and times, right
after the workload and under the same round, a null call (one element added in place: a launch
with no memory to speak of). Step 52's results (docs/fidelity.md) found the offset additive: one
evaluation's graphed workloads of 4-25 us all read the candidate 100-300 ns off in the same
direction. A pair whose null calls' offset (in ns) tracks its workload's points at the launch
path of each process (the graph's replay, the events around it); one whose null calls agree
while the workload does not points at the workload's memory.

    PYTHONPATH=. python3 bench/process_offset.py --device cuda:0 --out DIR \\
        [--task norm/add_rmsnorm] [--workload T=128,H=7168] [--pairs 6] [--rounds 8] \\
        [--variants arena,same_process,shared_flush,replaced,read_flush,warm_pages,no_flush]

`--device cpu` runs the same protocol on the host (tests/test_process_offset.py); what it
measures there is not the question. On the H200: `sh bench/h200_wave.sh $OUT 53` (the first
five variants, 2026-12-05) and `62` (warm_pages and no_flush beside arena, 2026-12-06); raw
in bench/results/issue35_h200_2026-12-0{5,6}/placement/. On an H100, `63` ran arena without
and then under CUDA's Multi-Process Service, with same_process (2026-12-06; raw in
bench/results/issue35_2026-12-06c/): under MPS the offset stays.
"""

from __future__ import annotations

import json
import multiprocessing.connection
import os
import random
import statistics
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import fidelity  # bench/, beside this script
from placement import PAGE, diagnostic_parser, spread, tensors_of, workload_of

VARIANTS = (
    "arena",
    "same_process",
    "shared_flush",
    "replaced",
    "read_flush",
    "warm_pages",
    "no_flush",
)
FLUSHES = {"read_flush": "read", "no_flush": "none"}  # the variants whose flush is not the arena's
TOUCH_STRIDE = 64 * 1024  # warm_pages reads one byte in this many
REFILLS = 4  # refill sources: call i's inputs are copies of source i % REFILLS


@dataclass(frozen=True)
class Plan:
    """What every round of every pair times."""

    task: str
    workload: str
    device: str
    rounds: int
    calls: int
    cpu: int | None  # the one CPU both sides' rounds run on (performance.timing_cpu)
    flush: str = "zero"  # "zero" as the arena's timer does; "read" (read_flush); "none" (no_flush)
    warm_pages: bool = False  # the `warm_pages` variant


def _cpu_now() -> int:
    """The CPU this thread last ran on (field 39 of /proc/self/stat; -1 where there is none)."""
    try:
        return int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[36])
    except (OSError, IndexError, ValueError):
        return -1


def child(
    conn: multiprocessing.connection.Connection,
    plan: Plan,
    static: list[Any],
    sources: list[list[Any]],
    shared_flush: Any,
) -> None:
    """One side's process: the task's baseline timed on the parent's inputs, a round per request."""
    import torch

    from core.harness import timing, worker_tools

    task = fidelity._tasks([plan.task])[0]
    fn, _ = fidelity.baseline_and_inputs(
        task, workload_of(task, plan.workload, plan.device), plan.device
    )
    device = torch.device(plan.device)
    own_flush = timing.flush_buffer
    flushes: list[int] = []

    def flush_buffer(d: Any) -> Any:
        buffer = shared_flush if shared_flush is not None else own_flush(d)
        flushes.append(buffer.data_ptr())
        return buffer

    timing.flush_buffer = flush_buffer  # _time_graph and _time_events look it up when called
    tensors = [j for j, a in enumerate(static) if isinstance(a, torch.Tensor)]
    touched: list[Any] = []  # warm_pages: the workload's inputs and outputs, while it is timed
    zero = timing._zero  # looked up when called too: the flush the variant asks for

    def flush_then_touch(buffer: Any) -> None:
        if plan.flush == "zero":
            zero(buffer)
        elif plan.flush == "read":
            torch.amax(buffer)
        for t in touched:
            _touch(t)

    timing._zero = flush_then_touch
    one = torch.zeros(1, device=device)  # the null call's one element

    def fresh(i: int) -> list[Any]:
        source = sources[i % len(sources)]
        for j in tensors:
            static[j].copy_(source[j])
        return static

    conn.send({"pid": os.getpid()})
    while (msg := conn.recv()) is not None:
        pad = None
        if msg["pad_bytes"]:
            timing.release_cached(device.type)
            pad = torch.empty(msg["pad_bytes"], dtype=torch.uint8, device=device)
        outputs: list[int] = []
        flushes.clear()
        if plan.warm_pages:
            touched[:] = [static[j] for j in tensors]
        rnd = timing.Round(
            budget_ms=1.0,
            min_calls=plan.calls,
            max_calls=plan.calls,
            first_index=msg["first"],
            graph=device.type == "cuda",
            release_cache=msg["release"] and pad is None,
        )
        with worker_tools.pinned(plan.cpu):
            timed = timing.time_round(
                fn,
                fresh,
                device,
                rnd,
                keep=lambda _, result, sink=outputs: _kept(result, sink, touched, plan.warm_pages),
                picker=lambda _: {0},
            )
            touched.clear()
            null = timing.time_round(lambda x: x.add_(1), lambda _: [one], device, rnd)
            cpu = _cpu_now()
        del pad
        conn.send(
            {
                "median_us": statistics.median(timed["times_us"]),
                "null_us": statistics.median(null["times_us"]),
                "mode": timed["mode"],
                "outputs": outputs,
                "flush": flushes[-1] if flushes else None,
                "cpu": cpu,
            }
        )


def _touch(t: Any) -> None:
    """Read one byte of every TOUCH_STRIDE of contiguous tensor `t` (a strided max: no copy)."""
    import torch

    if t.is_contiguous() and t.numel():
        t.reshape(-1).view(torch.uint8)[::TOUCH_STRIDE].max()


def _kept(result: Any, sink: list[int], touched: list[Any], warm_pages: bool) -> None:
    """A timed call's outputs: their addresses kept, and under warm_pages touched from now on."""
    found = tensors_of(result)
    sink.extend(t.data_ptr() for t in found)
    if warm_pages:
        touched.extend(t for t in found if all(t is not u for u in touched))


def _start(
    ctx: Any, plan: Plan, static: list[Any], sources: list[list[Any]], flush: Any
) -> tuple[Any, Any]:
    here, there = ctx.Pipe()
    proc = ctx.Process(target=child, args=(there, plan, static, sources, flush), daemon=True)
    proc.start()
    there.close()
    return proc, here


def pair(
    ctx: Any,
    plan: Plan,
    variant: str,
    static: list[Any],
    sources: list[list[Any]],
    flush: Any,
    rng: random.Random,
) -> dict[str, Any]:
    """One pair of sides timed `plan.rounds` rounds each, alternating; their paired ratios."""
    shared = flush if variant == "shared_flush" else None
    plan = replace(plan, flush=FLUSHES.get(variant, "zero"), warm_pages=variant == "warm_pages")
    started = [
        _start(ctx, plan, static, sources, shared)
        for _ in range(1 if variant == "same_process" else 2)
    ]
    try:
        pids = [conn.recv()["pid"] for _, conn in started]
        conns = {"a": started[0][1], "b": started[-1][1]}
        rounds: dict[str, list[dict[str, Any]]] = {"a": [], "b": []}
        for r in range(plan.rounds):
            for side in ("a", "b") if r % 2 == 0 else ("b", "a"):
                pad = (
                    rng.randrange(1, 33) * PAGE + rng.randrange(0, 4096) * 512
                    if variant == "replaced"
                    else 0
                )
                conns[side].send({"first": (r + 1) * 10_000, "release": r == 0, "pad_bytes": pad})
                rounds[side].append(conns[side].recv())
        for _, conn in started:
            conn.send(None)
    finally:
        for proc, _ in started:
            proc.join(timeout=30)
            if proc.is_alive():
                proc.kill()
    ratios = [a["median_us"] / b["median_us"] for a, b in zip(rounds["a"], rounds["b"])]
    gaps_ns = {  # a - b in ns, round by round: the workload's and the null call's
        key: [(a[key] - b[key]) * 1e3 for a, b in zip(rounds["a"], rounds["b"])]
        for key in ("median_us", "null_us")
    }
    return {
        "pids": pids,
        "offset": statistics.median(ratios),
        "after_other": after_other(rounds),
        "round_ratios": ratios,
        "offset_ns": statistics.median(gaps_ns["median_us"]),
        "null_offset_ns": statistics.median(gaps_ns["null_us"]),
        "rounds": rounds,
    }


def after_other(rounds: dict[str, list[dict[str, Any]]]) -> float | None:
    """The pair's offset on the rounds where each side follows the other process's round, as
    every round of an evaluation does (the baseline's, then the candidate's, alternation after
    alternation): a's odd rounds (b, a) over b's even rounds before them (a, b). The turns' other
    rounds follow the side's own, which reads 3-5% slower without MPS (step 63), so the offset
    over all rounds mixes two conditions the arena never meets."""
    a, b = rounds["a"], rounds["b"]
    ratios = [a[r]["median_us"] / b[r - 1]["median_us"] for r in range(1, min(len(a), len(b)), 2)]
    return statistics.median(ratios) if ratios else None


def summary(pairs: list[dict[str, Any]]) -> dict[str, Any]:
    """How far the pairs' offsets spread, beside how far one pair's rounds spread."""
    offsets = [p["offset"] for p in pairs]
    return {
        "offsets": offsets,
        "after_other": [p.get("after_other") for p in pairs],  # None: stored before it was
        "offsets_spread": spread(offsets),
        "offset_farthest": max((abs(o - 1) for o in offsets), default=0.0),
        "rounds_spread_median": statistics.median(spread(p["round_ratios"]) for p in pairs)
        if pairs
        else 0.0,
        # each pair's (workload, null call) offsets in ns: do they move together?
        "offsets_ns": [(p.get("offset_ns"), p.get("null_offset_ns")) for p in pairs],
        "pages": sorted(
            {o % PAGE for p in pairs for s in p["rounds"].values() for r in s for o in r["outputs"]}
        ),
    }


def measure(plan: Plan, variants: list[str], pairs: int, seed: int, save: Any) -> dict[str, Any]:
    """Every variant's pairs, the variants taking turns; `save(got)` after each turn, so that
    a device call cut short keeps what it measured."""
    import torch
    import torch.multiprocessing as tmp

    from core.harness import timing

    task = fidelity._tasks([plan.task])[0]
    _, fresh = fidelity.baseline_and_inputs(
        task, workload_of(task, plan.workload, plan.device), plan.device
    )
    static = list(fresh(0))
    sources = [
        [a.clone() if isinstance(a, torch.Tensor) else a for a in fresh(k + 1)]
        for k in range(REFILLS)
    ]
    flush = timing.flush_buffer(torch.device(plan.device))
    flush.zero_()
    ctx = tmp.get_context("spawn")
    rng = random.Random(seed)
    measured: dict[str, list[dict[str, Any]]] = {v: [] for v in variants}
    wall_s = dict.fromkeys(variants, 0.0)
    got: dict[str, Any] = {}
    # The variants' pairs take turns, so that a drift of the device's clocks over the call
    # weighs on each of them alike.
    for k in range(pairs):
        for variant in variants:
            t0 = time.monotonic()
            measured[variant].append(pair(ctx, plan, variant, static, sources, flush, rng))
            wall_s[variant] += time.monotonic() - t0
            last = measured[variant][-1]
            print(
                f"[pair {k + 1}/{pairs}] {variant}: offset {last['offset']:.3f} "
                f"({last['after_other'] or 0:.3f} following the other), a - b "
                f"{last['offset_ns']:+.0f} ns (null call {last['null_offset_ns']:+.0f})",
                flush=True,
            )
        got = {v: {"pairs": m, **summary(m), "wall_s": wall_s[v]} for v, m in measured.items()}
        save(got)
    for variant, s in got.items():
        print(
            f"{variant}: {pairs} pairs, offsets {min(s['offsets']):.3f}-{max(s['offsets']):.3f} "
            f"(spread {s['offsets_spread']:.1%}); one pair's rounds spread {s['rounds_spread_median']:.1%} "
            f"(median); a - b in ns, workload and null call: "
            f"{', '.join(f'{w:+.0f}/{n:+.0f}' for w, n in s['offsets_ns'])}; following the "
            f"other: {', '.join(f'{x:.3f}' for x in s['after_other'] if x is not None)}; "
            f"{s['wall_s']:.0f} s",
            flush=True,
        )
    return got


def main() -> int:
    parser = diagnostic_parser(__doc__)
    parser.add_argument("--pairs", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--calls", type=int, default=32, help="calls a round (the train profile's)")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--seed", type=int, default=35)
    args = parser.parse_args()
    variants = [v for v in args.variants.split(",") if v]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        raise SystemExit(f"--variants: unknown {', '.join(unknown)} (known: {', '.join(VARIANTS)})")
    device = fidelity._device_record(args.device)  # a clear error on a machine without CUDA
    cpu = None if args.device == "cpu" else max(os.sched_getaffinity(0))
    plan = Plan(args.task, args.workload, args.device, args.rounds, args.calls, cpu)
    args.out.mkdir(parents=True, exist_ok=True)
    head = {"device": device, "plan": plan.__dict__}

    def save(so_far: dict[str, Any]) -> None:
        (args.out / "process_offset.json").write_text(
            json.dumps({**head, "variants": so_far}, indent=1)
        )

    measure(plan, variants, args.pairs, args.seed, save)
    return 0


if __name__ == "__main__":
    sys.exit(main())
