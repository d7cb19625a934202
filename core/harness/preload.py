"""The task's libraries imported once per harness, before workers are forked from it.

The harness parent imports torch and triton at start, so every worker it (or its zygote) forks
has them. A task's baseline may import more: Liger-Kernel (`liger_kernel.ops.swiglu` pulls in
the whole package and torch._dynamo: 1.5-3 s), FlashInfer. Every trusted worker paid that import
again when it loaded the baseline, and so did every candidate that imported the same library
(the baseline submitted as a candidate, a policy's copy of library code). Now, before a task's
first job, the modules its baseline imports (`task_libraries`) are imported into the zygote,
then into the parent: the workers forked afterwards find them loaded.

What a candidate may import is not changed: these are modules it could import itself; they
are only imported earlier, by the harness, from the task's own (hash-checked) baseline.

A library that initialises CUDA or starts a thread when imported would break every later fork
(a CUDA context does not survive one; a lock held by another thread stays held). So the zygote
imports first and checks: where either happened, it exits, the parent starts a fresh zygote and
never imports those modules itself; the workers then import them, as before.
"""

from __future__ import annotations

import ast
import ctypes
import gc
import importlib
import os
import sys
import threading
import time
from typing import Any

from core.harness import trace
from core.harness.pysource import parse_module
from core.harness.worker_tools import read_task_file

# Already in every worker, or not a library: never preloaded.
SKIPPED = {"torch", "triton", "numpy", "core", "__future__"}
MAX_MODULES = 16


def task_libraries(job: dict[str, Any]) -> list[str]:
    """The modules the task's baseline imports (top level, or inside a try or if at its top
    level, as `try: import liger_kernel ...` is), but the standard library and what every
    worker has already."""
    try:
        source = read_task_file(job, "baseline.py")
    except Exception:  # noqa: BLE001 - the trusted worker reports a missing or changed file
        return []
    if source is None:
        return []
    try:
        tree = parse_module(source)
    except SyntaxError:
        return []
    names: list[str] = []
    stack: list[ast.stmt] = list(tree.body)
    while stack:
        node = stack.pop(0)
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.append(node.module)
        elif isinstance(node, (ast.Try, ast.If)):
            stack += [
                *node.body,
                *getattr(node, "orelse", []),
                *[s for h in getattr(node, "handlers", []) for s in h.body],
            ]
    top = set(sys.stdlib_module_names) | SKIPPED
    return [n for n in dict.fromkeys(names) if n.split(".")[0] not in top][:MAX_MODULES]


def import_here(modules: list[str]) -> dict[str, Any]:
    """Import `modules` in this process; what it did to the process's fork safety. Runs in the
    zygote (which answers with it) and, once the zygote found them safe, in the parent."""
    imported, failed = [], {}
    threads = threading.active_count()
    for name in modules:
        try:
            importlib.import_module(name)
            imported.append(name)
        except Exception as exc:  # noqa: BLE001 - not installed, or broken here: the worker will say
            failed[name] = f"{type(exc).__name__}: {exc}"[:200]
    release_nvml()
    unsafe = None
    torch = sys.modules.get("torch")
    if (torch is not None and torch.cuda.is_initialized()) or cuda_driver_initialised():
        unsafe = "importing it initialised CUDA"
    elif threading.active_count() > threads:
        unsafe = "importing it started a thread"
    return {"imported": imported, "failed": failed, "unsafe": unsafe}


CUDA_ERROR_NOT_INITIALIZED = 3


def cuda_driver_initialised() -> bool:
    """Whether this process has initialised the CUDA driver, torch or not: a library that asks
    `torch.cuda.is_available()` at import (cudaGetDeviceCount) initialises the driver and leaves
    torch's own flag (`torch.cuda.is_initialized`) unset, and a process forked after that cannot
    use the GPU (Triton then finds "0 active drivers")."""
    try:  # only where libcuda is loaded already: loading it here would change nothing
        lib = ctypes.CDLL("libcuda.so.1", mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
    except OSError:
        return False
    count = ctypes.c_int()
    return lib.cuDeviceGetCount(ctypes.byref(count)) != CUDA_ERROR_NOT_INITIALIZED


NVML_SUCCESS = 0
MAX_NVML_SHUTDOWNS = 256


def release_nvml() -> int:
    """Shut NVML down in this process if an import initialised it; how many times it was.

    With PYTORCH_NVML_BASED_CUDA_CHECK (set in the harness parent, __main__.py),
    `torch.cuda.is_available()` asks NVML, and torch never shuts it down: Liger asks at import
    (`infer_device`). NVML then holds descriptors of the driver's device nodes, which every
    forked worker closes (`workers.close_inherited`) and may reuse for its own sockets and
    files, while its copy of NVML still counts itself initialised: NVML's next answer in a
    grandchild (a batch slot's zygote forks the workers) was "no GPU", torch said CUDA was
    unavailable and Triton found "0 active drivers" (every H200 batch of 2026-12-02). Shut
    down here, each process that forks from this one starts NVML afresh when it asks."""
    try:  # only where libnvidia-ml is loaded already
        lib = ctypes.CDLL("libnvidia-ml.so.1", mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
    except OSError:
        return 0
    released = 0
    while released < MAX_NVML_SHUTDOWNS and lib.nvmlShutdown() == NVML_SUCCESS:
        released += 1  # one per nvmlInit: torch's availability check inits each time it asks
    return released


class Preloader:
    """What the harness parent has preloaded, and the modules found unsafe to preload."""

    def __init__(self) -> None:
        self.done: set[str] = set()
        self.refused: set[str] = set()

    def prepare(self, job: dict[str, Any], zygote: Any) -> Any:
        """Preload the job's task libraries not yet loaded; the zygote to use from here on (a
        fresh one where the import made the old one unsafe to fork from)."""
        wanted = [m for m in task_libraries(job) if m not in self.done | self.refused]
        if not wanted:
            return zygote
        with trace.span("start: preload"):
            try:
                reply = zygote.preload(wanted)
            except Exception:  # noqa: BLE001 - the zygote died on it: a fresh one, nothing preloaded
                reply = {"unsafe": "the zygote died importing it"}
            if reply.get("unsafe"):
                self.refused.update(wanted)
                # In the harness's log (its stderr) and the trace: nothing else to tell.
                sys.stderr.write(f"preload refused for {wanted}: {reply['unsafe']}\n")
                trace.record(f"start: preload refused: {reply['unsafe']}", time.monotonic(), 0.0)
                zygote.close()
                return type(zygote)()
            for name, why in (reply.get("failed") or {}).items():
                sys.stderr.write(f"preload: {name} did not import here: {why}\n")
            self.done.update(wanted)
            loaded = [m for m in wanted if m in (reply.get("imported") or [])]
            if loaded:
                import_here(loaded)  # safe: the zygote's import of the same did nothing unsafe
                gc.freeze()  # as at start (__main__.py): out of every worker's collections
        return zygote
