"""`arena serve` under faults, on loopback: N evaluations through the server while a harness is
killed, the store's disk fills up, and the server is SIGTERMed; then a restart. Every accepted
evaluation must end with exactly one stored result or a clear refusal (a 4xx/503 JSON that says
why); a request that got no answer after its connection was accepted is a violation, and so is
any other 5xx. Every phase is bounded in count and time; the bench stops by itself.

Each request's source is unique (a comment with its number), so its stored result is found by
the candidate's sha256. The server runs as its own process (`arena serve --port 0`, the fixture
tasks, a fresh store); the store lives on a small tmpfs where one can be mounted (root), so the
disk can really fill up; elsewhere that phase is skipped and the JSON says so.

    PYTHONPATH=. python3 bench/serve_faults.py --out bench/results/cpu_serve_faults            # the CPU figures
    PYTHONPATH=. python3 bench/serve_faults.py --device cuda:0 --out DIR                        # a GPU box (harnesses on the GPU)
    PYTHONPATH=. python3 bench/serve_faults.py --fake --out DIR                                 # no harness: the server alone
    python3 bench/serve_faults.py --table DIR/serve_faults.json                                 # the docs table from the JSON
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import http.client
import json
import os
import platform
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TASKS = ROOT / "tests" / "fixtures" / "tasks"
TASK = "elementwise/axpy"
SOURCE = (TASKS / "elementwise" / "axpy" / "starter.py").read_text()


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--device", default="cpu", help="the server's device (default cpu)")
    p.add_argument("--slots", type=int, default=2, help="--cpu-slots of the server (default 2)")
    p.add_argument("--evaluations", type=int, default=24, help="evaluations per phase (default 24)")
    p.add_argument("--concurrency", type=int, default=8, help="requests at once (default 8)")
    p.add_argument("--grace", type=float, default=5.0, help="the server's --grace (default 5 s)")
    p.add_argument(
        "--fake",
        action="store_true",
        help="the fake executor (tests/fakes): no harness, no kill phase",
    )
    p.add_argument(
        "--fake-delay", type=float, default=0.3, help="seconds per fake evaluation (default 0.3)"
    )
    p.add_argument("--unsandboxed", action="store_true", help="pass --unsandboxed to the server")
    p.add_argument(
        "--phase-timeout",
        type=float,
        default=300.0,
        help="seconds any phase may take (default 300)",
    )
    p.add_argument("--out", type=Path, help="write DIR/serve_faults.json")
    p.add_argument(
        "--table", type=Path, help="print the docs table from a serve_faults.json and exit"
    )
    return p.parse_args()


# --- the server ---------------------------------------------------------------------------------


class Server:
    def __init__(self, args: argparse.Namespace, db: Path, tmp: Path):
        self.args, self.db, self.tmp = args, db, tmp
        module = "tests.fakes.executor" if args.fake else "arena_tui.cli"
        argv = [sys.executable, "-m", module, "--db", str(db), "--tasks-dir", str(TASKS)]
        argv += ["--unsandboxed"] if args.unsandboxed or args.fake else []
        argv += ["serve", "--port", "0", "--device", args.device, "--cpu-slots", str(args.slots),
                 "--grace", str(args.grace), "--max-queue", "512"]  # fmt: skip
        env = {**os.environ, "TMPDIR": str(tmp), "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
               "ARENA_FAKE_DELAY_S": str(args.fake_delay)}  # fmt: skip
        self.proc = subprocess.Popen(
            argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        self.lines: list[str] = []
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip())
            found = re.search(r"http://127\.0\.0\.1:(\d+)", line)
            if found:
                self.port = int(found.group(1))
                break
        else:
            raise SystemExit("the server did not start:\n" + "\n".join(self.lines))
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip())

    def harness_pids(self) -> list[int]:
        """The harness parents below the server (`python -m core.harness serve`)."""
        children: dict[int, list[int]] = {}
        for stat in Path("/proc").glob("[0-9]*/stat"):
            with contextlib.suppress(OSError, ValueError, IndexError):
                fields = stat.read_text().rsplit(")", 1)[1].split()
                children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
        below, todo = [], [self.proc.pid]
        while todo:
            for child in children.get(todo.pop(), []):
                below.append(child)
                todo.append(child)
        out = []
        for pid in below:
            with contextlib.suppress(OSError):
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                if b"core.harness" in cmd and b"serve" in cmd:
                    out.append(pid)
        return out


def request(
    port: int, method: str, path: str, body: Any = None, timeout: float = 600
) -> dict[str, Any]:
    """One request: {status, body, seconds, sent}; status 0 and `error` when it got no answer
    (`connected`: whether the server had accepted the connection)."""
    start = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    connected = False
    try:
        conn.connect()
        connected = True
        data = json.dumps(body).encode() if body is not None else None
        conn.request(method, path, body=data, headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        raw = response.read()
        payload = json.loads(raw) if raw else None
        return {"status": response.status, "body": payload, "seconds": time.perf_counter() - start}
    except (OSError, http.client.HTTPException, json.JSONDecodeError) as exc:
        return {"status": 0, "error": f"{type(exc).__name__}: {exc}", "connected": connected,
                "seconds": time.perf_counter() - start}  # fmt: skip
    finally:
        conn.close()


def source(n: int) -> str:
    return f"{SOURCE}\n# bench request {n}\n"


def sha(n: int) -> str:
    return hashlib.sha256(source(n).encode()).hexdigest()


class Phase:
    """N evaluations at --concurrency, /health probed every 50 ms meanwhile; `during` runs
    once the first `after` answers are in (the fault)."""

    def __init__(self, name: str, first: int, args: argparse.Namespace):
        self.name, self.first, self.args = name, first, args
        self.answers: dict[int, dict[str, Any]] = {}
        self.health: list[float] = []
        self.notes: dict[str, Any] = {}

    def run(self, server: Server, during: Any = None, after: int = 0) -> None:
        args, stop = self.args, threading.Event()
        numbers = range(self.first, self.first + args.evaluations)

        def probe() -> None:
            while not stop.is_set():
                r = request(server.port, "GET", "/health", timeout=10)
                if r["status"] == 200:
                    self.health.append(r["seconds"])
                time.sleep(0.05)

        def one(n: int) -> None:
            self.answers[n] = request(server.port, "POST", "/evaluate", {"task_id": TASK, "code": source(n), "agent": "bench"},
                                      timeout=args.phase_timeout)  # fmt: skip

        prober = threading.Thread(target=probe, daemon=True)
        prober.start()
        start = time.perf_counter()
        with ThreadPoolExecutor(args.concurrency) as pool:
            futures = [pool.submit(one, n) for n in numbers]
            if during is not None:
                deadline = time.monotonic() + args.phase_timeout
                while len(self.answers) < after and time.monotonic() < deadline:
                    time.sleep(0.05)
                self.notes.update(during() or {})
            for f in futures:
                f.result(timeout=args.phase_timeout)
        self.seconds = time.perf_counter() - start
        stop.set()
        prober.join(15)


# --- the faults ---------------------------------------------------------------------------------


def kill_harness(server: Server) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while not (pids := server.harness_pids()) and time.monotonic() < deadline:
        time.sleep(0.1)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return {"harness_processes_killed": len(pids)}  # the parents, their zygotes and workers, bwrap


@contextlib.contextmanager
def small_disk(folder: Path, size: str = "32m"):  # type: ignore[no-untyped-def]
    folder.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
        check=False,
        capture_output=True,
        text=True,
    )
    try:
        yield mounted.returncode == 0, mounted.stderr.strip()
    finally:
        if mounted.returncode == 0:
            subprocess.run(["umount", "-l", str(folder)], check=False)


def fill(folder: Path) -> Path:
    filler = folder / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:
        for chunk in (1 << 20, 4096, 1):
            with contextlib.suppress(OSError):
                while os.write(fd, b"\0" * chunk):
                    pass
    finally:
        os.close(fd)
    return filler


# --- accounting ---------------------------------------------------------------------------------


def account(phases: list[Phase], db: Path, gone_after: float | None = None) -> dict[str, Any]:
    """Each request against the store: a 200 has exactly one stored result with its sha256, a
    refusal has none and a message; anything else is a violation."""
    sys.path.insert(0, str(ROOT))
    from core.store.db import Store

    with Store.open(db, mode="ro") as store:
        stored: dict[str, int] = {}
        for row in store._read("SELECT candidate_sha256 FROM results"):
            stored[row[0]] = stored.get(row[0], 0) + 1
    out: dict[str, Any] = {}
    for phase in phases:
        counts: dict[str, int] = {}
        violations = []
        for n, r in sorted(phase.answers.items()):
            kept = stored.get(sha(n), 0)
            message = (
                (r.get("body") or {}).get("error", {}).get("message")
                if r["status"] != 200
                else None
            )
            if r["status"] == 200 and kept == 1:
                kind = "result"
            elif r["status"] in (400, 413, 429, 503) and kept == 0 and message:
                kind = f"refused {r['status']}"
            elif r["status"] == 0 and not r.get("connected") and phase.notes.get("signalled"):
                kind = "refused: server gone"  # a connection refused after the server exited
            else:
                kind = "violation"
                violations.append(
                    {
                        "n": n,
                        "status": r["status"],
                        "stored": kept,
                        "error": r.get("error") or message,
                    }
                )
            counts[kind] = counts.get(kind, 0) + 1
        latency = sorted(r["seconds"] for r in phase.answers.values() if r["status"] == 200)
        verdicts: dict[str, int] = {}  # what the answered evaluations scored
        for r in phase.answers.values():
            if r["status"] == 200:
                status = r["body"]["result"]["status"]
                verdicts[status] = verdicts.get(status, 0) + 1
        out[phase.name] = {
            "requests": len(phase.answers),
            "outcomes": counts,
            "verdicts": verdicts,
            "violations": violations,
            "seconds": round(phase.seconds, 2),
            "evaluations_per_min": round(60 * counts.get("result", 0) / phase.seconds, 1)
            if phase.seconds
            else None,
            "evaluate_p50_s": round(statistics.median(latency), 3) if latency else None,
            "health_p50_ms": round(1000 * statistics.median(phase.health), 1)
            if phase.health
            else None,
            "health_max_ms": round(1000 * max(phase.health), 1) if phase.health else None,
            **phase.notes,
        }
    return out


def main() -> int:
    args = parse()
    if args.table:
        print(table(json.loads(args.table.read_text())))
        return 0
    sys.path.insert(0, str(ROOT))
    tmp = Path(tempfile.mkdtemp(prefix="serve-faults-"))
    with small_disk(tmp / "disk") as (mounted, why):
        db = (tmp / "disk" if mounted else tmp) / "arena.db"
        server = Server(args, db, tmp)
        phases: list[Phase] = []
        n = 0

        def phase(name: str, **kw: Any) -> Phase:
            nonlocal n
            p = Phase(name, n, args)
            n += args.evaluations
            t = time.perf_counter()
            p.run(server, **kw)
            print(f"{name}: {len(p.answers)} requests, {time.perf_counter() - t:.1f} s", flush=True)
            phases.append(p)
            return p

        phase("soak")
        if args.fake:
            print("harness_killed: skipped (the fake executor starts no harness)")
        else:
            phase("harness_killed", during=lambda: kill_harness(server), after=2)
        if mounted:
            filler: list[Path] = []

            def full() -> dict[str, Any]:
                filler.append(fill(tmp / "disk"))
                return {"disk": "tmpfs 32 MiB, filled"}

            phase("store_full", during=full, after=args.evaluations // 3)
            filler[0].unlink()
            phase("store_freed")
        else:
            print(f"store_full: skipped (no tmpfs: {why})")

        def sigterm() -> dict[str, Any]:
            server.proc.send_signal(signal.SIGTERM)
            return {"signalled": True, "signalled_at": time.perf_counter()}

        t0 = time.perf_counter()
        last = phase("sigterm", during=sigterm, after=max(1, args.evaluations // 4))
        code = server.proc.wait(timeout=args.phase_timeout)
        slow = [line for line in server.lines if " took " in line and "Executing" in line]
        last.notes["exit_code"] = code
        last.notes["drain_s"] = round(time.perf_counter() - last.notes.pop("signalled_at", t0), 2)
        left = [p.name for p in tmp.glob("arena-*")]
        restart = Server(args, db, tmp)
        after = request(restart.port, "GET", "/health")
        restart.proc.send_signal(signal.SIGTERM)
        restart.proc.wait(timeout=60)
        figures = {
            "bench": "serve_faults",
            "machine": platform.node(),
            "python": platform.python_version(),
            "device": args.device,
            "fake": args.fake,
            "evaluations_per_phase": args.evaluations,
            "concurrency": args.concurrency,
            "slots": args.slots,
            "grace_s": args.grace,
            "store_full_phase": "tmpfs" if mounted else f"skipped: {why}",
            "phases": account(phases, db),
            # With PYTHONASYNCIODEBUG=1: every step of the server's loop that took > 100 ms.
            "slow_loop_steps": [line[-300:] for line in slow],
            "server_log_tail": [line[-300:] for line in server.lines if line not in slow][-40:],
            "after_sigterm": {
                "exit_code": code,
                "folders_left": left,
                "restart_health": after["status"],
                "restart_log": restart.lines[:6],
            },
        }
        figures["violations"] = sum(len(p["violations"]) for p in figures["phases"].values())
    text = json.dumps(figures, indent=2)
    print(text)
    print(table(figures))
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "serve_faults.json").write_text(text + "\n")
    return 1 if figures["violations"] else 0


def table(f: dict[str, Any]) -> str:
    """The docs/performance.md table (regenerated from the JSON alone)."""
    rows = ["| phase | requests | results | refused | violations | evals/min | evaluate p50 | /health p50 / max |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]  # fmt: skip
    for name, p in f["phases"].items():
        refused = sum(v for k, v in p["outcomes"].items() if k.startswith("refused"))
        extra = ", ".join(f"{k} {v}" for k, v in p["outcomes"].items() if k.startswith("refused"))
        rows.append(
            f"| {name} | {p['requests']} | {p['outcomes'].get('result', 0)} | {refused}{f' ({extra})' if extra else ''} | "
            f"{len(p['violations'])} | {p['evaluations_per_min']} | {p['evaluate_p50_s']} s | "
            f"{p['health_p50_ms']} / {p['health_max_ms']} ms |"
        )
    a = f["after_sigterm"]
    rows.append("")
    rows.append(
        f"{f['device']}{' (fake executor)' if f['fake'] else ''}, {f['evaluations_per_phase']} evaluations a phase, "
        f"{f['concurrency']} at once, {f['slots']} slots, --grace {f['grace_s']:g} s; store-full phase: {f['store_full_phase']}. "
        f"After SIGTERM: exit {a['exit_code']}, {len(a['folders_left'])} temporary folders left, restart /health {a['restart_health']}."
    )
    return "\n".join(rows)


if __name__ == "__main__":
    sys.exit(main())
