"""The zygote: a clean process that forks every candidate worker, and buries what they leave.

The harness parent forks it before it reads any job (`python -m core.harness run|serve`), so
a candidate worker, forked from the zygote, holds a copy of a process that never saw a job
file, a hidden workload or a seed: what it needs arrives over its socket (`candidate_view`).
A worker forked from the parent itself would hold the whole job in memory, one `gc` or frame
walk away.

The zygote is also the candidate's subreaper (`PR_SET_CHILD_SUBREAPER`): a process that the
candidate double-forks and moves to a new session leaves the worker's process group, but it
is re-parented to the zygote, not to init, so `cleanup()` finds and kills it at the end of the
evaluation and reports what had escaped the group: an integrity flag (`leftover_processes`),
since what honest code starts (a compiler, a worker pool) stays in the worker's group. A PID
namespace (the sandbox) does the same by construction; this is the path without one.

Unsandboxed as root, the zygote also makes every candidate worker uid 65534 before it runs any
of the candidate's code (`drop_privileges`).
"""

from __future__ import annotations

import ctypes
import gc
import json
import os
import select
import signal
import socket
import time
from collections.abc import Callable
from typing import Any

from core.harness import channel, isolation, ranked_worker, workers
from core.harness.candidate_owner import CANDIDATE_UID_ENV

PR_SET_CHILD_SUBREAPER = 36
REQUEST_SLACK_S = 30.0


class ZygoteError(RuntimeError):
    """The zygote stopped answering: an infrastructure fault."""


class Zygote:
    def __init__(self) -> None:
        parent_end, child_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        parent_pid = os.getpid()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                parent_end.detach()
                _serve(child_end, parent_pid)
                code = 0
            except BaseException:  # noqa: BLE001 - in the harness log, then exit
                workers._print_exc()
            finally:
                os._exit(code)
        child_end.close()
        self.pid, self.sock = pid, parent_end
        self.own_child = True

    def fork_zygote(self) -> Zygote:
        """Another zygote, forked by this one (so it, too, never saw a job): a concurrent batch
        gives each slot its own, so what a candidate leaves behind is found by its own slot's
        `cleanup()` while the other slots' candidates run on (concurrent.py)."""
        reply, fds = self._ask({"op": "zygote"})
        if len(fds) != 1:
            raise ZygoteError(f"the zygote could not fork a zygote: {reply.get('error')}")
        sub = Zygote.__new__(Zygote)
        sub.pid, sub.sock, sub.own_child = int(reply["pid"]), socket.socket(fileno=fds[0]), False
        return sub

    def _ask(
        self, request: dict[str, Any], timeout: float = REQUEST_SLACK_S
    ) -> tuple[dict[str, Any], list[int]]:
        try:
            self.sock.sendall(json.dumps(request).encode())
            if not select.select([self.sock], [], [], timeout)[0]:
                raise ZygoteError(
                    f"the zygote did not answer `{request['op']}` within {timeout:.0f} s"
                )
            data, fds, _, _ = socket.recv_fds(self.sock, 1 << 16, 1)
        except OSError as exc:
            raise ZygoteError(f"the zygote is gone ({exc})") from None
        if not data:
            raise ZygoteError("the zygote is gone")
        return json.loads(data), fds

    def spawn(self) -> tuple[int, socket.socket]:
        """A new candidate worker: its pid and the parent's end of its socket. It waits for an
        `init` message carrying its job."""
        reply, fds = self._ask({"op": "spawn"})
        if len(fds) != 1:
            raise ZygoteError(f"the zygote could not fork a worker: {reply.get('error')}")
        return int(reply["pid"]), socket.socket(fileno=fds[0])

    def preload(self, modules: list[str]) -> dict[str, Any]:
        """Import `modules` into the zygote (preload.py): what it imported, what failed, and
        `unsafe` (then the zygote has exited: importing them made it unfit to fork from)."""
        reply, _ = self._ask({"op": "preload", "modules": modules}, 300.0)
        return reply

    def wait(self, pid: int, timeout: float) -> int | None:
        """The worker's exit code once it has exited (within `timeout`), else None."""
        reply, _ = self._ask(
            {"op": "wait", "pid": pid, "timeout": timeout}, timeout + REQUEST_SLACK_S
        )
        return reply.get("code")

    def cleanup(self, keep: int | None = None) -> list[dict[str, Any]]:
        """Kill everything below the zygote but `keep` (a stopped worker kept for its timing,
        core/harness/quiesce.py; its own children die); return the processes that had left
        their worker's process group (pid, command), which the group kill could not reach."""
        reply, _ = self._ask({"op": "cleanup", "keep": keep}, 60.0)
        return list(reply.get("escaped", []))

    def alive(self) -> bool:
        if not self.own_child:  # a zygote's zygote is not this process's child: its state in /proc
            stat = _stat(str(self.pid))
            return stat is not None and stat[2] not in ("Z", "X")
        try:
            done, _ = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:
            return False
        return done == 0

    def close(self) -> None:
        try:
            self._ask({"op": "exit"}, 5.0)
        except (ZygoteError, ValueError):
            pass
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        workers.waitpid(self.pid, 5.0)
        self.sock.close()


# --- inside the zygote -----------------------------------------------------------------------


def _serve(sock: socket.socket, parent_pid: int) -> None:
    workers.die_with_parent(parent_pid)
    try:
        libc = workers._libc()
        libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        libc.prctl(workers.PR_SET_DUMPABLE, 0, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    workers.close_inherited(keep=sock.fileno())
    # Everything imported so far (torch, triton, the task's libraries) moves out of the
    # collector's reach: a full collection in a worker (a region's detach, Python's own
    # generation-2 passes during a candidate's run) then walks only what the worker made
    # itself, milliseconds instead of 0.3-1 s with torch loaded; the pages stay shared.
    gc.freeze()
    codes: dict[int, int] = {}  # exit codes of children reaped by cleanup
    groups: set[int] = set()  # process groups of the workers spawned since the last cleanup
    me = os.getpid()
    while True:
        data = sock.recv(1 << 16)
        if not data:
            return
        request = json.loads(data)
        op = request.get("op")
        if op == "spawn":
            try:
                pid = _fork_worker(sock, me)
            except OSError as exc:
                sock.sendall(json.dumps({"error": str(exc)}).encode())
                continue
            groups.add(pid)
        elif op == "zygote":
            _reap(codes)  # earlier zygotes of this one that exited
            try:
                _fork_zygote(sock, me)
            except OSError as exc:
                sock.sendall(json.dumps({"error": str(exc)}).encode())
        elif op == "preload":  # the task's libraries, for every worker forked from here on
            from core.harness.preload import import_here

            reply = import_here([str(m) for m in request.get("modules") or []])
            gc.freeze()
            sock.sendall(json.dumps(reply).encode())
            if reply["unsafe"]:
                _kill_descendants(me, groups, codes)
                return  # a CUDA context or a thread here would break every fork: replaced
        elif op == "wait":
            pid = int(request["pid"])
            code = codes.pop(pid, None)
            if code is None:
                code = workers.waitpid(pid, float(request["timeout"]))
            sock.sendall(json.dumps({"code": code}).encode())
        elif op == "cleanup":
            keep = request.get("keep")
            escaped = _kill_descendants(me, groups, codes, keep)
            groups = {keep} if keep else set()
            sock.sendall(json.dumps({"escaped": escaped}).encode())
        elif op == "exit":
            _kill_descendants(me, groups, codes)
            sock.sendall(b"{}")
            return
        else:
            sock.sendall(json.dumps({"error": f"unknown op {op}"}).encode())


def _fork_zygote(zsock: socket.socket, zygote_pid: int) -> int:
    def body(child_end: socket.socket) -> int:
        _serve(child_end, zygote_pid)  # dies with this zygote, which dies with the harness
        return 0

    return _fork_child(zsock, socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET), body)


def _fork_worker(zsock: socket.socket, zygote_pid: int) -> int:
    def body(child_end: socket.socket) -> int:
        workers._bootstrap(child_end, zygote_pid)
        msg, _ = channel.recv(child_end)
        if msg.get("op") != "init":
            return 1
        # Its own view of the files (core/harness/isolation.py), made before the uid changes:
        # as root a mount namespace needs no user namespace, which would lose root's reads.
        msg["job"]["isolation_note"] = isolation.enter(msg["job"])
        drop_privileges()
        workers.die_with_parent(zygote_pid)  # a change of uid clears the death signal: again
        if msg["job"].get("rank") is not None:  # a rank of a multi-rank candidate
            ranked_worker.rank_main(child_end, msg["job"])
        else:
            workers.candidate_main(child_end, msg["job"])
        return 0

    return _fork_child(zsock, socket.socketpair(), body)


def _fork_child(
    zsock: socket.socket,
    pair: tuple[socket.socket, socket.socket],
    body: Callable[[socket.socket], int],
) -> int:
    """Fork a child that runs `body(its end of pair)` and exits with what it returns (1 if it
    raised); the other end goes to the harness over `zsock`, with the child's pid."""
    parent_end, child_end = pair
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            parent_end.detach()
            zsock.detach()
            code = body(child_end)
        except BaseException:  # noqa: BLE001
            workers._print_exc()
        finally:
            os._exit(code)
    child_end.close()
    try:
        socket.send_fds(zsock, [json.dumps({"pid": pid}).encode()], [parent_end.fileno()])
    finally:
        parent_end.close()
    return pid


CAP_DAC_READ_SEARCH = 2
PR_SET_KEEPCAPS, PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE = 8, 47, 2


def drop_privileges() -> None:
    """Unsandboxed as root (`ARENA_CANDIDATE_UID` set), a candidate worker becomes that uid
    (65534, nobody) with no groups, so it cannot write the installation, the task folders, the
    engine's data or anything else of root's: only its own (chowned) evaluation folder and
    /tmp. It keeps one capability, CAP_DAC_READ_SEARCH (read and traverse any file, also in
    the compilers it starts, as an ambient capability): unsandboxed it could read all of it
    anyway, and a Python under /root (0700) must stay importable. Nothing else: the bounding
    set is emptied but that one, and no_new_privs is set."""
    uid_text = os.environ.get(CANDIDATE_UID_ENV)
    if not uid_text or os.geteuid() != 0:
        return
    uid = int(uid_text)
    libc = workers._libc()
    for cap in range(64):  # while root: dropping from the bounding set needs CAP_SETPCAP
        if cap != CAP_DAC_READ_SEARCH:
            libc.prctl(workers.PR_CAPBSET_DROP, cap, 0, 0, 0)
    libc.prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0)
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    header = (ctypes.c_uint32 * 2)(workers._LINUX_CAPABILITY_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()
    data[0] = data[1] = data[2] = 1 << CAP_DAC_READ_SEARCH  # effective, permitted, inheritable
    if libc.capset(header, data) != 0:
        raise OSError(ctypes.get_errno(), "capset")
    libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, CAP_DAC_READ_SEARCH, 0, 0)
    libc.prctl(workers.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    if os.geteuid() == 0 or os.getuid() == 0:
        os._exit(1)  # never run a candidate as root by accident
    home = os.environ.get("HOME")
    if home and "TRITON_CACHE_DIR" not in os.environ:  # root's own runs may have made ~/.triton
        os.environ["TRITON_CACHE_DIR"] = os.path.join(home, f".triton-uid{uid}", "cache")


def _stat(pid: str) -> tuple[int, int, str] | None:
    """(parent pid, process group, state) from /proc/PID/stat."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read().decode(errors="replace")
    except OSError:
        return None
    fields = data.rpartition(")")[2].split()
    return int(fields[1]), int(fields[2]), fields[0]


def _descendants(root: int) -> dict[int, tuple[int, str]]:
    """Every live process below `root`: pid -> (process group, state)."""
    children: dict[int, list[int]] = {}
    info: dict[int, tuple[int, str]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            stat = _stat(name)
            if stat is not None:
                children.setdefault(stat[0], []).append(int(name))
                info[int(name)] = (stat[1], stat[2])
    found: dict[int, tuple[int, str]] = {}
    stack = list(children.get(root, []))
    while stack:
        pid = stack.pop()
        if pid not in found and pid in info:
            found[pid] = info[pid]
            stack.extend(children.get(pid, []))
    return found


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode(errors="replace").strip()[:200]
    except OSError:
        return ""


def _reap(codes: dict[int, int]) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if not pid:
            return
        codes[pid] = os.waitstatus_to_exitcode(status)


def _kill_descendants(
    me: int, groups: set[int], codes: dict[int, int], keep: int | None = None
) -> list[dict[str, Any]]:
    """SIGKILL everything below the zygote but `keep` until nothing else is left (a process
    that forks while it is being killed leaves orphans, re-parented here and found on the next
    pass)."""
    escaped: dict[int, str] = {}
    for _ in range(200):
        tree = {pid: v for pid, v in _descendants(me).items() if pid != keep}
        live = {pid: group for pid, (group, state) in tree.items() if state not in ("Z", "X")}
        for pid, group in live.items():
            if group not in groups and pid not in escaped:
                escaped[pid] = _cmdline(pid)
        for pid in live:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        _reap(codes)
        if not tree:
            break
        time.sleep(0.005)
    _reap(codes)
    return [{"pid": pid, "command": cmd} for pid, cmd in sorted(escaped.items())]
