"""The two worker processes of an evaluation, forked from the harness parent.

`candidate` imports the candidate and runs or times it; `trusted` imports the reference and
the baseline (never the candidate), computes expected outputs, checks the candidate's, and
times the baseline. Each worker leads its own process group, so that everything it starts is
killed with it, and dies with its parent.
"""

from __future__ import annotations

import ctypes
import importlib.util
import multiprocessing as mp
import os
import signal
import sys
import traceback
import uuid
from multiprocessing.connection import Connection
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

import torch

from . import channel, compare, inputs, timing

_FORK = mp.get_context("fork")
PR_SET_PDEATHSIG = 1


class WorkerDied(RuntimeError):
    """The worker process exited; `reason` says how (signal, exit code)."""

    def __init__(self, name: str, reason: str):
        self.name, self.reason = name, reason
        super().__init__(f"{name} worker {reason}")


class WorkerTimeout(TimeoutError):
    pass


class Worker:
    """A forked worker and its pipe; `request` sends one message and waits for the reply."""

    def __init__(self, name: str, main: Callable[..., None], job: dict[str, Any], close_fds: tuple[int, ...]):
        self.name = name
        parent_end, child_end = _FORK.Pipe(duplex=True)
        self.conn: Connection = parent_end
        self.process = _FORK.Process(target=_bootstrap, args=(main, child_end, parent_end, job, close_fds), name=f"arena-{name}", daemon=False)
        self.process.start()
        child_end.close()

    def send(self, header: dict[str, Any], payload: bytes | None = None) -> None:
        try:
            channel.send(self.conn, header, payload)
        except (BrokenPipeError, OSError):
            raise WorkerDied(self.name, self.exit_reason()) from None

    def recv(self, timeout: float) -> tuple[dict[str, Any], bytes | None]:
        try:
            return channel.recv(self.conn, timeout)
        except channel.ChannelTimeout:
            raise WorkerTimeout(f"{self.name} worker did not answer within {timeout:.0f} s") from None
        except channel.ChannelClosed:
            raise WorkerDied(self.name, self.exit_reason()) from None

    def request(self, header: dict[str, Any], timeout: float, payload: bytes | None = None) -> tuple[dict[str, Any], bytes | None]:
        self.send(header, payload)
        return self.recv(timeout)

    def exit_reason(self) -> str:
        self.process.join(timeout=2)
        code = self.process.exitcode
        if code is None:
            return "stopped answering"
        if code < 0:
            return f"was killed by signal {signal.Signals(-code).name}"
        return f"exited with code {code}"

    def kill(self) -> None:
        """Kill the worker's whole process group: whatever it started dies with it."""
        pid = self.process.pid
        if pid is not None:
            for target in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
                try:
                    target()
                except (ProcessLookupError, PermissionError):
                    pass
        self.process.join(timeout=5)
        self.conn.close()


def _bootstrap(main: Callable[..., None], conn: Connection, parent_end: Connection, job: dict[str, Any], close_fds: tuple[int, ...]) -> None:
    parent_end.close()
    os.setpgid(0, 0)
    _die_with_parent()
    for fd in close_fds:  # the engine's events descriptor: never reachable from a worker
        try:
            os.close(fd)
        except OSError:
            pass
    main(conn, job)


def _die_with_parent() -> None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # not Linux: the parent's finally-block kill still applies


def _redirect_output(log_path: Path) -> None:
    """Whatever the worker prints (compiler output included) goes to its log, never to the
    descriptors the engine reads."""
    sys.stdout.flush()
    sys.stderr.flush()
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


def _import_file(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _task_inputs(task_dir: Path) -> Any:
    """The task's own `make_inputs` from its optional `inputs.py`, or None for the default
    generator. It lives apart from reference.py so that the candidate's process can draw its
    inputs without ever loading the reference."""
    path = task_dir / "inputs.py"
    return getattr(_import_file(path, "arena_task_inputs"), "make_inputs") if path.is_file() else None


def _entry(module: ModuleType, path: Path) -> Callable[..., Any]:
    fn = getattr(module, "run", None)
    if not callable(fn):
        raise AttributeError(f"{path.name} defines no function `run(*inputs)`")
    return fn


def _device(job: dict[str, Any]) -> torch.device:
    device = torch.device(job["device"]["torch_device"])
    if device.type == "cuda":
        torch.cuda.set_device(device)
    return device


def _error(exc: BaseException) -> dict[str, Any]:
    return {"ok": False, "error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc(limit=20)[-8000:]}


def _is_compile_error(exc: BaseException) -> bool:
    names = {cls.__name__ for cls in type(exc).__mro__}
    return bool(names & {"CompilationError", "CompileTimeAssertionFailure", "BuildExtensionError"}) or (
        isinstance(exc, RuntimeError) and "Error building extension" in str(exc)
    )


def candidate_main(conn: Connection, job: dict[str, Any]) -> None:
    workdir = Path(job["workdir"])
    _redirect_output(workdir / "candidate.log")
    os.environ["TORCH_EXTENSIONS_DIR"] = str(workdir / "torch_extensions")
    device = _device(job)
    if device.type == "cpu":
        from .triton_cpu import enable_interpreter

        enable_interpreter()
    run: Callable[..., Any] | None = None
    specs, outs = job["inputs"], job["outputs"]
    custom = _task_inputs(Path(job["task_dir"]))
    while True:
        try:
            msg, _ = channel.recv(conn)
        except channel.ChannelClosed:
            return
        op = msg.get("op")
        try:
            if op == "exit":
                channel.send(conn, {"ok": True})
                return
            if op == "compile":
                path = Path(job["candidate"])
                run = _entry(_import_file(path, f"arena_candidate_{uuid.uuid4().hex[:8]}"), path)
                reply: dict[str, Any] = {"ok": True}
                try:  # the first call builds JIT kernels: a build failure is a compile failure
                    args = inputs.correctness_inputs(specs, msg["workload"], msg["seed"], device, custom)
                    run(*args)
                    _sync(device)
                except Exception as exc:  # noqa: BLE001
                    if _is_compile_error(exc):
                        reply = _error(exc)
                    else:
                        reply["first_call_error"] = f"{type(exc).__name__}: {exc}"
                channel.send(conn, reply)
            elif op == "run":
                assert run is not None, "compile first"
                args = inputs.correctness_inputs(specs, msg["workload"], msg["seed"], device, custom)
                result = run(*args)
                _sync(device)
                checked = inputs.collect_outputs(result, outs, specs, args, msg["workload"]["shapes"], device)
                channel.send(conn, {"ok": True}, inputs.pack(checked))
            elif op == "time":
                assert run is not None, "compile first"
                channel.send(conn, {"ok": True, **_time(run, msg, specs, device, custom)})
            else:
                channel.send(conn, {"ok": False, "error": f"unknown op {op}"})
        except Exception as exc:  # noqa: BLE001 - the candidate's failure is reported, not raised
            channel.send(conn, _error(exc))


def trusted_main(conn: Connection, job: dict[str, Any]) -> None:
    workdir = Path(job["workdir"])
    _redirect_output(workdir / "trusted.log")
    device = _device(job)
    # The reference is computed in full float32: no TF32 shortcuts.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    task_dir = Path(job["task_dir"])
    reference = _import_file(task_dir / "reference.py", "arena_reference")
    baseline_module = _import_file(task_dir / "baseline.py", "arena_baseline")
    reference_run = _entry(reference, task_dir / "reference.py")
    baseline_run = _entry(baseline_module, task_dir / "baseline.py")
    custom = _task_inputs(task_dir)
    specs = job["inputs"]
    rule = job["correctness"]
    expected: dict[str, list[torch.Tensor]] = {}
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
                args = inputs.correctness_inputs(specs, msg["workload"], msg["seed"], device, custom)
                with torch.no_grad():
                    result = reference_run(*args)
                expected.clear()  # one pending check at a time; a failed run leaves none behind
                expected[msg["key"]] = list(result) if isinstance(result, (tuple, list)) else [result]
                _sync(device)
                channel.send(conn, {"ok": True})
            elif op == "check":
                want = expected.pop(msg["key"])
                got = inputs.unpack(payload or b"")
                if len(got) != len(want):
                    raise inputs.OutputError(f"{len(got)} outputs, expected {len(want)}")
                per_output = {}
                for spec, g, w in zip(job["outputs"], got, want):
                    per_output[spec["name"]] = compare.compare(g.to(device), w, rule["atol"], rule["rtol"], rule["min_match"])
                channel.send(conn, {"ok": True, "outputs": per_output})
            elif op == "time":
                channel.send(conn, {"ok": True, **_time(baseline_run, msg, specs, device, custom)})
            else:
                channel.send(conn, {"ok": False, "error": f"unknown op {op}"})
        except Exception as exc:  # noqa: BLE001
            channel.send(conn, _error(exc))


def _time(fn: Callable[..., Any], msg: dict[str, Any], specs: list[dict[str, Any]], device: torch.device, custom: Any) -> dict[str, Any]:
    fresh = inputs.FreshInputs(specs, msg["workload"], msg["seed"], device, custom)
    return timing.time_calls(
        fn, fresh, device, msg["budget_ms"], msg["min_calls"], msg["max_calls"], msg["first_index"], msg["graph"], msg.get("sync_each_call", False)
    )


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "xpu":
        torch.xpu.synchronize(device)
