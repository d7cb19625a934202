"""The two worker processes of an evaluation, forked from the harness parent.

`candidate` imports the candidate and runs or times it; `trusted` imports the reference and
the baseline (never the candidate), computes expected outputs, checks the candidate's, and
times the baseline. The trusted worker is forked first and has read its task files (checked
against the hashes in the job) before any candidate code exists.

Each worker leads its own process group and dies with its parent (`PR_SET_PDEATHSIG`). A
worker keeps no descriptor of its parent's but its own socket: standard input is /dev/null,
standard output and error go to its log, everything else is closed at fork, so nothing the
candidate writes can reach the engine's events (docs/integrity.md).

What the candidate's process holds is reduced to what it needs (`candidate_view`): its own
path, the input and output specs, the device, its working folder. It learns a workload's shapes
and seed when asked to run it, never the other workloads' or the job file. Before its module
is imported, the harness's own modules are taken out of `sys.modules` (a candidate that
imports `core.harness.timing` gets a fresh copy the worker does not use), and a snapshot of
torch's and time's functions is taken, so that replacing one at run time is reported.
"""

from __future__ import annotations

import builtins
import ctypes
import hashlib
import importlib.util
import linecache
import os
import resource
import signal
import socket
import sys
import time
import traceback
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from core.harness import channel, checking, guard, inputs, shared_check, shared_io, timing

PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS = 1, 4, 24, 38
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
INDEPENDENT_SAMPLE = 4096  # elements compared when asking whether an output ignores its inputs
INDEPENDENT_REL_DIFF = 0.5  # "clearly different": more than any 2-bit-mantissa rounding explains
INDEPENDENT_MIN_SHARE = 0.25


class WorkerDied(RuntimeError):
    """The worker process exited; `reason` says how (signal, exit code)."""

    def __init__(self, name: str, reason: str):
        self.name, self.reason = name, reason
        super().__init__(f"{name} worker {reason}")


class WorkerTimeout(TimeoutError):
    pass


class TaskFileChanged(RuntimeError):
    """A task file's bytes differ from the hash the engine recorded when it built the job."""


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
                _bootstrap(child_end, parent_pid)
                main(child_end, job)
                code = 0
            except BaseException:  # noqa: BLE001 - reported in the worker's log, then exit
                _print_exc()
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

    def kill(self) -> None:
        """Kill the worker's whole process group: whatever it started dies with it (what left
        the group is the zygote's to find)."""
        for target in (
            lambda: os.killpg(self.pid, signal.SIGKILL),
            lambda: os.kill(self.pid, signal.SIGKILL),
        ):
            try:
                target()
            except (ProcessLookupError, PermissionError):
                pass
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


def _print_exc() -> None:
    try:
        traceback.print_exc()
        sys.stderr.flush()
    except BaseException:  # noqa: BLE001
        pass


def _bootstrap(conn: socket.socket, parent_pid: int) -> None:
    """A new worker's first steps: its own process group, death with its parent, and no
    descriptor but `conn` (and 0-2)."""
    try:
        os.setpgid(0, 0)
    except OSError:
        pass
    die_with_parent(parent_pid)
    close_inherited(keep=conn.fileno())


def _libc() -> Any:
    return ctypes.CDLL(None, use_errno=True)


def die_with_parent(parent_pid: int) -> None:
    try:
        _libc().prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
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


def _redirect_output(log_path: Path) -> None:
    """Whatever the worker prints (compiler output included) goes to its log, never to the
    descriptors the engine reads."""
    sys.stdout.flush()
    sys.stderr.flush()
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


def _import_file(path: Path, name: str) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def read_task_file(job: dict[str, Any], name: str) -> bytes | None:
    """A task file's bytes (None if the task has no such file): from the job itself, which
    carries the reference, the baseline and inputs.py (so the task folder need not be visible
    at all), else from the task folder, checked against the hash the engine recorded. What is
    executed is these bytes, so a later change on disk cannot matter."""
    want = (job.get("task_files") or {}).get(name)
    sources = job.get("task_sources")
    if sources is not None:
        text = sources.get(name)
        data = None if text is None else text.encode()
    else:
        path = Path(job["task_dir"]) / name
        data = path.read_bytes() if path.is_file() else None
    if data is None:
        if want is not None:
            raise TaskFileChanged(
                f"{name} of task {job.get('task_id')} is missing, though the job recorded its hash"
            )
        return None
    if want is not None and hashlib.sha256(data).hexdigest() != want:
        raise TaskFileChanged(
            f"{name} of task {job.get('task_id')} is not the file whose sha256 the job recorded"
        )
    return data


def _module_from_source(source: bytes, name: str, filename: str) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__file__ = filename
    sys.modules[name] = module
    # Triton's @jit reads a kernel's source through inspect (linecache): the file itself is hidden
    # in the sandbox, so the hash-checked bytes are what it reads (an imported task's baseline is
    # the task's own Triton source; found on the H200: "@jit functions should be defined in a Python file").
    linecache.cache[filename] = (
        len(source),
        None,
        source.decode(errors="replace").splitlines(True),
        filename,
    )
    exec(compile(source, filename, "exec"), module.__dict__)
    return module


def _entry(module: types.ModuleType, path: str) -> Callable[..., Any]:
    fn = getattr(module, "run", None)
    if not callable(fn):
        raise AttributeError(f"{Path(path).name} defines no function `run(*inputs)`")
    return fn


def candidate_view(job: dict[str, Any]) -> dict[str, Any]:
    """The part of the job the candidate's process receives: no hidden workloads, no seeds, no
    task folder. The task's optional inputs.py travels as its (hash-checked) source."""
    source = read_task_file(job, "inputs.py")
    return {
        "device": job["device"],
        "inputs": job["inputs"],
        "outputs": job["outputs"],
        "candidate": job["candidate"],
        "workdir": job["workdir"],
        "memory_bytes": (job.get("limits") or {}).get("candidate_memory_bytes"),
        "task_inputs": source.decode() if source is not None else None,
    }


def _device(job: dict[str, Any]) -> torch.device:
    device = torch.device(job["device"]["torch_device"])
    if device.type == "cuda":
        torch.cuda.set_device(device)
    return device


def _error(exc: BaseException) -> dict[str, Any]:
    reply = {
        "ok": False,
        "error": f"{type(exc).__name__}: {exc}",
        "traceback": traceback.format_exc(limit=20)[-8000:],
    }
    from core.harness.triton_cpu import unsupported_reason

    reason = unsupported_reason(exc)
    if reason:
        reply["unsupported"] = reason[:500]
    return reply


def _is_compile_error(exc: BaseException) -> bool:
    names = {cls.__name__ for cls in type(exc).__mro__}
    return bool(
        names & {"CompilationError", "CompileTimeAssertionFailure", "BuildExtensionError"}
    ) or (isinstance(exc, RuntimeError) and "Error building extension" in str(exc))


# --- the candidate's process: limits, privileges, what it can see -------------------------------


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


def _limit_resources(memory_bytes: int | None) -> None:
    """No core files; at most `memory_bytes` more private memory than the worker holds now
    (RLIMIT_DATA; CPU devices only: GPU drivers reserve address space in ways that a limit
    would break). No process limit here: RLIMIT_NPROC counts every thread of the user, and
    only the sandbox, with a user namespace of its own, can bound one evaluation's."""
    _lower_limit(resource.RLIMIT_CORE, 0)
    if memory_bytes:
        _lower_limit(resource.RLIMIT_DATA, _vm_data_bytes() + int(memory_bytes))


def _drop_capabilities() -> None:
    """Run as root (a CI container), the candidate keeps uid 0 but loses every capability, for
    good (bounding set emptied, no_new_privs): no ptrace, no reading other processes' memory,
    no overriding file permissions. The sandbox runs it as an unprivileged user instead."""
    if os.geteuid() != 0:
        return
    try:
        libc = _libc()
        for cap in range(64):
            libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
        libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
        header = (ctypes.c_uint32 * 2)(_LINUX_CAPABILITY_VERSION_3, 0)
        data = (ctypes.c_uint32 * 6)()
        libc.capset(header, data)
    except (OSError, AttributeError):
        pass


# Replacing one of these is a review note (the timer bound what it needs at import); torch's
# namespaces and classes are guard.Watch's, whose findings are integrity flags.
_WATCHED: dict[str, Callable[[], Any]] = {
    "time": lambda: time,
    "builtins": lambda: builtins,
}


def watch() -> list[tuple[str, Any, str, Any]]:
    """The functions and classes of the watched namespaces: (qualified name, namespace, key, object)."""
    snap = []
    for prefix, get in _WATCHED.items():
        namespace = vars(get())
        for key, value in list(namespace.items()):
            if key.startswith("__") or isinstance(value, types.ModuleType) or not callable(value):
                continue
            snap.append((f"{prefix}.{key}", namespace, key, value))
    return snap


def replaced(snap: list[tuple[str, Any, str, Any]]) -> list[str]:
    """Names in `snap` whose object is no longer the one snapshotted."""
    return [
        qualname
        for qualname, namespace, key, value in snap
        if namespace.get(key, value) is not value
    ]


def _hide_harness() -> None:
    """Take the harness out of the candidate's easy reach: `sys.modules['core.harness.timing']`
    raises KeyError, `import core.harness.timing` makes a fresh copy that nothing uses, and the
    parent's `__main__` is replaced by an empty module."""
    for name in list(sys.modules):
        if name == "core" or name.startswith(("core.", "arena_")):
            del sys.modules[name]
    sys.modules["__main__"] = types.ModuleType("__main__")


# --- the candidate worker ------------------------------------------------------------------


def candidate_main(conn: socket.socket, job: dict[str, Any]) -> None:
    """`job` is `candidate_view(full_job)`."""
    workdir = Path(job["workdir"])
    _redirect_output(workdir / "candidate.log")
    os.environ["TORCH_EXTENSIONS_DIR"] = str(workdir / "torch_extensions")
    device = _device(job)
    sim = None
    if (
        job["device"].get("type") == "sim"
    ):  # a simulated GPU: the performance stage counts (docs/simulation.md)
        from core.harness.sim import predict as sim_predict

        sim = sim_predict.CompileCache(
            job["device"]["aot"], str(workdir / "triton_cache")
        )  # before the interpreter
    if device.type == "cpu":
        from core.harness.triton_cpu import enable_interpreter

        enable_interpreter()
    custom = None
    if job.get("task_inputs"):
        custom = _module_from_source(
            job["task_inputs"].encode(), "arena_task_inputs", "<task inputs.py>"
        ).make_inputs
    _limit_resources(job.get("memory_bytes") if device.type == "cpu" else None)
    _drop_capabilities()
    specs, outs = job["inputs"], job["outputs"]
    snap = watch()
    hooks = watch_hooks(custom is not None)
    reported: set[str] = set()
    _hide_harness()
    run: Callable[..., Any] | None = None
    peer: socket.socket | None = None
    kept: dict[int, Any] = {}
    shared = shared_check.CandidateRegion()  # where the trusted worker writes correctness inputs
    while True:
        try:
            msg, _ = channel.recv(conn)
        except channel.ChannelClosed:
            return
        op = msg.get("op")
        payload: bytes | None = None
        try:
            if op == "exit":
                channel.send(conn, {"ok": True})
                return
            if op == "compile":
                path = Path(job["candidate"])
                run = _entry(_import_file(path, f"candidate_{os.getpid()}"), str(path))
                reply: dict[str, Any] = {"ok": True}
                try:  # the first call builds JIT kernels: a build failure is a compile failure
                    with guard.trusted():  # (the seed is one no check uses: the parent's draw)
                        args = inputs.correctness_inputs(
                            specs, msg["workload"], msg["seed"], device, custom
                        )
                    run(*args)
                    _sync(device)
                except Exception as exc:  # noqa: BLE001
                    if _is_compile_error(exc):
                        reply = _error(exc)
                    else:
                        reply["first_call_error"] = f"{type(exc).__name__}: {exc}"
            elif op == "run":
                assert run is not None, "compile first"
                reply, payload = run_for_check(
                    run,
                    specs,
                    outs,
                    msg["workload"],
                    msg["seed"],
                    int(msg.get("repeat", 1)),
                    device,
                    custom,
                )
            elif op == "warm":  # before any candidate code: the device's context, made now
                if device.type == "cuda":
                    torch.cuda.init()
                    torch.empty((1,), device=device)
                reply = {"ok": True}
            elif op == "attach":  # the region correctness runs share with the trusted worker
                fds = shared_check.recv_fds(conn, msg.get("region"))
                try:
                    shared.attach(msg["region"], fds, device)
                    reply = {"ok": True}
                except Exception as exc:  # noqa: BLE001 - the parent keeps the old path
                    reply = {"ok": True, "attach_failed": f"{type(exc).__name__}: {exc}"[:300]}
            elif op == "run_shared":
                assert run is not None, "compile first"
                reply = shared.run(run, msg, specs, outs, device)
            elif (
                op == "peer"
            ):  # the socket to the trusted worker, for timed rounds over shared memory
                peer = socket.socket(fileno=shared_io.recv_fd(conn))
                reply = {"ok": True}
            elif op == "time" and msg.get("shared"):
                assert run is not None and peer is not None, (
                    "compile first, then get the peer socket"
                )
                reply = _time_shared(run, msg, specs, outs, device, peer, hooks)
            elif op == "time":
                assert run is not None, "compile first"
                reply = _time_candidate(run, msg, specs, outs, device, custom, kept, hooks)
            elif op == "predict":
                assert run is not None and sim is not None, "compile first, on a sim device"
                reply = sim_predict.predict_candidate(
                    run, specs, msg["workload"], msg["seed"], custom, sim
                )
            elif op == "kept":
                reply, payload = hand_over_kept(kept)
            else:
                reply = {"ok": False, "error": f"unknown op {op}"}
        except Exception as exc:  # noqa: BLE001 - the candidate's failure is reported, not raised
            reply, payload = _error(exc), None
        report_hooks(reply, hooks)
        if op != "time":  # kept out of the timed round's wall clock; the next op reports it
            new = [name for name in replaced(snap) if name not in reported]
            if new:
                reported.update(new)
                reply["tampered"] = new
        channel.send(conn, reply, payload)


def watch_hooks(custom_inputs: bool, between_calls: tuple[str, ...] = ()) -> guard.Hooks:
    """The watch on torch's namespaces, taken before any candidate code runs. Between two timed
    calls the mode stacks are always checked, and what harness code run there can reach: a
    task's inputs.py (`custom_inputs`) and `between_calls`."""
    return guard.Hooks(
        guard.Watch(between_calls=(guard.INPUTS_REACH if custom_inputs else ()) + between_calls)
    )


def report_hooks(reply: dict[str, Any], hooks: guard.Hooks) -> None:
    """Everything watched, checked at the end of a request: its findings go into the reply
    (`hooked`), where the parent makes each an integrity flag."""
    hooks.finish()
    found = hooks.take()
    if found:
        reply["hooked"] = found


def run_for_check(
    fn: Callable[..., Any],
    specs: list[dict[str, Any]],
    outs: list[dict[str, Any]],
    workload: dict[str, Any],
    seed: int,
    repeat: int,
    device: torch.device,
    custom: Any,
) -> tuple[dict[str, Any], bytes]:
    """`repeat` calls on the same freshly drawn inputs, into poisoned memory; their outputs,
    checked for type and packed for the trusted side (a reply and its payload)."""
    shapes = workload["shapes"]
    metas: list[dict[str, Any]] = []
    chunks: list[bytes] = []
    for _ in range(repeat):
        args = inputs.correctness_inputs(specs, workload, seed, device, custom)
        inputs.poison(outs, shapes, device)
        result = fn(*args)
        _sync(device)
        meta, data = inputs.pack(inputs.collect_outputs(result, outs, specs, args, shapes, device))
        metas += meta
        chunks.append(data)
        del result, args
    return {"ok": True, "tensors": metas}, b"".join(chunks)


def hand_over_kept(kept: dict[int, Any]) -> tuple[dict[str, Any], bytes]:
    """The kept outputs of the sampled timed calls, packed, and forgotten here."""
    calls = sorted(kept)
    meta, payload = inputs.pack([t for i in calls for t in kept[i]])
    kept.clear()
    return {"ok": True, "calls": calls, "tensors": meta}, payload


def _time_candidate(
    run: Callable[..., Any],
    msg: dict[str, Any],
    specs: list[dict[str, Any]],
    outs: list[dict[str, Any]],
    device: torch.device,
    custom: Any,
    kept: dict[int, Any],
    hooks: guard.Hooks = guard.NO_HOOKS,
) -> dict[str, Any]:
    """Time a round; keep copies of the sampled calls' outputs for the trusted worker. `hooks`
    is asked before every refill, right after the previous call returned."""
    kept.clear()
    shapes = msg["workload"]["shapes"]
    fresh = inputs.FreshInputs(specs, msg["workload"], msg["seed"], device, custom, hooks)
    invalid: list[str] = []

    def keep(index: int, result: Any) -> None:
        try:
            kept[index] = inputs.snapshot(
                inputs.collect_outputs(result, outs, specs, fresh.args or [], shapes, device)
            )
        except inputs.OutputError as exc:
            invalid.append(f"call {index}: {exc}")

    sample = [float(u) for u in msg.get("sample", ())]
    timed = timing.time_calls(
        run,
        fresh,
        device,
        msg["budget_ms"],
        msg["min_calls"],
        msg["max_calls"],
        msg["first_index"],
        msg["graph"],
        msg.get("sync_each_call", False),
        sample,
        keep,
    )
    if invalid:
        kept.clear()
        return {"ok": False, "error": invalid[0], "timed_output_invalid": True}
    wanted = {msg["first_index"] + 1 + k for k in timing.picks(sample, len(timed["times_us"]))}
    for index in list(kept):
        if index not in wanted:  # left by a graph attempt that fell back to eager timing
            del kept[index]
    return {"ok": True, **timed, "kept": sorted(kept)}


def _time_shared(
    run: Callable[..., Any],
    msg: dict[str, Any],
    specs: list[dict[str, Any]],
    outs: list[dict[str, Any]],
    device: torch.device,
    peer: socket.socket,
    hooks: guard.Hooks = guard.NO_HOOKS,
) -> dict[str, Any]:
    """Time a round whose inputs the trusted worker writes (shared_io.py): this process gets
    no seed and no sampled calls; every call's outputs go back through shared memory."""
    try:
        fresh = shared_io.SharedInputs(peer, specs, outs, msg["workload"]["shapes"], device, hooks)
    except shared_io.AttachFailed as exc:
        return {"ok": True, "attach_failed": str(exc)}
    try:
        timed = timing.time_calls(
            run,
            fresh,
            device,
            msg["budget_ms"],
            msg["min_calls"],
            msg["max_calls"],
            msg["first_index"],
            msg["graph"],
            msg.get("sync_each_call", False),
            (),
            fresh.keep,
            fresh.picker,
        )
    finally:
        fresh.finish()
    if fresh.invalid:
        return {"ok": False, "error": fresh.invalid[0], "timed_output_invalid": True}
    return {"ok": True, **timed}


# --- the trusted worker --------------------------------------------------------------------


def full_fp32(run: Callable[..., Any]) -> Callable[..., Any]:
    """`run` with TF32 off for the length of each call: the reference in full float32. Only the
    reference: the baseline, timed in this same worker, keeps PyTorch's defaults, as the
    candidate's worker does (cuDNN convolutions in TF32). Off for the whole worker, it timed an
    fp32 convolution's baseline 2.2x slower than the same code as the candidate on the H200."""

    def reference(*args: Any) -> Any:
        saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
        try:
            return run(*args)
        finally:
            torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved

    return reference


def trusted_main(conn: socket.socket, job: dict[str, Any]) -> None:
    workdir = Path(job["workdir"])
    _redirect_output(workdir / "trusted.log")
    try:
        _libc().prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)  # no same-user process may read its memory
    except (OSError, AttributeError):
        pass
    try:
        device = _device(job)
        task_dir = Path(job["task_dir"])
        sources = {
            name: read_task_file(job, name)
            for name in ("reference.py", "baseline.py", "inputs.py", "check.py")
        }
        for name in ("reference.py", "baseline.py"):
            if sources[name] is None:
                raise FileNotFoundError(f"the task's {name} is missing")
        reference_source, baseline_source = sources["reference.py"], sources["baseline.py"]
        assert reference_source is not None and baseline_source is not None  # checked above
        reference_run = full_fp32(
            _entry(
                _module_from_source(
                    reference_source, "arena_reference", str(task_dir / "reference.py")
                ),
                "reference.py",
            )
        )
        baseline_module = _module_from_source(
            baseline_source, "arena_baseline", str(task_dir / "baseline.py")
        )
        baseline_run = _entry(baseline_module, "baseline.py")
        custom = None
        if sources["inputs.py"] is not None:
            custom = _module_from_source(
                sources["inputs.py"], "arena_task_inputs", str(task_dir / "inputs.py")
            ).make_inputs
        check, pooled = (
            (None, None)
            if sources["check.py"] is None
            else checking.checks_from_source(sources["check.py"], str(task_dir / "check.py"))
        )
    except Exception as exc:  # noqa: BLE001 - the parent reports it as an infrastructure fault
        channel.send(conn, _error(exc))
        return
    channel.send(conn, {"ok": True, "ready": True})
    # Evidence of stochastic outputs, per workload, over all the checked calls of one candidate:
    # a batch's candidates share this worker, so each `member` has a pool of its own.
    pools: dict[str, checking.Pool] = {}

    def pool_of(msg: dict[str, Any]) -> checking.Pool:
        member = msg.get("member")
        return pools.setdefault(member if isinstance(member, str) else "", checking.Pool(pooled))

    specs, out_specs = job["inputs"], job["outputs"]
    rule = job["correctness"]
    expected: dict[
        str, tuple[list[Any], list[torch.Tensor]]
    ] = {}  # key -> (inputs, reference outputs)
    # A batch's candidates share the job's workloads and seeds: each (workload, seed)'s inputs
    # and reference outputs are computed once and kept, within the job's byte budget.
    references = ReferenceCache(int(job.get("reference_cache_bytes") or 0))
    seen: dict[str, list[tuple[int, list[str], list[torch.Tensor]]]] = {}
    peer: socket.socket | None = None  # to the candidate's worker (shared_io.py)
    # Correctness runs over shared memory (shared_check.py), by member + `workload#seed`: the
    # reference (or why it failed) of each staged run, and the outputs collected from its slots.
    regions = shared_check.CheckRegions(device)
    pending: dict[str, tuple[list[Any], list[torch.Tensor]] | str] = {}
    collected: dict[str, list[torch.Tensor]] = {}

    def stage_run(msg: dict[str, Any]) -> None:
        """Draw a run's inputs (or take them from the cache), write them into the candidate
        worker's region and answer; then compute the reference, while the candidate runs."""
        if msg.get("first"):  # a new stage: what an earlier one left unjudged goes
            pending.clear()
            collected.clear()
        key, pkey = msg["key"], str(msg.get("member") or "") + msg["key"]
        cached = key in references
        args = (
            references.get(key)[0]
            if cached
            else inputs.correctness_inputs(specs, msg["workload"], msg["seed"], device, custom)
        )
        reply: dict[str, Any] = {"ok": True}
        fds: list[int] = []
        if isinstance(msg.get("region"), str):
            try:
                header, fds = regions.write(
                    msg["region"],
                    str(msg.get("member") or ""),
                    args,
                    int(msg.get("repeat", 1)),
                    out_specs,
                    msg["workload"]["shapes"],
                )
                reply.update(header)
            except shared_io.Unshareable as exc:
                reply["reason"] = str(exc)
        if fds:
            shared_io.send_fd(conn, reply, fds[0])
            shared_check.close_fds(fds)
        else:
            channel.send(conn, reply)
        if cached:
            return
        try:
            with torch.no_grad():
                result = reference_run(*args)
            entry = (args, list(result) if isinstance(result, (tuple, list)) else [result])
            _sync(device)
        except Exception as exc:  # noqa: BLE001 - said when the run is judged (replied already)
            pending[pkey] = f"{type(exc).__name__}: {exc}"
            return
        if not references.add(key, entry):
            pending[pkey] = entry

    def judge_timed(
        msg: dict[str, Any], calls: list[int], got: list[torch.Tensor]
    ) -> list[dict[str, Any]]:
        """The sampled timed calls' outputs against the reference on privately regenerated inputs."""
        fresh = inputs.FreshInputs(specs, msg["workload"], msg["seed"], device, custom)
        n = len(out_specs)
        results = []
        for j, index in enumerate(calls):
            args = fresh(index)
            with torch.no_grad():
                result = reference_run(*args)
            ref = list(result) if isinstance(result, (tuple, list)) else [result]
            verdicts = pool_of(msg).add(
                _pool_key(msg["workload"]),
                _compare_all(out_specs, got[j * n : (j + 1) * n], ref, args, rule, device, check),
            )
            results.append({"call": index, "outputs": verdicts})
        return results

    while True:
        try:
            msg, payload = channel.recv(conn)
        except channel.ChannelClosed:
            return
        op = msg.get("op")
        try:
            if op == "exit":
                channel.send(conn, {"ok": True})
                return
            if op == "expect":
                expected.clear()  # one pending check at a time; a failed run leaves none behind
                if msg["key"] not in references:
                    args = inputs.correctness_inputs(
                        specs, msg["workload"], msg["seed"], device, custom
                    )
                    with torch.no_grad():
                        result = reference_run(*args)
                    entry = (args, list(result) if isinstance(result, (tuple, list)) else [result])
                    _sync(device)
                    if not references.add(msg["key"], entry):
                        expected[msg["key"]] = entry
                channel.send(conn, {"ok": True})
            elif op == "stage":
                stage_run(msg)
            elif op == "probe_region":  # mapped before the candidate's code runs (runner.py)
                try:
                    header, fds = regions.write(
                        msg["region"], str(msg.get("member") or ""), [], 1, [], {}
                    )
                except shared_io.Unshareable as exc:
                    channel.send(conn, {"ok": True, "reason": str(exc)})
                    continue
                if fds:
                    shared_io.send_fd(conn, {"ok": True, **header}, fds[0])
                    shared_check.close_fds(fds)
                else:
                    channel.send(conn, {"ok": True, **header})
            elif op == "collect":  # no reply: the parent sends the worker's next run after it
                collected[str(msg.get("member") or "") + msg["key"]] = regions.snapshot(
                    msg["region"]
                )
            elif op == "drop":  # no reply: a run that will not be judged
                pkey = str(msg.get("member") or "") + msg["key"]
                pending.pop(pkey, None)
                collected.pop(pkey, None)
            elif op == "release":  # no reply: the candidate's worker could not map it
                regions.release(msg["region"])
            elif op in ("check", "judge"):
                pkey = str(msg.get("member") or "") + msg["key"]
                staged = pending.pop(pkey, None)
                if isinstance(staged, str):
                    raise RuntimeError(f"the reference failed: {staged}")
                args, want = (
                    staged
                    if staged is not None
                    else expected.pop(msg["key"])
                    if msg["key"] in expected
                    else references.get(msg["key"])
                )
                runs = int(msg.get("runs", 1))
                shapes = msg["workload"]["shapes"]
                if op == "judge":  # the outputs the candidate's worker wrote into its slots
                    got = collected.pop(pkey)
                else:
                    try:
                        got = inputs.unpack(
                            msg.get("tensors"),
                            payload,
                            inputs.expected_meta(out_specs, shapes) * runs,
                        )
                    except inputs.OutputError as exc:
                        channel.send(conn, {"ok": True, "malformed": str(exc)})
                        continue
                n = len(out_specs)
                per_run = [
                    pool_of(msg).add(
                        _pool_key(msg["workload"]),
                        _compare_all(
                            out_specs, got[r * n : (r + 1) * n], want, args, rule, device, check
                        ),
                    )
                    for r in range(runs)
                ]
                independent = _independence(
                    seen.setdefault(msg["workload_key"], []), msg["seed"], out_specs, got[:n], want
                )
                channel.send(conn, {"ok": True, "runs": per_run, "independent": independent})
            elif op == "check_timed":
                calls = [int(i) for i in msg["calls"]]
                shapes = msg["workload"]["shapes"]
                try:
                    got = inputs.unpack(
                        msg.get("tensors"),
                        payload,
                        inputs.expected_meta(out_specs, shapes) * len(calls),
                    )
                except inputs.OutputError as exc:
                    channel.send(conn, {"ok": True, "malformed": str(exc)})
                    continue
                channel.send(conn, {"ok": True, "results": judge_timed(msg, calls, got)})
            elif op == "peer":  # the candidate worker's end is sent to it by the parent
                peer = socket.socket(fileno=shared_io.recv_fd(conn))
                channel.send(
                    conn,
                    {
                        "ok": True,
                        "shared": shared_io.cannot_share(device) is None,
                        "reason": shared_io.cannot_share(device),
                    },
                )
            elif op == "serve_round":
                assert peer is not None, "no peer socket"

                def ready(serving: bool, reason: str | None) -> None:
                    channel.send(conn, {"ok": True, "serving": serving, "reason": reason})

                try:
                    calls, got, count, serve_s = shared_io.serve_round(
                        peer, msg, specs, out_specs, device, custom, ready
                    )
                except shared_io.ProtocolError as exc:
                    channel.send(conn, {"ok": True, "violation": str(exc)})
                    continue
                except shared_io.AttachFailed as exc:
                    channel.send(conn, {"ok": True, "attach_failed": str(exc)})
                    continue
                if count:
                    channel.send(
                        conn,
                        {
                            "ok": True,
                            "calls": count,
                            "serve_s": serve_s,
                            "results": judge_timed(msg, calls, got),
                        },
                    )
            elif op == "time":
                channel.send(
                    conn,
                    {
                        "ok": True,
                        **_time(baseline_run, msg, specs, device, custom),
                        "impl": baseline_impl(baseline_module),
                    },
                )
            elif op == "sync":  # a batch's next candidate starts from a clean channel (batch.py)
                channel.send(conn, {"ok": True, "sync": msg.get("nonce")})
            elif op == "sim_values":  # a sim: device's counted call against the reference
                from core.harness.sim import reference as sim_reference

                channel.send(
                    conn, sim_reference.serve(reference_run, job, custom, check, sources, msg)
                )
            elif op == "predict_baseline":
                from core.harness.sim import predict as sim_predict

                reply = sim_predict.predict_baseline(
                    baseline_run, specs, msg["workload"], msg["seed"], custom, msg["formula"]
                )
                channel.send(
                    conn,
                    {**reply, "impl": baseline_impl(baseline_module)}
                    if isinstance(reply, dict)
                    else reply,
                )
            else:
                channel.send(conn, {"ok": False, "error": f"unknown op {op}"})
        except Exception as exc:  # noqa: BLE001
            channel.send(conn, _error(exc))


def baseline_impl(module: Any) -> str | None:
    """Which implementation the baseline ran: its module's `IMPL`, which run() sets to the
    name task.yaml's `baselines:` gives the candidate it used (read after the calls, so a
    fallback taken at call time is what is reported); None where the module sets none."""
    impl = getattr(module, "IMPL", None)
    return impl if isinstance(impl, str) else None


def _pool_key(workload: dict[str, Any]) -> str:
    """A workload's calls pool together whichever stage checks them (its axes name it)."""
    return ",".join(f"{k}={v}" for k, v in sorted(workload["axes"].items()))


class ReferenceCache:
    """(inputs, reference outputs) by `workload#seed`, up to `budget` bytes of tensors; what
    does not fit is computed again for each candidate (the single pending `expected`)."""

    def __init__(self, budget: int):
        self.budget, self.used = budget, 0
        self.entries: dict[str, tuple[list[Any], list[torch.Tensor]]] = {}

    def __contains__(self, key: str) -> bool:
        return key in self.entries

    def get(self, key: str) -> tuple[list[Any], list[torch.Tensor]]:
        return self.entries[key]

    def add(self, key: str, entry: tuple[list[Any], list[torch.Tensor]]) -> bool:
        size = sum(
            t.numel() * t.element_size()
            for t in [*entry[0], *entry[1]]
            if isinstance(t, torch.Tensor)
        )
        if self.used + size > self.budget:
            return False
        self.entries[key] = entry
        self.used += size
        return True


def _compare_all(
    out_specs: list[dict[str, Any]],
    got: list[torch.Tensor],
    want: list[torch.Tensor],
    args: list[Any],
    rule: dict[str, Any],
    device: torch.device,
    check: checking.Check | None,
) -> dict[str, Any]:
    if len(got) != len(out_specs):
        raise inputs.OutputError(f"{len(got)} outputs, expected {len(out_specs)}")
    return checking.judge(out_specs, [g.to(device) for g in got], want, args, rule, check)


def _sample(t: torch.Tensor) -> torch.Tensor:
    flat = t.detach().reshape(-1)
    n = flat.numel()
    k = min(n, INDEPENDENT_SAMPLE)
    # Integer arithmetic: a float32 linspace on a GPU rounds past n - 1 for large n.
    index = torch.arange(k, device=flat.device, dtype=torch.int64) * max(n - 1, 0) // max(k - 1, 1)
    return flat[index].to("cpu", torch.float64)


def _independence(
    history: list[tuple[int, list[str], list[torch.Tensor]]],
    seed: int,
    out_specs: list[dict[str, Any]],
    got: list[torch.Tensor],
    want: list[torch.Tensor],
) -> str | None:
    """Proof that an output ignores the inputs: bit-identical for two seeds whose expected
    outputs clearly differ (by more than half their size, on at least a quarter of the sampled
    elements: more than any rounding of a legitimate lower precision explains)."""
    digests = [hashlib.sha256(inputs.pack([g])[1]).hexdigest() for g in got]
    samples = [_sample(w) for w in want]
    found = None
    for other_seed, other_digests, other_samples in history:
        if other_seed == seed:
            continue
        for spec, d, od, s, os_ in zip(out_specs, digests, other_digests, samples, other_samples):
            if d != od or s.numel() == 0:
                continue
            both = torch.isfinite(s) & torch.isfinite(os_)
            differ = (
                (s - os_).abs() > INDEPENDENT_REL_DIFF * torch.maximum(s.abs(), os_.abs())
            ) & both
            share = float(differ.sum()) / s.numel()
            if share >= INDEPENDENT_MIN_SHARE:
                found = (
                    f"output `{spec['name']}` is bit-identical for seeds {other_seed} and {seed}, whose expected outputs "
                    f"differ by more than {INDEPENDENT_REL_DIFF:.0%} on {share:.0%} of the sampled elements: it does not depend on the inputs"
                )
                break
        if found:
            break
    history.append((seed, digests, samples))
    return found


def _time(
    fn: Callable[..., Any],
    msg: dict[str, Any],
    specs: list[dict[str, Any]],
    device: torch.device,
    custom: Any,
) -> dict[str, Any]:
    fresh = inputs.FreshInputs(specs, msg["workload"], msg["seed"], device, custom)
    return timing.time_calls(
        fn,
        fresh,
        device,
        msg["budget_ms"],
        msg["min_calls"],
        msg["max_calls"],
        msg["first_index"],
        msg["graph"],
        msg.get("sync_each_call", False),
    )


def _sync(device: torch.device) -> None:
    timing._sync(device.type)  # bound at import: a candidate's no-op synchronize is not ours


# --- the worker toolkit: what every worker process (this module's, ranked_worker's) uses ----
# Public names, in one place, so no other module reaches into this one's private helpers.
compare_all = _compare_all
drop_capabilities = _drop_capabilities
entry = _entry
error_reply = _error
hide_harness = _hide_harness
import_file = _import_file
is_compile_error = _is_compile_error
libc = _libc
limit_resources = _limit_resources
module_from_source = _module_from_source
redirect_output = _redirect_output
sync = _sync
