"""How remote jobs scale on one SSH connection: N = 1..8 concurrent jobs of a command that
only sleeps, through the same HostConnection (one connection, a channel limiter below the
server's MaxSessions) that RemoteExecutor uses.

    PYTHONPATH=. python3 bench/scaling_ssh.py                   # starts a loopback sshd (root)
    PYTHONPATH=. python3 bench/scaling_ssh.py --json --job-ms 200 --jobs-per-worker 5
    PYTHONPATH=. python3 bench/scaling_ssh.py --hosts hosts.yaml --host box1   # a real host
    PYTHONPATH=. python3 bench/scaling_ssh.py --via-scheduler   # the same, through core.orchestration.scheduler

Per N: N workers each run `--jobs-per-worker` jobs one after another (`sleep job_ms`, each on
its own channel); wall time, throughput (jobs/s), the mean cost of one job above its sleep,
and the ratio to N × the one-worker throughput, which should stay above `--min-ratio` (0.9);
the exit code is 1 when it does not. Each N is run `--repeats` times and the fastest kept.
`--via-scheduler` runs bench/scaling.py's measurement with an SSH backend instead (its
`SshBackend` follows that file's Backend protocol).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from remotes.connection import HostConnection
from remotes.hosts import Host, find_host, load_hosts, parse_hosts
from remotes.pool import ConnectionPool


@dataclass(frozen=True)
class Row:
    workers: int
    jobs: int
    seconds: float
    jobs_per_s: float
    ideal_jobs_per_s: float  # n × 1000 / job_ms: no overhead at all
    overhead_ms: float  # mean wall time of one job above its sleep
    ratio: float  # jobs_per_s / (n × the one-worker jobs_per_s)


def sleep_command(job_ms: float) -> str:
    return f"sleep {job_ms / 1000:.3f}"


async def timed_run(
    conn: HostConnection, workers: int, jobs_per_worker: int, job_ms: float
) -> tuple[float, float]:
    """Wall seconds for `workers` workers × `jobs_per_worker` jobs, and the mean job time."""
    per_job: list[float] = []

    async def worker() -> None:
        for _ in range(jobs_per_worker):
            t0 = time.perf_counter()
            result = await conn.run(sleep_command(job_ms))
            per_job.append(time.perf_counter() - t0)
            if result.exit_status != 0:
                raise RuntimeError(f"the job failed: {result.stderr.strip()}")

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(workers)))
    return time.perf_counter() - start, sum(per_job) / len(per_job)


async def measure(
    host: Host, max_workers: int, jobs_per_worker: int, repeats: int, job_ms: float
) -> tuple[list[Row], dict[str, Any]]:
    pool = ConnectionPool()
    conn = pool.get(host)
    try:
        await conn.run("true")  # connect (and authenticate) before timing
        best: dict[int, tuple[float, float]] = {}
        for n in range(1, max_workers + 1):
            best[n] = min(
                [await timed_run(conn, n, jobs_per_worker, job_ms) for _ in range(repeats)]
            )
        info = {"connects": conn.connects, "channel_limit": conn.limiter.limit}
    finally:
        await pool.aclose()
    one = jobs_per_worker / best[1][0]
    rows = []
    for n, (seconds, mean_job) in best.items():
        rate = jobs_per_worker * n / seconds
        rows.append(
            Row(
                n,
                jobs_per_worker * n,
                seconds,
                rate,
                n * 1000 / job_ms,
                (mean_job * 1000) - job_ms,
                rate / (n * one),
            )
        )
    return rows, info


def table(rows: list[Row], where: str, job_ms: float, info: dict[str, Any]) -> str:
    lines = [
        f"SSH scaling on one connection to {where}: `{sleep_command(job_ms)}` per job, "
        f"{info['connects']} connect(s), at most {info['channel_limit']} channels",
        f"{'N':>3} {'jobs':>5} {'seconds':>8} {'jobs/s':>8} {'ideal':>8} {'+ms/job':>8} {'vs N×1':>7}",
    ]
    for r in rows:
        lines.append(
            f"{r.workers:>3} {r.jobs:>5} {r.seconds:>8.3f} {r.jobs_per_s:>8.2f} {r.ideal_jobs_per_s:>8.2f} {r.overhead_ms:>8.1f} {r.ratio:>7.3f}"
        )
    return "\n".join(lines)


@dataclass
class SshBackend:
    """bench/scaling.py's Backend protocol over one SSH connection: N slots of one device,
    each job `sleep job_ms` on its own channel."""

    host: Host
    job_ms: float
    name: str = "ssh"

    async def open(self) -> None:
        self._pool = ConnectionPool()
        await self._pool.get(self.host).run("true")

    def slots(self, n: int) -> list[Any]:
        from core.orchestration.scheduler import Slot

        return [Slot(f"{self.host.name}/cpu", i) for i in range(n)]

    async def runner(self, job: Any, slot: Any) -> None:
        await self._pool.get(self.host).run(sleep_command(self.job_ms))

    async def close(self) -> None:
        await self._pool.aclose()


def loopback_host(workdir: Path) -> tuple[Host, Any]:
    from tests.sshd import missing_prerequisite, start_sshd

    why = missing_prerequisite()
    if why:
        raise SystemExit(f"cannot start a loopback sshd: {why}; or pass --hosts FILE --host NAME")
    server = start_sshd(workdir)
    return parse_hosts({"hosts": [server.host_entry("loopback")]})[0], server


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=Path, help="a hosts file (default: start a loopback sshd)")
    parser.add_argument("--host", help="the host of --hosts to use (default: its first)")
    parser.add_argument("--max-workers", type=int, default=8)
    parser.add_argument("--jobs-per-worker", type=int, default=5)
    parser.add_argument(
        "--job-ms", type=float, default=200.0, help="how long each remote job sleeps"
    )
    parser.add_argument("--repeats", type=int, default=2, help="runs per N; the fastest is kept")
    parser.add_argument("--min-ratio", type=float, default=0.9)
    parser.add_argument(
        "--via-scheduler",
        action="store_true",
        help="run the jobs through core.orchestration.scheduler (bench/scaling.py)",
    )
    parser.add_argument(
        "--json", action="store_true", help="print one JSON object instead of the table"
    )
    args = parser.parse_args(argv)

    server = None
    with tempfile.TemporaryDirectory(prefix="arena-bench-ssh-") as tmp:
        try:
            if args.hosts:
                hosts = load_hosts(args.hosts)
                host = find_host(hosts, args.host) if args.host else hosts[0]
            else:
                host, server = loopback_host(Path(tmp))
            if args.via_scheduler:
                sys.path.insert(0, str(ROOT / "bench"))
                import scaling

                rows: list[Any] = asyncio.run(
                    scaling.measure(
                        SshBackend(host, args.job_ms),
                        args.max_workers,
                        args.jobs_per_worker,
                        args.repeats,
                        args.job_ms,
                    )
                )
                info = {"connects": "?", "channel_limit": host.max_channels}
                text = scaling.table(rows, f"ssh ({host.name})", args.job_ms)
            else:
                rows, info = asyncio.run(
                    measure(host, args.max_workers, args.jobs_per_worker, args.repeats, args.job_ms)
                )
                text = table(rows, f"{host.name} ({host.address})", args.job_ms, info)
        finally:
            if server is not None:
                server.stop()
    ok = all(r.ratio >= args.min_ratio for r in rows)
    if args.json:
        print(
            json.dumps(
                {
                    "host": host.name,
                    "address": host.address,
                    "job_ms": args.job_ms,
                    "jobs_per_worker": args.jobs_per_worker,
                    "repeats": args.repeats,
                    "via_scheduler": args.via_scheduler,
                    "min_ratio": args.min_ratio,
                    "ok": ok,
                    **info,
                    "rows": [asdict(r) for r in rows],
                },
                indent=2,
            )
        )
    else:
        print(text)
        print(
            f"{'ok' if ok else 'BELOW'}: every ratio {'≥' if ok else 'should be ≥'} {args.min_ratio}"
        )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
