"""The worker processes' plumbing: the parent's handle on a worker, and a worker's first steps.

`Worker` is a worker process and its socket (`Worker.fork` forks it from this process: the
trusted worker; `Worker.spawn` has the zygote fork it: the candidate worker, whose memory must
not hold the job). Each worker leads its own process group and dies with its parent
(`PR_SET_PDEATHSIG`). A worker keeps no descriptor of its parent's but its own socket:
standard input is /dev/null, standard output and error go to its log (`redirect_output`),
everything else is closed at fork (`close_inherited`), so nothing the candidate writes can
reach the engine's events (docs/integrity.md). What a candidate's process may use is reduced
here too: no core files, a memory limit on CPU devices (`limit_resources`), and, run as root,
no capabilities (`drop_capabilities`).
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal
import socket
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from core.harness import channel, trace

PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS = 1, 4, 24, 38
LINUX_CAPABILITY_VERSION_3 = 0x20080522


class WorkerDied(RuntimeError):
    """The worker process exited; `reason` says how (signal, exit code)."""

    def __init__(self, name: str, reason: str):
        self.name, self.reason = name, reason
        super().__init__(f"{name} worker {reason}")


class WorkerTimeout(TimeoutError):
    pass


class Worker:
    """A worker process and its socket; `request` sends one message and waits for the reply.

    `Worker.fork` forks it from this process (the trusted worker); `Worker.spawn` has the zygote
    fork it (the candidate worker, whose memory must not hold the job)."""

    def __init__(
        self, name: str, pid: int, conn: socket.socket, wait: Callable[[int, float], int | None]
    ):
        self.name, self.pid, self.conn, self._waitpid = name, pid, conn, wait
        self.returncode: int | None = None

    @classmethod
    def fork(cls, name: str, main: Callable[..., None], job: dict[str, Any]) -> Worker:
        parent_end, child_end = socket.socketpair()
        parent_pid = os.getpid()
        pid = os.fork()
        if pid == 0:  # the worker: never returns into the parent's code
            code = 1
            try:
                parent_end.detach()
                bootstrap(child_end, parent_pid)
                main(child_end, job)
                code = 0
            except BaseException:  # noqa: BLE001 - reported in the worker's log, then exit
                print_exc()
            finally:
                os._exit(code)
        try:
            os.setpgid(pid, pid)  # also done by the child: whichever runs first wins the race
        except OSError:
            pass
        child_end.close()
        return cls(name, pid, parent_end, waitpid)

    @classmethod
    def spawn(cls, name: str, zygote: Any, job: dict[str, Any]) -> Worker:
        """A candidate worker forked by `zygote`, then handed `job` (a `candidate_view`)."""
        pid, conn = zygote.spawn()
        worker = cls(name, pid, conn, zygote.wait)
        worker.send({"op": "init", "job": job})
        return worker

    def send(self, header: dict[str, Any], payload: bytes | bytearray | None = None) -> None:
        try:
            channel.send(self.conn, header, payload)
        except OSError:
            raise WorkerDied(self.name, self.exit_reason()) from None

    def recv(
        self, timeout: float, max_payload: int | None = None
    ) -> tuple[dict[str, Any], bytearray | None]:
        try:
            return channel.recv(self.conn, timeout, max_payload)
        except channel.ChannelTimeout:
            raise WorkerTimeout(
                f"{self.name} worker did not answer within {timeout:.0f} s"
            ) from None
        except channel.ChannelClosed as closed:
            reason = self.exit_reason()
            if reason == "stopped answering" and str(closed).startswith("malformed"):
                reason = f"wrote something that is not a message of the harness into its channel ({closed})"
            raise WorkerDied(self.name, reason) from None

    def request(
        self,
        header: dict[str, Any],
        timeout: float,
        payload: bytes | bytearray | None = None,
        max_payload: int | None = None,
    ) -> tuple[dict[str, Any], bytearray | None]:
        with trace.span(f"{self.name} {header.get('op')}"):
            self.send(header, payload)
            return self.recv(timeout, max_payload)

    def _wait(self, timeout: float) -> bool:
        if self.returncode is None:
            try:
                self.returncode = self._waitpid(self.pid, timeout)
            except (
                RuntimeError,
                OSError,
                ValueError,
            ):  # the zygote is gone, and with it the worker
                self.returncode = -signal.SIGKILL
        return self.returncode is not None

    def exit_reason(self) -> str:
        if not self._wait(2):
            return "stopped answering"
        return describe_exit(self.returncode)  # type: ignore[arg-type]

    def signal_kill(self) -> None:
        """SIGKILL the worker's whole process group and return at once: several workers
        signalled before any is waited for die together (a GPU process's exit tears down its
        CUDA context, a few hundred ms each)."""
        for target in (
            lambda: os.killpg(self.pid, signal.SIGKILL),
            lambda: os.kill(self.pid, signal.SIGKILL),
        ):
            try:
                target()
            except (ProcessLookupError, PermissionError):
                pass

    def kill(self) -> None:
        """Kill the worker's whole process group: whatever it started dies with it (what left
        the group is the zygote's to find)."""
        self.signal_kill()
        self._wait(5)
        self.conn.close()


def describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"was killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


def waitpid(pid: int, timeout: float) -> int | None:
    """Reap child `pid` if it exits within `timeout`: its exit code (negative: the signal)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return 0  # reaped elsewhere: it is gone
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.01)


def print_exc() -> None:
    try:
        traceback.print_exc()
        sys.stderr.flush()
    except BaseException:  # noqa: BLE001
        pass


def bootstrap(conn: socket.socket, parent_pid: int) -> None:
    """A new worker's first steps: its own process group, death with its parent, and no
    descriptor but `conn` (and 0-2)."""
    try:
        os.setpgid(0, 0)
    except OSError:
        pass
    die_with_parent(parent_pid)
    close_inherited(keep=conn.fileno())
    trace.reopen()  # its spans still reach the harness's trace once its view of files narrows


def libc() -> Any:
    return ctypes.CDLL(None, use_errno=True)


def die_with_parent(parent_pid: int) -> None:
    try:
        libc().prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # not Linux: the parent's finally-block kill still applies
    if os.getppid() != parent_pid:  # the parent died before the death signal was armed
        os._exit(1)


def close_inherited(keep: int) -> None:
    """Standard input becomes /dev/null; every descriptor but `keep` and 1, 2 is closed (1 and 2
    are pointed at the worker's log next). The engine's events pipe, the parent's job queue on
    standard input and the sockets of other workers are all out of reach."""
    null = os.open(os.devnull, os.O_RDWR)
    if null != 0:
        os.dup2(null, 0)
        os.close(null)
    try:
        fds = [int(name) for name in os.listdir("/proc/self/fd")]
    except OSError:
        fds = list(range(3, 4096))
    for fd in fds:
        if fd > 2 and fd != keep:
            try:
                os.close(fd)
            except OSError:
                pass


def redirect_output(log_path: Path) -> None:
    """Whatever the worker prints (compiler output included) goes to its log, never to the
    descriptors the engine reads."""
    sys.stdout.flush()
    sys.stderr.flush()
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


# --- what the candidate's process may use: limits, privileges -------------------------------


def _vm_data_bytes() -> int:
    try:
        with open("/proc/self/status") as f:
            lines = f.readlines()
        for line in lines:
            if line.startswith("VmData:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _lower_limit(which: int, value: int) -> None:
    _, hard = resource.getrlimit(which)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    try:
        resource.setrlimit(which, (value, value))
    except (ValueError, OSError):
        pass


def limit_resources(memory_bytes: int | None) -> None:
    """No core files; at most `memory_bytes` more private memory than the worker holds now
    (RLIMIT_DATA; CPU devices only: GPU drivers reserve address space in ways that a limit
    would break). No process limit here: RLIMIT_NPROC counts every thread of the user, and
    only the sandbox, with a user namespace of its own, can bound one evaluation's."""
    _lower_limit(resource.RLIMIT_CORE, 0)
    if memory_bytes:
        _lower_limit(resource.RLIMIT_DATA, _vm_data_bytes() + int(memory_bytes))


def drop_capabilities() -> None:
    """Run as root (a CI container), the candidate keeps uid 0 but loses every capability, for
    good (bounding set emptied, no_new_privs): no ptrace, no reading other processes' memory,
    no overriding file permissions. The sandbox runs it as an unprivileged user instead."""
    if os.geteuid() != 0:
        return
    try:
        lib = libc()
        for cap in range(64):
            lib.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
        lib.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
        header = (ctypes.c_uint32 * 2)(LINUX_CAPABILITY_VERSION_3, 0)
        data = (ctypes.c_uint32 * 6)()
        lib.capset(header, data)
    except (OSError, AttributeError):
        pass
