"""Executors: where a resolved job runs. The evaluator never knows which one it has.

`LocalExecutor` runs jobs through a warm harness on this machine's device; remotes/ adds one
that runs them on a host in the hosts file. Both take the same job and return the same events.
"""

from __future__ import annotations

import asyncio
import json
import os
import select
import selectors
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from core.devices.device import PACKAGE_ROOT, DeviceInfo, LocalDevice, parse_device, probe
from core.devices.ids import DeviceId
from core.evaluation import locker, sandbox
from core.harness import trace
from core.model import events
from core.model.candidate import candidate_files

OnEvent = Callable[[events.Event], None]
HARNESS_START_S = 120.0


class Executor(Protocol):
    """Runs resolved jobs on one device and streams back their events."""

    device_id: str
    info: DeviceInfo

    def torch_device(self) -> str:
        """The device as the harness names it where it runs (`cuda:0` once pinned)."""
        ...

    async def run(
        self, job: dict[str, Any], job_dir: Path, deadline_s: float, on_event: OnEvent | None
    ) -> list[events.Event]:
        """Run one job (its paths point into this machine's files; `job_dir` is its local
        folder); every event goes to `on_event` as it arrives. Raises HarnessError when the
        harness or the host fails, which is never the candidate's fault."""
        ...

    def close(self) -> None: ...


class HarnessError(RuntimeError):
    """The harness itself failed (not the candidate): an infrastructure fault."""


SYSTEM_FOLDERS = (
    "/usr",
    "/lib",
    "/lib64",
    "/bin",
    "/sbin",
    "/etc",
    "/opt",
    "/var",
    "/run",
    "/srv",
    "/mnt",
    "/media",
)


def harness_policy(
    device: LocalDevice, writable: tuple[Path, ...], task_roots: tuple[Path, ...] = ()
) -> sandbox.SandboxPolicy:
    """The harness's sandbox: `writable` (its log folder, the evaluations' root) read-write;
    the arena's `core` package and Python read-only; home folders, the results store, the task
    folders (`task_roots`, and the bundled tasks) and, in a checkout, the rest of the checkout
    (tests, .git, build output: copies of task files) masked; the device's nodes bound; no
    network. A mask never falls on a folder the harness needs: there it masks what is inside."""
    from core.model.paths import default_path
    from core.tasks.discovery import bundled_tasks_root

    package = PACKAGE_ROOT.resolve()
    needed = {package / "core", *(Path(w).resolve() for w in writable)}
    masked = (
        [package] if (package / "pyproject.toml").is_file() else []
    )  # a checkout, not site-packages
    store = default_path()
    masked += (
        [store.parent.resolve()]
        if store.parent.resolve() not in needed
        else [store, Path(f"{store}-wal"), Path(f"{store}-shm")]
    )
    for root in {bundled_tasks_root().resolve(), *(Path(r).resolve() for r in task_roots)}:
        if root in needed or root.parent == root or str(root) in SYSTEM_FOLDERS:
            masked += [
                p for p in root.glob("*/*") if (p / "task.yaml").is_file()
            ]  # the tasks, not the folder
        else:
            masked.append(root)
    return sandbox.for_harness(
        writable=writable,
        read_only=(package / "core",),
        env=device.harness_env(),
        gpu=device.type not in ("cpu", "sim"),
        masked=tuple(masked),
    )


class Harness:
    """A warm harness parent on one device: started once, it evaluates job after job, forking
    fresh workers for each. It runs inside the sandbox (core/evaluation/sandbox.py); `sandbox_status` says
    how, or `unsandboxed: <reason>`. Use as a context manager."""

    def __init__(
        self, device: LocalDevice, log_dir: Path, policy: sandbox.SandboxPolicy | None = None
    ):
        self.device = device
        self.log_path = log_dir / "harness.log"
        self.policy = policy or harness_policy(device, (log_dir,))
        read_fd, write_fd = os.pipe()
        try:
            argv, env, self.sandbox_status = sandbox.wrap(
                [sys.executable, "-m", "core.harness", "serve", "--events-fd", str(write_fd)],
                self.policy,
            )
        except sandbox.SandboxUnavailable:
            os.close(read_fd)
            os.close(write_fd)
            raise  # a set-up to fix (exit 2), not a fault to retry
        except sandbox.SandboxError as exc:
            os.close(read_fd)
            os.close(write_fd)
            raise HarnessError(f"the harness's sandbox cannot start: {exc}") from None
        self.sandboxed = sandbox.is_sandboxed(self.sandbox_status)
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - the harness process writes it for its whole life; closed in close()
        # Sandboxed on NVIDIA: the checkpoint calls that keep workers for timing, from the host.
        self.locker = locker.HostLocker() if locker.wanted(device.type, self.sandboxed) else None
        self.proc = sandbox.spawn(
            argv,
            {**env, **(self.locker.env if self.locker else {}), **_trace_env(log_dir)},
            stdin=subprocess.PIPE,
            stdout=self._log,
            stderr=self._log,
            pass_fds=(write_fd, *(self.locker.pass_fds if self.locker else ())),
            start_new_session=True,
            cwd=str(log_dir),
        )
        os.close(write_fd)
        if self.locker is not None:
            self.locker.start(self.proc.pid, self._log)  # told bwrap's pid by us, not the harness
        self._events = os.fdopen(read_fd, "rb", buffering=0)
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._events, selectors.EVENT_READ)
        self._buffer = b""
        self._reading = threading.Lock()
        first = self._next(time.monotonic() + HARNESS_START_S)
        if not isinstance(first, events.HarnessReady):
            raise HarnessError(f"the harness did not start ({self.sandbox_status}): {self._tail()}")

    def __enter__(self) -> Harness:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _tail(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-2000:].strip() or "(no output)"
        except OSError:
            return "(no log)"

    def _next(self, deadline: float) -> events.Event:
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not self._selector.select(timeout=left):
                raise HarnessError("the harness sent no event before its deadline")
            chunk = os.read(self._events.fileno(), 1 << 16)
            if not chunk:
                raise HarnessError(f"the harness exited: {self._tail()}")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return events.parse(line)

    def run(
        self,
        job: Path | dict[str, Any],
        deadline_s: float,
        on_event: OnEvent | None = None,
        evaluations: int = 1,
    ) -> list[events.Event]:
        """Run one job (a job file's path, or the job itself: sent as one line of JSON on the
        harness's standard input, so it never lies on a disk where a candidate of another
        evaluation could read it while this one waits its turn; a batch job: `evaluations` of
        them); every event is passed to `on_event` as it arrives and returned."""
        assert self.proc.stdin is not None
        line = job if isinstance(job, Path) else json.dumps(job)
        with self._reading:
            try:
                self.proc.stdin.write(f"{line}\n".encode())
                self.proc.stdin.flush()
            except (BrokenPipeError, ValueError):
                raise HarnessError(f"the harness exited: {self._tail()}") from None
            deadline = time.monotonic() + deadline_s
            seen: list[events.Event] = []
            while True:
                event = self._next(deadline)
                seen.append(event)
                if on_event is not None:
                    on_event(event)
                if isinstance(event, events.EvaluationFinished):
                    evaluations -= 1
                    if evaluations <= 0:
                        return seen

    def close(self) -> None:
        if self.locker is not None:
            self.locker.close()
        try:
            os.killpg(self.proc.pid, 9)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait()
        # In the sandbox the harness dies a moment after bwrap, with its PID namespace: wait
        # for the last writer of the events pipe to go, then for a thread still reading it
        # (`run`, cancelled) to see the end. Closing the pipe under that thread would leave it
        # waiting in epoll until the job's deadline.
        hangup = select.poll()
        hangup.register(self._events.fileno(), select.POLLHUP)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and not any(
            ev & select.POLLHUP for _, ev in hangup.poll(100)
        ):
            pass
        reader_done = self._reading.acquire(timeout=5)
        self._selector.close()
        self._events.close()
        self._log.close()
        if reader_done:
            self._reading.release()


def _trace_env(log_dir: Path) -> dict[str, str]:
    """`ARENA_HARNESS_TRACE=1` in the engine's environment (profiling, bench/turn_profile.py):
    the harness traces its spans into the log folder (core/harness/trace.py). The sandbox drops
    every ARENA_* variable, so it is passed on here."""
    if os.environ.get(trace.ENV, "") in ("", "0"):
        return {}
    path = log_dir / trace.FILE_NAME
    path.touch()
    path.chmod(0o666)  # the candidate's worker runs as another user (uid 65534 under root)
    return {trace.ENV: str(path)}


def _stage_for_sandbox(
    job: dict[str, Any], job_dir: Path, policy: sandbox.SandboxPolicy
) -> dict[str, Any]:
    """Copy into the job's folder what the job names but the sandbox cannot see (a candidate
    in the host's /tmp, a home folder or a masked task folder, with its sibling CUDA/HIP
    sources; a task folder, for a job that does not carry the task's sources), so the warm
    harness never restarts for a new candidate folder."""
    job = dict(job)
    candidate = Path(job["candidate"])
    if policy.view(candidate) == "hidden":
        staged = job_dir / "candidate"
        staged.mkdir(exist_ok=True)
        for source in candidate_files(candidate):
            shutil.copy2(source, staged / source.name)
        job["candidate"] = str(staged / candidate.name)
    task_dir = Path(job["task_dir"])
    if (
        "task_sources" not in job and policy.view(task_dir) == "hidden"
    ):  # a harness that reads the folder
        staged = job_dir / "task"
        shutil.copytree(
            task_dir, staged, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__")
        )
        job["task_dir"] = str(staged)
    return job


def _forget_staged(job: dict[str, Any], staged: dict[str, Any], job_dir: Path) -> None:
    """Once its evaluation ends, the copies made for it go: the candidate's files staged into
    its folder, and its builds. No later candidate, in this harness or the next, finds them."""
    folders = [job_dir / name for name in ("torch_extensions", "triton_cache")]
    if staged.get("candidate") != job.get("candidate"):
        folders.append(Path(staged["candidate"]).parent)
    for folder in folders:
        shutil.rmtree(folder, ignore_errors=True)


class LocalExecutor:
    """A device of this machine, evaluated through one warm harness, restarted when it dies."""

    batches = (
        True  # runs batch jobs (core/evaluation/batch.py): one job, one evaluation per candidate
    )

    def __init__(self, device_id: str, log_dir: Path):
        self.device: LocalDevice = parse_device(device_id)
        # `sim:h200?escalate=...`: where the Evaluator sends a prediction that cannot decide
        self.escalation = DeviceId.parse(device_id).escalation()
        device_id = self.device.id
        self.device_id = device_id
        # Before anything runs: no sandbox and no --unsandboxed is one line and exit 2.
        self.sandbox_info: sandbox.SandboxInfo = sandbox.require()
        self.info = probe(device_id)
        self.log_dir = log_dir
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.harness: Harness | None = None
        self.task_roots: set[Path] = set()  # folders of tasks seen so far, masked in the sandbox

    def torch_device(self) -> str:
        return self.device.torch_device()

    async def run(
        self, job: dict[str, Any], job_dir: Path, deadline_s: float, on_event: OnEvent | None
    ) -> list[events.Event]:
        return await asyncio.to_thread(self._run, job, job_dir, deadline_s, on_event)

    @property
    def sandbox_status(self) -> str:
        """How this executor's harness is isolated (the running one's, else this machine's)."""
        return self.harness.sandbox_status if self.harness is not None else sandbox.sandbox_status()

    def _run(
        self, job: dict[str, Any], job_dir: Path, deadline_s: float, on_event: OnEvent | None
    ) -> list[events.Event]:
        # A job that carries its task's sources needs no task folder: the sandbox hides it.
        task_root = Path(job["task_dir"]).resolve().parent.parent
        if "task_sources" in job:
            self.task_roots.add(task_root)
        try:
            if self.harness is not None and self.harness.sandboxed and not self._fits(job, job_dir):
                self.close()  # the running sandbox cannot take this job: start one that can
            if self.harness is None:
                policy = harness_policy(
                    self.device, (self.log_dir, job_dir.parent), tuple(sorted(self.task_roots))
                )
                self.harness = Harness(self.device, self.log_dir, policy)
            staged = job
            if self.harness.sandboxed:
                staged = _stage_for_sandbox(job, job_dir, self.harness.policy)
            # Each candidate's worker covers the folders of every other evaluation and the
            # harness's logs (core/harness/isolation.py), and sees its own folder only.
            staged = {**staged, "isolation": {"hide": [str(self.log_dir), str(job_dir.parent)]}}
            sandbox.grant(job_dir)  # as root, the candidate is uid 65534, sandboxed or not
            try:
                # the job travels on the pipe, never as a file; a batch ends after one evaluation per member
                return self.harness.run(
                    staged, deadline_s, on_event, len(job.get("batch") or ()) or 1
                )
            finally:
                _forget_staged(job, staged, job_dir)
        except HarnessError:
            self.close()  # the next job starts a fresh harness
            raise

    def cpu_clock(self) -> tuple[int, float] | None:
        """(the harness's pid, the CPU seconds its process tree has used), None with no harness
        running or where /proc cannot tell: a budget that does not grow with the machine's load
        (core/evaluation/cpu_time.py)."""
        from core.evaluation.cpu_time import tree_cpu_seconds

        if self.harness is None:
            return None
        used = tree_cpu_seconds(self.harness.proc.pid)
        return None if used is None else (self.harness.proc.pid, used)

    def _fits(self, job: dict[str, Any], job_dir: Path) -> bool:
        """The running sandbox can write the job's folder and hides its task folder (when the
        job carries the task's sources)."""
        assert self.harness is not None
        view = self.harness.policy.view
        return view(job_dir) == "rw" and (
            "task_sources" not in job or view(job["task_dir"]) == "hidden"
        )

    def close(self) -> None:
        if self.harness is not None:
            self.harness.close()
            self.harness = None
