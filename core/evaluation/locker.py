"""The host locker: the CUDA checkpoint calls that a sandboxed harness cannot make.

A concurrent batch keeps a passing candidate's worker for its timing where the driver proves
it idle (core/harness/quiesce.py: `cuCheckpointProcessLock`, then SIGSTOP). Inside the sandbox
the harness is uid 65534 in its own user and PID namespaces, without capabilities, and its
workers are non-dumpable: the driver refuses it (304) and every candidate pays a fresh worker.
On the host, the engine's user has the rights it lacks: root has CAP_SYS_PTRACE everywhere; an
ordinary user owns the user namespace bwrap made, and so has it over every process inside.

So the engine (executors.Harness) starts this locker beside each sandboxed harness on an
NVIDIA device: `HostLocker()` makes a socket pair before bwrap starts, the harness inherits
one end (`pass_fds`, its number in `ARENA_LOCKER_FD`, core/harness/locker_link.py), and
`start(bwrap_pid)` runs `python -m core.evaluation.locker` with the other end and the pid of
the bwrap process the engine itself started. The locker:

- loads libcuda and calls cuInit itself (cuda_checkpoint.load_driver: no torch, a moment to
  start) and says whether it could;
- never runs candidate code and never takes a host pid from the harness: the harness names
  a pid as it sees it inside its PID namespace, and `host_pid` finds the one process below
  that bwrap, directly in the sandbox's namespace, whose `NSpid` ends in it (a pid of
  another sandbox, of the host, or of a namespace a candidate made inside is refused);
- opens a pidfd of that process before it checks it again, so the process it checked is the
  one alive under that pid when the driver is called (a pid is freed only once its process
  is reaped, and host pids are handed out in sequence: no reuse within a call); the pidfd
  is kept, so a worker's later calls skip the scan (`SandboxPids`) until it exits;
- answers each call within its timeout plus cuda_checkpoint.CALL_LIMIT_S, or says `hung`
  and exits (the driver's state in this process is unknown then); it exits when the
  harness's end closes, and with the engine (PR_SET_PDEATHSIG).

Every failure (no libcuda, no checkpoint API, a refused pid, a locker that died) is a reason
in the harness, and the candidate is timed in a fresh worker, as without the locker.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import select
import signal
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from core.harness import cuda_checkpoint
from core.harness.locker_link import ENV

OPS = ("lock", "unlock", "state")
PR_SET_PDEATHSIG = 1
PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # the folder that holds `core`


class Refused(LookupError):
    """The pid the harness named is not a process of its sandbox."""


def _status(pid: int | str) -> tuple[int, list[int]] | None:
    """(parent pid, NSpid: its pid in each PID namespace from this /proc's down) of a process."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            fields = dict(line.split(":", 1) for line in fh if ":" in line)
        return int(fields["PPid"]), [int(p) for p in fields["NSpid"].split()]
    except (OSError, KeyError, ValueError):
        return None


def _exited(pidfd: int) -> bool:
    return bool(select.select([pidfd], [], [], 0)[0])  # a pidfd reads ready once its process exits


Table = dict[int, "tuple[int, list[int]] | None"]  # host pid -> (parent, NSpid), from /proc


def host_pid(sandbox_pid: int, pid: int) -> tuple[int, int]:
    """(host pid, pidfd) of the process that the sandbox started by `sandbox_pid` (the bwrap
    process, a host pid the engine knows) calls `pid`. Raises Refused unless exactly one
    process below `sandbox_pid`, directly in the sandbox's PID namespace (one level below
    bwrap's), has that pid there. The caller closes the pidfd."""
    root = _status(sandbox_pid)
    if root is None:
        raise Refused(f"the sandbox (bwrap, host pid {sandbox_pid}) is gone")
    depth = len(root[1]) + 1
    if pid <= 1:
        raise Refused(f"pid {pid} is the sandbox's init, not a worker")
    table: Table = {}
    for name in os.listdir("/proc"):
        if name.isdigit() and (info := _status(name)) is not None:
            table[int(name)] = info
    found = [h for h in table if _same(table, h, sandbox_pid, depth, pid)]
    if len(found) != 1:
        raise Refused(f"pid {pid} is not a process of this sandbox")
    try:
        pidfd = os.pidfd_open(found[0])
    except OSError as exc:
        raise Refused(f"pid {pid} is gone ({exc})") from None
    # The pidfd holds the pid now: is it still the process checked (in this sandbox, that pid)?
    still = _same(_lineage(found[0], sandbox_pid), found[0], sandbox_pid, depth, pid)
    if not still or _exited(pidfd):
        os.close(pidfd)
        raise Refused(f"pid {pid} exited while it was looked up")
    return found[0], pidfd


def _lineage(host: int, stop: int) -> Table:
    """`host` and its ancestors up to `stop` (or init), read from /proc now."""
    table: Table = {}
    while host > 1 and host not in table and host != stop:
        table[host] = info = _status(host)
        if info is None:
            break
        host = info[0]
    return table


def _same(table: Table, host: int, sandbox_pid: int, depth: int, pid: int) -> bool:
    """`host` is `pid` directly in the sandbox's namespace, and a descendant of its bwrap."""
    info = table.get(host)
    if info is None or len(info[1]) != depth or info[1][-1] != pid:
        return False
    seen = {host}
    while info is not None and info[0] not in seen:
        if info[0] == sandbox_pid:
            return True
        seen.add(info[0])
        info = table.get(info[0])
    return False


class SandboxPids:
    """The harness's pids, mapped once each: a worker is looked up in /proc at its first call
    (`host_pid`, a scan of every process) and then known by its pidfd, which pins the process
    (its pid namespace is fixed for life) until it exits; then it is looked up afresh."""

    def __init__(self, sandbox_pid: int):
        self.sandbox_pid = sandbox_pid
        self._known: dict[int, tuple[int, int]] = {}  # sandbox pid -> (host pid, pidfd)

    def __call__(self, pid: int) -> int:
        known = self._known.pop(pid, None)
        if known is not None and not _exited(known[1]):
            self._known[pid] = known
            return known[0]
        if known is not None:
            os.close(known[1])
        for old in [p for p, (_, fd) in self._known.items() if _exited(fd)]:
            os.close(self._known.pop(old)[1])
        self._known[pid] = host_pid(self.sandbox_pid, pid)
        return self._known[pid][0]


Resolve = Callable[[int], int]  # the harness's pid -> the host's pid, or raises Refused


def serve(conn: socket.socket, load: Callable[[], cuda_checkpoint.Call], resolve: Resolve) -> None:
    """The locker's loop: {"ready", "reason"} once `load` gave the driver's calls, then one
    answer per request ({"rc", "state"} or {"refused": why}) until the harness's end closes
    or a call hangs. `resolve` is the locker's sandbox's `SandboxPids`."""

    def answer(call: cuda_checkpoint.Call, msg: dict) -> dict:
        op, pid, timeout_ms = msg.get("op"), msg.get("pid"), msg.get("timeout_ms")
        if op not in OPS or not isinstance(pid, int) or not isinstance(timeout_ms, int):
            return {"refused": f"not a request: {msg}"[:200]}
        try:
            target = resolve(pid)
        except Refused as exc:
            return {"refused": str(exc)}
        return cuda_checkpoint.bounded(call, op, target, max(0, min(timeout_ms, 60_000)))

    cuda_checkpoint.serve(conn, load, answer)


class HostLocker:
    """The engine's side: a socket pair made before the sandbox starts, then the locker."""

    def __init__(self) -> None:
        self._harness_end, self._locker_end = socket.socketpair()
        self._harness_end.set_inheritable(True)  # through bwrap into the harness
        self.proc: subprocess.Popen | None = None

    @property
    def pass_fds(self) -> tuple[int, ...]:
        return (self._harness_end.fileno(),)

    @property
    def env(self) -> dict[str, str]:
        """What the harness's environment needs: the number of its end."""
        return {ENV: str(self._harness_end.fileno())}

    def start(self, sandbox_pid: int, log: IO[bytes] | None = None) -> None:
        """Run the locker for the sandbox whose bwrap has host pid `sandbox_pid`; the engine's
        copies of both ends are closed (the harness's end then lives in the sandbox only)."""
        from core.evaluation import sandbox  # the spawner thread: the death signal holds

        fd = self._locker_end.fileno()
        argv = [sys.executable, "-m", "core.evaluation.locker", f"--fd={fd}"]
        try:
            self.proc = sandbox.spawn(
                [*argv, f"--sandbox-pid={sandbox_pid}"],
                os.environ,
                pass_fds=(fd,),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                cwd=str(PACKAGE_ROOT),  # `-m core...` imports this very package
            )
        finally:
            self._harness_end.close()
            self._locker_end.close()

    def close(self) -> None:
        self._harness_end.close()
        self._locker_end.close()
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None


def spawn_beside(
    argv: list[str],
    env: dict[str, str],
    want: bool,
    log: IO[bytes] | None = None,
    pass_fds: tuple[int, ...] = (),
    **popen_kwargs: Any,
) -> tuple[subprocess.Popen, HostLocker | None]:
    """Start a wrapped harness (`argv`, bwrap first) and, with `want` (`wanted(...)`), the host
    locker beside it, as executors.Harness does: the harness inherits its end of the pair, the
    locker is told bwrap's pid by the caller, never by the harness. Used where the harness
    runs on another machine: a Ray node (core/orchestration/ray_node.py) and an SSH host
    (`python -m core.evaluation.sandbox exec --locker`, remotes/executor.py)."""
    from core.evaluation import sandbox

    host = HostLocker() if want else None
    try:
        proc = sandbox.spawn(
            argv,
            {**env, **(host.env if host else {})},
            pass_fds=(*pass_fds, *(host.pass_fds if host else ())),
            **popen_kwargs,
        )
    except BaseException:
        if host is not None:
            host.close()
        raise
    if host is not None:
        host.start(proc.pid, log)
    return proc, host


def _inherited_fds() -> tuple[int, ...]:
    """The descriptors above 2 this process would hand to a program it exec'd."""
    fds = []
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        try:
            if fd > 2 and os.get_inheritable(fd):
                fds.append(fd)
        except OSError:  # the listing's own descriptor, closed by now
            continue
    return tuple(fds)


def exec_beside(argv: list[str], env: dict[str, str]) -> int:
    """What `exec` would be for the wrapped harness, with the host locker beside it: the
    harness runs as a child with every descriptor an exec would have passed (the events'),
    the locker as another; a SIGTERM or SIGINT (the job's `timeout`) is passed on to bwrap;
    returns its exit status as a shell would."""
    proc, host = spawn_beside(argv, env, True, None, _inherited_fds())
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda signum, _frame: proc.send_signal(signum))
    try:
        code = proc.wait()
    finally:
        if host is not None:
            host.close()
    return 128 - code if code < 0 else code


def wanted(device_type: str, sandboxed: bool) -> bool:
    """A locker for a sandboxed harness on an NVIDIA device (unsandboxed, the harness's own
    helper can call the driver; other vendors have no checkpoint API)."""
    return sandboxed and device_type == "cuda"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m core.evaluation.locker")
    parser.add_argument("--fd", type=int, required=True)
    parser.add_argument("--sandbox-pid", type=int, required=True)
    args = parser.parse_args(argv)
    try:
        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # dies with the engine
    except (OSError, AttributeError):
        pass
    serve(socket.socket(fileno=args.fd), cuda_checkpoint.load_driver, SandboxPids(args.sandbox_pid))
    return 0


if __name__ == "__main__":
    sys.exit(main())
