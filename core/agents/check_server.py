"""The `arena check` server: one asyncio unix-socket server per attempt.

The socket is a file in the agent's workspace (`.arena-check.sock`), so a sandboxed agent can
reach it while seeing nothing else of the arena; its path is in `ARENA_CHECK_SOCKET`. A
client sends one JSON line, `{"op": "check", "files": {"solution.py": source, ...}}` (the
solution and any sibling CUDA/HIP sources), and reads JSON lines back: `{"type": "progress",
"text": ...}` while the evaluation runs, then one `{"type": "report", "ok": ..., "text": ...}`
or `{"type": "error", "text": ...}`.

The server snapshots the files into the attempt's `submissions/` (the agent may go on editing)
and evaluates the snapshot with the `evaluate` callable it was given: the runner's, which puts
the job on the run's scheduler (the same device slots as everything else) with every hidden
workload left out of the job. The report is built from visible stages and workloads only, and
`report_text` drops anything marked hidden as a second line of defence.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.model import events
from core.model.candidate import NATIVE_SOURCES
from core.model.result import Result

EvaluateVisible = Callable[[Path, Callable[[events.Event], None]], Awaitable[Result]]
MAX_REQUEST = 8 << 20  # a solution and its sources: a few hundred KB at most
MAX_LOG = 3000  # characters of compiler output shown


class CheckError(RuntimeError):
    """A check request that cannot be served; the message is shown to the agent."""


@dataclass
class CheckStats:
    checks: int = 0
    last: Result | None = None


def bind_unix(path: Path) -> socket.socket:
    """A listening unix socket at `path`, however long the path: past the 107 bytes a socket
    address holds, it binds through /proc/self/fd/<folder>/<name> (Linux resolves it)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    with _short_address(path) as address:
        sock.bind(address)
    os.chmod(path, 0o666)  # the sandbox's uid (65534 under a root arena) must connect
    sock.listen(8)
    sock.setblocking(False)
    return sock


def connect_unix(path: Path, timeout: float | None = None) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    with _short_address(path) as address:
        sock.connect(address)
    return sock


@contextlib.contextmanager
def _short_address(path: Path):  # type: ignore[no-untyped-def]
    text = str(path)
    if len(text.encode()) < 100:
        yield text
        return
    fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        yield f"/proc/self/fd/{fd}/{path.name}"
    finally:
        os.close(fd)


class CheckServer:
    """Serves `arena check` for one attempt. `check_files` is also what an in-process agent
    calls directly (no socket needed)."""

    def __init__(
        self,
        socket_path: Path,
        submissions: Path,
        evaluate: EvaluateVisible,
        solution_name: str = "solution.py",
    ):
        self.socket_path = socket_path
        self.submissions = submissions
        self.evaluate = evaluate
        self.solution_name = solution_name
        self.stats = CheckStats()
        self._server: asyncio.AbstractServer | None = None
        self._lock = asyncio.Lock()  # one check at a time per attempt: a second one waits
        self._clients: set[asyncio.Task] = set()

    async def __aenter__(self) -> CheckServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self) -> None:
        self._server = await asyncio.start_unix_server(
            self._serve, sock=bind_unix(self.socket_path), limit=MAX_REQUEST
        )

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            for task in list(self._clients):
                task.cancel()
            await asyncio.gather(*self._clients, return_exceptions=True)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 5)
            self._server = None
        with contextlib.suppress(OSError):
            self.socket_path.unlink()

    async def check_files(
        self, files: dict[str, str], progress: Callable[[str], None] | None = None
    ) -> tuple[bool, str]:
        """Snapshot `files`, evaluate the solution on the visible workloads, return (passed, report)."""
        if self.solution_name not in files:
            raise CheckError(
                f"no {self.solution_name} was sent: run `arena check` in the workspace folder"
            )
        async with self._lock:
            self.stats.checks += 1
            folder = self.submissions / f"check-{self.stats.checks:03d}"
            folder.mkdir(parents=True, exist_ok=True)
            for name, text in files.items():
                if (
                    "/" in name
                    or name.startswith(".")
                    or not (name == self.solution_name or name.endswith(NATIVE_SOURCES))
                ):
                    raise CheckError(
                        f"`{name}` is not a file a check takes: {self.solution_name} and sibling CUDA/HIP sources only"
                    )
                (folder / name).write_text(text, encoding="utf-8")

            def on_event(event: events.Event) -> None:
                line = progress_line(event)
                if line and progress is not None:
                    progress(line)

            result = await self.evaluate(folder / self.solution_name, on_event)
            self.stats.last = result
            return result.status == "passed", report_text(result)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._clients.add(task)

        def send(message: dict[str, Any]) -> None:
            writer.write((json.dumps(message) + "\n").encode())

        try:
            try:
                request = json.loads(await reader.readline())
                if (
                    not isinstance(request, dict)
                    or request.get("op") != "check"
                    or not isinstance(request.get("files"), dict)
                ):
                    raise CheckError(
                        'a request is one JSON line: {"op": "check", "files": {"solution.py": "..."}}'
                    )
                ok, text = await self.check_files(
                    {str(k): str(v) for k, v in request["files"].items()},
                    lambda t: send({"type": "progress", "text": t}),
                )
                send({"type": "report", "ok": ok, "text": text})
            except (CheckError, ValueError) as exc:
                send({"type": "error", "text": str(exc)})
            except asyncio.CancelledError:
                send({"type": "error", "text": "the attempt ended before the check finished"})
                raise
            except Exception as exc:  # noqa: BLE001 - an infrastructure fault; the agent should know, not hang
                send(
                    {
                        "type": "error",
                        "text": f"the arena could not run the check ({type(exc).__name__}: {exc}); try again later",
                    }
                )
            with contextlib.suppress(ConnectionError):
                await writer.drain()
        finally:
            self._clients.discard(task)
            writer.close()


def progress_line(event: events.Event) -> str | None:
    """One line per visible stage as it ends (the generalization stage never runs in a check)."""
    if isinstance(event, events.StageFinished) and event.stage != "generalization":
        return f"{event.stage}: {event.status} ({event.seconds:.1f} s)"
    if isinstance(event, events.WorkloadTimed):
        return f"timed {event.workload}"
    return None


def _us(value: float | None) -> str:
    if value is None:
        return "–"
    return f"{value / 1000:.2f} ms" if value >= 1000 else f"{value:.1f} µs"


def _err(worst: dict[str, Any] | None) -> str:
    if not worst:
        return ""
    if "max_abs_err" in worst:
        where = f"output `{worst.get('output')}`" + (
            f", seed {worst['seed']}" if "seed" in worst else ""
        )
        match = (
            f", {worst['match_fraction'] * 100:.2f}% of elements within tolerance"
            if worst.get("match_fraction") is not None
            else ""
        )
        return f"{where}: max abs error {worst['max_abs_err']:.3g}, max rel error {worst.get('max_rel_err', float('nan')):.3g}{match}"
    return str(worst.get("error") or worst.get("message") or "")


def report_text(result: Result) -> str:
    """What `arena check` prints: visible stages and workloads only."""
    device = result.device or {}
    lines = [
        f"arena check: {result.task_id} on {device.get('id', '?')} ({device.get('model') or device.get('vendor') or '?'}), "
        f"solution sha256 {result.candidate_sha256[:12]}"
    ]
    for stage in result.stages:
        if stage.name == "generalization":
            continue
        seconds = f" ({stage.seconds:.1f} s)" if stage.seconds is not None else ""
        lines.append(f"{stage.name:<12} {stage.status}{seconds}")
        if stage.status not in ("passed", "skipped") and stage.message:
            lines.append("  " + stage.message.strip().replace("\n", "\n  "))
        if (
            result.timing_kind == "external"
            and stage.name != "compile"
            and stage.log.strip()
            and stage.status not in ("passed", "skipped")
        ):
            lines.append(
                "  the task's own output (last lines):\n  "
                + stage.log.strip()[-MAX_LOG:].replace("\n", "\n  ")
            )
        if stage.name == "compile" and stage.log.strip() and stage.status != "passed":
            lines.append(
                "  compiler output (last lines):\n  "
                + stage.log.strip()[-MAX_LOG:].replace("\n", "\n  ")
            )
        if stage.name == "correctness" and stage.workloads:
            shown = [w for w in stage.workloads if not w.get("hidden")]
            worst = max(
                shown,
                key=lambda w: (not w.get("passed"), (w.get("worst") or {}).get("max_abs_err", 0.0)),
                default=None,
            )
            passed = sum(1 for w in shown if w.get("passed"))
            lines.append(f"  {passed}/{len(shown)} visible workloads correct")
            for w in shown:
                mark = "ok " if w.get("passed") else "BAD"
                lines.append(
                    f"  {mark} {w['label']}" + (f": {w['message']}" if w.get("message") else "")
                )
            if worst is not None and worst.get("worst"):
                lines.append(f"  worst error ({worst['label']}): {_err(worst['worst'])}")
    timed = [w for w in result.workloads if not w.hidden]
    if timed:
        lines.append(
            f"  {'workload':<28} {'yours (median)':>15} {'baseline':>12} {'speedup':>8} {'SOL':>7}"
        )
        for w in timed:
            sol = f"{w.sol_fraction * 100:.1f}%" if w.sol_fraction is not None else "–"
            lines.append(
                f"  {w.label:<28} {_us(w.candidate.get('median_us')):>15} {_us(w.baseline.get('median_us')):>12} {w.speedup:>7.2f}× {sol:>7}"
            )
    if result.status == "passed":
        sol = f"{result.sol_fraction * 100:.1f}%" if result.sol_fraction is not None else "–"
        if (
            result.timing_kind == "external"
        ):  # core/tasks/external.py: its own commands' cases and rule
            lines.append(
                f"external task: speedup {result.speedup:.2f}× (mean of its per-case ratios, by its own rules)"
            )
        else:
            lines.append(
                f"visible workloads: speedup {result.speedup:.2f}× (geometric mean), fraction of speed of light {sol}"
            )
        if result.timing_kind == "cpu":
            lines.append(
                "(cpu timings: Triton runs in its interpreter here; shown for information, never ranked)"
            )
    else:
        lines.append(
            f"FAILED at {result.failed_stage or 'an infrastructure fault'}: the final score would be zero as it stands"
        )
    for flag in result.integrity_flags:
        lines.append(f"integrity: {flag}")
    lines.append("hidden workloads are not run by `arena check`; the final score runs them too.")
    return "\n".join(lines)
