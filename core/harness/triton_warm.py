"""Triton's once-a-process costs, paid once in the harness parent before anything is forked.

Every worker is a fresh process, and a process's first Triton kernel pays two things that never
change between processes:

- its first compile or cache lookup computes `triton_key()`: a SHA-256 of Triton's own sources
  and of libtriton.so (415 MB in Triton 3.6), 0.4-0.9 s, kept in an lru_cache;
- its first launch imports the Gluon modules the JIT's argument binder asks for (Triton 3.6).

Sampled with py-spy on the H200 (docs/performance.md, "Where a warm batch's wall clock
goes"), these were 1.5 s of CPU an evaluation: in every candidate's compile stage and in the
baseline worker's first timed round. Paid here, once per harness, every process forked
afterwards (the zygotes, every worker) inherits both.

Nothing here runs a kernel or asks for a GPU (the parent must not initialise the driver before
it forks), and nothing here depends on a job: the key is a function of the installed Triton's
files, the modules are Triton's own. A Triton without these (another version) is left as it is:
its first compile pays them, as before.
"""

from __future__ import annotations

import importlib
import os

from core.harness import trace

ENV = "ARENA_TRITON_WARM"  # set by the engine for devices whose workers compile (core/devices)
# Imported by Triton 3.6's JIT at a kernel's first launch (the binder's tensor-descriptor types).
LAZY_MODULES = ("triton.experimental.gluon", "triton.experimental.gluon.nvidia.hopper")


def wanted() -> bool:
    return os.environ.get(ENV) == "1"


def warm() -> list[str]:
    """Compute Triton's key and import its lazily imported modules in this process; what was
    done (names), for the trace and the tests."""
    done: list[str] = []
    with trace.span("start: triton warm"):
        try:
            from triton.runtime.cache import triton_key

            triton_key()
            done.append("triton_key")
        except Exception:  # noqa: BLE001 - another Triton, an unreadable file: the workers pay it, as before
            pass
        for name in LAZY_MODULES:
            try:
                importlib.import_module(name)
                done.append(name)
            except Exception:  # noqa: BLE001 - never a reason for the harness not to start
                pass
    return done
