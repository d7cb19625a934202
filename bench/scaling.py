"""How the scheduler's throughput scales with slots: N = 1..8 slots, 8×N jobs each.

    PYTHONPATH=. python3 bench/scaling.py                 # local: a runner that only sleeps
    PYTHONPATH=. python3 bench/scaling.py --json --job-ms 50 --max-slots 8

Per N: wall time, throughput (jobs/s), and the ratio to N × the one-slot throughput, which
should stay above `--min-ratio` (0.9); the exit code is 1 when it does not. Each N is run
`--repeats` times and the fastest kept (the scheduler's cost, not the machine's noise).

A backend is a factory, `make(args) -> Backend`: `slots(n)` gives N slots and `runner` runs
one job there. `local` sleeps in this process; an SSH loopback backend registers itself in
BACKENDS the same way and runs its jobs on a host instead.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from core.orchestration.scheduler import Job, Scheduler, Slot


class Backend(Protocol):
    """Where the benchmark's jobs run. `open`/`close` bracket the whole benchmark (connect to
    a host, say); `slots(n)` gives n slots; `runner` is the scheduler's runner."""

    name: str

    async def open(self) -> None: ...

    def slots(self, n: int) -> list[Slot]: ...

    async def runner(self, job: Job, slot: Slot) -> Any: ...

    async def close(self) -> None: ...


@dataclass
class LocalBackend:
    """One device whose runner only sleeps `job_ms`: what is left is the scheduler's cost."""

    job_ms: float
    name: str = "local"

    async def open(self) -> None:
        pass

    def slots(self, n: int) -> list[Slot]:
        return [Slot("bench", i) for i in range(n)]

    async def runner(self, job: Job, slot: Slot) -> None:
        await asyncio.sleep(self.job_ms / 1000)

    async def close(self) -> None:
        pass


BACKENDS: dict[str, Callable[[argparse.Namespace], Backend]] = {
    "local": lambda args: LocalBackend(args.job_ms),
}


@dataclass(frozen=True)
class Row:
    slots: int
    jobs: int
    seconds: float
    jobs_per_s: float
    ideal_jobs_per_s: float  # n × 1000 / job_ms: every slot busy all the time, no overhead
    ratio: float  # jobs_per_s / (n × the one-slot jobs_per_s)


async def timed_run(backend: Backend, n: int, jobs: int) -> float:
    slots = backend.slots(n)
    devices = tuple(dict.fromkeys(s.device for s in slots))
    start = time.perf_counter()
    async with Scheduler(slots, backend.runner) as scheduler:
        futures = [scheduler.submit(Job(f"job-{i}", devices)) for i in range(jobs)]
        await asyncio.gather(*futures)
    return time.perf_counter() - start


async def measure(
    backend: Backend, max_slots: int, jobs_per_slot: int, repeats: int, job_ms: float
) -> list[Row]:
    await backend.open()
    try:
        best: dict[int, float] = {}
        for n in range(1, max_slots + 1):
            best[n] = min([await timed_run(backend, n, jobs_per_slot * n) for _ in range(repeats)])
    finally:
        await backend.close()
    one = jobs_per_slot / best[1]
    rows = []
    for n, seconds in best.items():
        rate = jobs_per_slot * n / seconds
        rows.append(
            Row(
                n,
                jobs_per_slot * n,
                seconds,
                rate,
                n * 1000 / job_ms if job_ms > 0 else float("inf"),
                rate / (n * one),
            )
        )
    return rows


def table(rows: list[Row], backend: str, job_ms: float) -> str:
    lines = [
        f"scheduler scaling, backend {backend}, {job_ms:g} ms per job",
        f"{'slots':>5} {'jobs':>5} {'seconds':>8} {'jobs/s':>8} {'ideal':>8} {'vs N×1':>7}",
    ]
    for r in rows:
        lines.append(
            f"{r.slots:>5} {r.jobs:>5} {r.seconds:>8.3f} {r.jobs_per_s:>8.1f} {r.ideal_jobs_per_s:>8.1f} {r.ratio:>7.3f}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=sorted(BACKENDS), default="local")
    parser.add_argument("--max-slots", type=int, default=8)
    parser.add_argument("--jobs-per-slot", type=int, default=8)
    parser.add_argument(
        "--job-ms", type=float, default=50.0, help="how long the local runner sleeps per job"
    )
    parser.add_argument("--repeats", type=int, default=3, help="runs per N; the fastest is kept")
    parser.add_argument("--min-ratio", type=float, default=0.9)
    parser.add_argument(
        "--json", action="store_true", help="print one JSON object instead of the table"
    )
    args = parser.parse_args(argv)
    backend = BACKENDS[args.backend](args)
    rows = asyncio.run(
        measure(backend, args.max_slots, args.jobs_per_slot, args.repeats, args.job_ms)
    )
    ok = all(r.ratio >= args.min_ratio for r in rows)
    if args.json:
        print(
            json.dumps(
                {
                    "backend": args.backend,
                    "job_ms": args.job_ms,
                    "jobs_per_slot": args.jobs_per_slot,
                    "repeats": args.repeats,
                    "min_ratio": args.min_ratio,
                    "ok": ok,
                    "rows": [asdict(r) for r in rows],
                },
                indent=2,
            )
        )
    else:
        print(table(rows, args.backend, args.job_ms))
        print(
            f"{'ok' if ok else 'BELOW'}: every ratio {'≥' if ok else 'should be ≥'} {args.min_ratio}"
        )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
