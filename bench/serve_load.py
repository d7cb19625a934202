"""Load on `arena serve` over loopback: many concurrent clients on /health, on /reset + /step
(the CPU device), and on the leaderboard's event stream while results land in the store.
Every phase is bounded in count and in time, and the bench stops by itself.

The server runs as its own process (`arena serve --port 0`, a fresh store, the fixture tasks),
as a trainer would reach it; the clients are asyncio connections with keep-alive in this one.
A request is lost when it gets no answer; an error is any answer but 200. Both must be zero:
the phases stay within the documented limits (docs/web.md: 256 requests, 256 streams, 256
queued evaluations at once).

    python bench/serve_load.py                                # the figures in docs/performance.md
    python bench/serve_load.py --health-clients 128 --streams 250 --json bench/results/cpu_serve_load.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from core.store.db import Store
from tests.web_sample import CPU, add

AXPY = "import torch\n\ndef run(x, b):\n    return torch.add(b, x, alpha=2)\n"


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--health-clients", type=int, default=64, help="concurrent /health clients (default 64)"
    )
    p.add_argument(
        "--health-requests",
        type=int,
        default=50,
        help="requests per /health client, on one keep-alive connection (default 50)",
    )
    p.add_argument(
        "--episodes",
        type=int,
        default=16,
        help="concurrent episodes: a /reset, then --steps /step each (default 16)",
    )
    p.add_argument("--steps", type=int, default=2, help="steps per episode (default 2)")
    p.add_argument(
        "--streams", type=int, default=200, help="concurrent event-stream clients (default 200)"
    )
    p.add_argument(
        "--results",
        type=int,
        default=20,
        help="results written to the store while the streams listen (default 20)",
    )
    p.add_argument(
        "--phase-timeout",
        type=float,
        default=240.0,
        help="seconds any phase may take (default 240)",
    )
    p.add_argument("--json", type=Path, help="also write the figures here")
    return p.parse_args()


class Client:
    """One keep-alive HTTP/1.1 connection (Content-Length bodies: what uvicorn answers)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.reader, self.writer = reader, writer

    @classmethod
    async def connect(cls, port: int) -> Client:
        return cls(*await asyncio.open_connection("127.0.0.1", port))

    async def call(self, method: str, path: str, body: Any = None) -> tuple[int, dict[str, Any]]:
        data = json.dumps(body).encode() if body is not None else b""
        self.writer.write(
            f"{method} {path} HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n".encode()
            + data
        )
        await self.writer.drain()
        status = int((await self.reader.readline()).split()[1])
        length = 0
        while (line := await self.reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode("latin-1").partition(":")
            if name.lower() == "content-length":
                length = int(value)
        return status, json.loads(await self.reader.readexactly(length)) if length else {}

    def close(self) -> None:
        self.writer.close()


def figures(latencies: list[float], seconds: float, sent: int, errors: int) -> dict[str, Any]:
    qs = statistics.quantiles(latencies, n=100) if len(latencies) > 1 else latencies * 99
    return {
        "requests": sent,
        "answered": len(latencies),
        "lost": sent - len(latencies) - errors,
        "errors": errors,
        "seconds": round(seconds, 2),
        "per_second": round(len(latencies) / seconds, 1),
        "p50_ms": round(qs[49] * 1000, 2),
        "p99_ms": round(qs[98] * 1000, 2),
        "max_ms": round(max(latencies) * 1000, 2),
    }


async def health(port: int, clients: int, each: int) -> dict[str, Any]:
    latencies: list[float] = []
    errors = 0

    async def one() -> None:
        nonlocal errors
        c = await Client.connect(port)
        try:
            for _ in range(each):
                t = time.perf_counter()
                status, body = await c.call("GET", "/health")
                if status == 200 and body.get("status") == "healthy":
                    latencies.append(time.perf_counter() - t)
                else:
                    errors += 1
        finally:
            c.close()

    t0 = time.perf_counter()
    await asyncio.gather(*(one() for _ in range(clients)))
    return figures(latencies, time.perf_counter() - t0, clients * each, errors)


async def episodes(port: int, count: int, steps: int) -> dict[str, Any]:
    resets: list[float] = []
    stepped: list[float] = []
    errors = 0

    async def one(i: int) -> None:
        nonlocal errors
        c = await Client.connect(port)
        try:
            t = time.perf_counter()
            status, r = await c.call(
                "POST", "/reset", {"task_id": "elementwise/axpy", "seed": i, "max_turns": steps + 1}
            )
            if status != 200:
                errors += 1 + steps
                return
            resets.append(time.perf_counter() - t)
            for _ in range(steps):
                t = time.perf_counter()
                status, s = await c.call(
                    "POST", "/step", {"episode_id": r["episode_id"], "action": {"code": AXPY}}
                )
                if status == 200 and s["reward"] is not None and s["reward"] > 0:
                    stepped.append(time.perf_counter() - t)
                else:
                    errors += 1
        finally:
            c.close()

    warm = time.perf_counter()
    c = await Client.connect(port)  # the harness starts once per slot: pay it before the clock runs
    status, _ = await c.call(
        "POST", "/evaluate", {"task_id": "elementwise/axpy", "code": AXPY, "visible_only": True}
    )
    c.close()
    warmup_s = round(time.perf_counter() - warm, 1)
    if status != 200:
        errors += 1
    t0 = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(count)))
    seconds = time.perf_counter() - t0
    return {
        "warmup_s": warmup_s,
        "reset": figures(resets, seconds, count, 0),
        "step": figures(stepped, seconds, count * steps, 0),
        "errors": errors,
        "steps_per_minute": round(len(stepped) / seconds * 60, 1),
    }


async def streams(port: int, db: Path, count: int, results: int) -> dict[str, Any]:
    """`count` clients hold /api/events open; `results` results are then recorded into the store
    from this process (another connection, as `arena run` would); every client must hear every one."""
    heard: list[dict[int, float]] = [{} for _ in range(count)]
    ready = 0
    refused = 0

    async def listen(i: int, done: asyncio.Event) -> None:
        nonlocal ready, refused
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(
            b"GET /api/events HTTP/1.1\r\nHost: bench\r\nAccept: text/event-stream\r\n\r\n"
        )
        status = int((await reader.readline()).split()[1])
        if status != 200:
            refused += 1
            writer.close()
            return
        ready += 1
        while not done.is_set():
            try:
                line = await asyncio.wait_for(reader.readline(), 0.5)
            except asyncio.TimeoutError:
                continue
            if line.startswith(b"data: {") and b'"results"' in line:
                for r in json.loads(line[6:])["results"]:
                    heard[i].setdefault(r["job_id"], time.perf_counter())
        writer.close()

    done = asyncio.Event()
    tasks = [asyncio.create_task(listen(i, done)) for i in range(count)]
    while ready + refused < count:
        await asyncio.sleep(0.05)
    written: dict[int, float] = {}
    with Store.open(db) as store:
        run = store.create_run("load")
        folder = db.parent / "load-candidates"
        folder.mkdir(exist_ok=True)
        for k in range(results):
            job = add(
                store,
                run,
                folder,
                f"load-{k % 4}",
                "elementwise/axpy",
                1.0 + k / 10,
                CPU,
                timing="cpu",
                sol=None,
            )
            written[job] = time.perf_counter()
            await asyncio.sleep(0.1)
    deadline = time.monotonic() + 30
    while any(len(h) < results for h in heard[:ready]) and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    done.set()
    await asyncio.gather(*tasks)
    delays = [at - written[job] for h in heard for job, at in h.items() if job in written]
    missed = sum(results - len(h) for h in heard[:ready])
    qs = statistics.quantiles(delays, n=100) if len(delays) > 1 else delays * 99
    return {
        "streams": count,
        "refused": refused,
        "results": results,
        "deliveries": len(delays),
        "missed": missed,
        "p50_ms": round(qs[49] * 1000, 1),
        "p99_ms": round(qs[98] * 1000, 1),
        "max_ms": round(max(delays) * 1000, 1) if delays else None,
    }


async def bounded(what: str, coro: Any, timeout: float) -> Any:
    t = time.perf_counter()
    out = await asyncio.wait_for(coro, timeout)
    print(f"{what}: {json.dumps(out)} ({time.perf_counter() - t:.1f} s)", flush=True)
    return out


def main() -> int:
    args = parse()
    with tempfile.TemporaryDirectory(prefix="arena-load-") as tmp:
        db = Path(tmp) / "arena.db"
        cmd = [
            sys.executable,
            "-m",
            "arena_tui.cli",
            "--db",
            str(db),
            "--tasks-dir",
            str(ROOT / "tests" / "fixtures" / "tasks"),
            "serve",
            "--port",
            "0",
        ]
        server = subprocess.Popen(
            cmd,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "300"},
        )
        try:
            line = server.stdout.readline()  # type: ignore[union-attr]
            found = re.search(r"http://127\.0\.0\.1:(\d+)", line)
            if not found:
                print(
                    f"the server did not start: {line}{server.stdout.read() if server.poll() is not None else ''}",
                    file=sys.stderr,
                )  # type: ignore[union-attr]
                return 1
            port = int(found.group(1))
            print(f"arena serve on 127.0.0.1:{port} (pid {server.pid})", flush=True)

            async def phases() -> dict[str, Any]:
                return {
                    "health": await bounded(
                        "health",
                        health(port, args.health_clients, args.health_requests),
                        args.phase_timeout,
                    ),
                    "episodes": await bounded(
                        "reset/step", episodes(port, args.episodes, args.steps), args.phase_timeout
                    ),
                    "events": await bounded(
                        "event stream",
                        streams(port, db, args.streams, args.results),
                        args.phase_timeout,
                    ),
                }

            out = asyncio.run(phases())
        finally:
            server.terminate()  # SIGTERM: the server drains and stops
            server.wait(60)
    out["config"] = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    out["machine"] = {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "load_average_1min_at_end": round(os.getloadavg()[0], 2),
    }  # other work on the machine skews every figure
    ok = (
        out["health"]["lost"] == out["health"]["errors"] == 0
        and out["episodes"]["errors"] == 0
        and out["episodes"]["step"]["lost"] == 0
        and out["events"]["missed"] == 0
        and out["events"]["refused"] == 0
    )
    out["verdict"] = "no request lost, no error" if ok else "LOST OR FAILED REQUESTS"
    print(out["verdict"])
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=2) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
