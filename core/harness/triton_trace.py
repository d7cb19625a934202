"""Where a Triton candidate's compile seconds go, in the harness's trace (trace.py): each kernel
compiled or loaded from the cache, each C module Triton builds (its launchers, its driver's
utilities), each autotune trial. Installed in a worker before any candidate or task code runs,
only while the trace is on; off, nothing is patched.

Span names (role `candidate` or `trusted`):
- `triton: compile` / `triton: cache hit`: one kernel through Triton's compiler, from Triton's
  own compilation listener (its timer: source to binary, or a load from the cache);
- `triton: build <module>`: gcc building a C module (`__triton_launcher` per new signature,
  `cuda_utils` once per cache), or loading it from the cache;
- `triton: autotune trial`: one configuration tried by an autotuner (its compile and its
  benchmark; the compile is also in the spans above).
"""

from __future__ import annotations

import time
from typing import Any

from core.harness import trace

_MARK = "_arena_traced"


def install() -> None:
    """Trace Triton's compiles, builds and autotune trials in this process (trace on only)."""
    if not trace.enabled():
        return
    try:
        from triton import knobs
        from triton.runtime import autotuner, build
    except ImportError:
        return
    _listen(knobs)
    _wrap_builds(build)
    _wrap_trials(autotuner.Autotuner)


def _listen(knobs: Any) -> None:
    previous = knobs.compilation.listener

    def listener(
        *, src: Any, metadata: Any, metadata_group: Any, times: Any, cache_hit: bool
    ) -> None:
        seconds = max(0.0, float(getattr(times, "total", 0)) / 1e6)
        trace.record(
            "triton: cache hit" if cache_hit else "triton: compile",
            time.monotonic() - seconds,
            seconds,
        )
        if previous is not None:
            previous(
                src=src,
                metadata=metadata,
                metadata_group=metadata_group,
                times=times,
                cache_hit=cache_hit,
            )

    knobs.compilation.listener = listener


def _wrap_builds(build: Any) -> None:
    original = build.compile_module_from_src
    if getattr(original, _MARK, False):
        return

    def compile_module_from_src(src: str, name: str, *args: Any, **kwargs: Any) -> Any:
        with trace.span(f"triton: build {name}"):
            return original(src, name, *args, **kwargs)

    setattr(compile_module_from_src, _MARK, True)
    build.compile_module_from_src = compile_module_from_src
    # The backends import the function by name: theirs is replaced too, where loaded.
    import sys

    for module_name in ("triton.backends.nvidia.driver", "triton.backends.amd.driver"):
        module = sys.modules.get(module_name)
        if module is not None and getattr(module, "compile_module_from_src", None) is original:
            setattr(module, "compile_module_from_src", compile_module_from_src)  # noqa: B010


def _wrap_trials(cls: Any) -> None:
    original = cls.__dict__.get("_bench")
    if original is None or getattr(original, _MARK, False):
        return

    def _bench(self: Any, *args: Any, **kwargs: Any) -> Any:
        with trace.span("triton: autotune trial"):
            return original(self, *args, **kwargs)

    setattr(_bench, _MARK, True)
    cls._bench = _bench  # type: ignore[attr-defined]
