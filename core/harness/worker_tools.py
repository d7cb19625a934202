"""What every worker process (candidate, trusted, rank, checker) loads and answers with.

The task's files are read as bytes checked against the hashes the engine recorded in the job
(`read_task_file`), then executed from those bytes (`module_from_source`), so a later change on
disk cannot matter; the candidate is imported from its path (`import_file`). `candidate_view`
is the part of the job the candidate's process receives. A failure becomes one error reply
(`error_reply`); `sync` waits for the device through the timer's own bound function.
"""

from __future__ import annotations

import ctypes
import hashlib
import importlib.util
import linecache
import os
import sys
import traceback
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

from core.harness import inputs, timing


class TaskFileChanged(RuntimeError):
    """A task file's bytes differ from the hash the engine recorded when it built the job."""


def import_file(path: Path, name: str) -> types.ModuleType:
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


def module_from_source(source: bytes, name: str, filename: str) -> types.ModuleType:
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


def entry(module: types.ModuleType, path: str) -> Callable[..., Any]:
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
        "autotune_configs": job.get("autotune_configs"),  # the profile's budget (autotune.py)
        "autotune_rep_ms": job.get("autotune_rep_ms"),
        "autotune_compile_ahead": job.get("autotune_compile_ahead"),
        "isolation": job.get("isolation"),  # what its process covers (core/harness/isolation.py)
    }


def device_of(job: dict[str, Any]) -> torch.device:
    device = torch.device(job["device"]["torch_device"])
    if device.type == "cuda":
        torch.cuda.set_device(device)
    return device


HARNESS_DIR = Path(__file__).resolve().parent
TRACEBACK_FRAMES = 20  # the innermost ones: where it went wrong


def _ours(filename: str) -> bool:
    """A frame of the harness itself, or of the import machinery it calls the code through."""
    if filename.startswith("<frozen importlib"):
        return True
    try:
        return Path(filename).resolve().parent == HARNESS_DIR
    except (OSError, ValueError):
        return False


def code_traceback(exc: BaseException) -> str:
    """The traceback of an exception raised by the code the harness called (a candidate, a task's
    reference or baseline), as if that code had been run on its own: the harness's frames that
    lead to it are dropped, so it starts at the candidate's own line. An exception with no frame
    outside the harness (its own fault) keeps every frame; a syntax error in the code is its file,
    line and caret."""
    frames = traceback.extract_tb(exc.__traceback__)
    first = next((i for i, f in enumerate(frames) if not _ours(f.filename)), None)
    if first is not None:
        frames = traceback.StackSummary.from_list(frames[first:])
    elif isinstance(exc, SyntaxError) and exc.filename and not _ours(exc.filename):
        frames = traceback.StackSummary()  # the file, the line and the caret say it all
    lines = traceback.format_list(frames[-TRACEBACK_FRAMES:]) if frames else []
    head = ["Traceback (most recent call last):\n"] if lines else []
    return "".join(head + lines + traceback.format_exception_only(type(exc), exc))[-8000:]


def error_reply(exc: BaseException) -> dict[str, Any]:
    reply = {
        "ok": False,
        "error": f"{type(exc).__name__}: {exc}",
        "traceback": code_traceback(exc),
    }
    from core.harness.triton_cpu import unsupported_reason

    reason = unsupported_reason(exc)
    if reason:
        if ("0 active drivers" in reason or "CUDA GPU" in reason) and os.environ.get(
            "CUDA_VISIBLE_DEVICES", ""
        ) != "":
            reason = f"{reason} ({gpu_visibility()})"  # on a GPU the harness's fault: say why
        reply["unsupported"] = reason[:500]
    return reply


def gpu_visibility() -> str:
    """What this process's torch and CUDA driver say of the GPU, for a worker on a GPU device
    that Triton found without one (its cause was NVML state inherited across forks)."""
    parts = [f"CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')!r}"]
    try:
        parts.append(f"torch.cuda.is_available()={torch.cuda.is_available()}")
        parts.append(f"torch.cuda.is_initialized()={torch.cuda.is_initialized()}")
    except Exception as exc:  # noqa: BLE001 - a diagnosis must not raise
        parts.append(f"torch.cuda: {type(exc).__name__}")
    try:
        lib = ctypes.CDLL("libcuda.so.1")
        count = ctypes.c_int(-1)
        parts.append(
            f"cuInit={lib.cuInit(0)}, cuDeviceGetCount={lib.cuDeviceGetCount(ctypes.byref(count))}/{count.value}"
        )
    except OSError as exc:
        parts.append(f"libcuda: {exc}")
    return ", ".join(parts)


def is_compile_error(exc: BaseException) -> bool:
    names = {cls.__name__ for cls in type(exc).__mro__}
    return bool(
        names & {"CompilationError", "CompileTimeAssertionFailure", "BuildExtensionError"}
    ) or (isinstance(exc, RuntimeError) and "Error building extension" in str(exc))


def sync(device: torch.device) -> None:
    timing._sync(device.type)  # bound at import: a candidate's no-op synchronize is not ours


def run_packed(
    fn: Callable[..., Any],
    draw: Callable[[], list[Any]],
    repeat: int,
    specs: list[dict[str, Any]],
    outs: list[dict[str, Any]],
    shapes: dict[str, list[int]],
    device: torch.device,
) -> tuple[dict[str, Any], bytes]:
    """`repeat` calls, each on a fresh copy of the inputs `draw` makes, into poisoned memory;
    their outputs checked for type and packed for the trusted side (a reply and its payload)."""
    metas: list[dict[str, Any]] = []
    chunks: list[bytes] = []
    for _ in range(repeat):
        args = draw()
        inputs.poison(outs, shapes, device)
        result = fn(*args)
        sync(device)
        meta, data = inputs.pack(inputs.collect_outputs(result, outs, specs, args, shapes, device))
        metas += meta
        chunks.append(data)
        del result, args
    return {"ok": True, "tensors": metas}, b"".join(chunks)


@contextmanager
def pinned(cpu: int | None) -> Iterator[None]:
    """Every thread of this process on one CPU for the duration of a timed round, then back
    where it was. The parent names the same CPU for the candidate's round and the baseline's
    (performance.py `timing_cpu`): a call that waits for the GPU inside it (a `.tolist()`, an
    `.item()`) is timed with the host's part in it, and on the H200 such a call read up to 10%
    apart between the two processes, each consistent over its rounds (prefill_gqa, mla_prefill,
    2026-12-02): the host's side of the identity was not the same. `None`: as it is."""
    try:
        saved = os.sched_getaffinity(0)
    except (AttributeError, OSError):  # not Linux
        saved = set()
    if cpu is None or cpu not in saved:  # or another CPU set than the parent's: leave it
        yield
        return
    _set_threads({cpu})
    try:
        yield
    finally:
        _set_threads(saved)


def _set_threads(cpus: set[int]) -> None:
    """`sched_setaffinity` for each thread of this process (one call sets one thread's)."""
    try:
        threads = [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:
        threads = [0]
    for tid in threads:
        try:
            os.sched_setaffinity(tid, cpus)
        except OSError:
            pass  # a thread that ended meanwhile
