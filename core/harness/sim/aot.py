"""Compile a launched Triton kernel ahead of time for a GPU that is not here (the `sim:` devices).

The PyPI Triton wheel carries the NVIDIA and AMD back ends, ptxas and cuobjdump, so a CPU-only
machine can compile a kernel for sm_90 / sm_100 / gfx942 / gfx950 exactly as the GPU's own
Triton would, and read what the compiler decided: registers per thread, spilled bytes, shared
memory per program, and whether the matrix instructions the target is fast with (wgmma on
Hopper, tcgen05 on Blackwell, MFMA on CDNA) were used or the slower mma.sync path was taken.

Runs inside the candidate's worker: compiling evaluates the candidate's Python (constexpr
functions, helpers). A compile that cannot run here (no ptxas, a back end missing, a kernel
the AOT path does not take) returns the reason, never raises: the model then assumes one
program per SM and says so.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from typing import Any

import torch

from core.harness.sim.aot_language import (
    PristineLanguage,
    _compiled_helpers,
    _pristine_codegen_builtins,
)
from core.harness.sim.aot_resources import _read_amd, _read_nvidia

_TORCH_TO_TRITON = {
    torch.float16: "fp16",
    torch.bfloat16: "bf16",
    torch.float32: "fp32",
    torch.float64: "fp64",
    torch.int8: "i8",
    torch.int16: "i16",
    torch.int32: "i32",
    torch.int64: "i64",
    torch.uint8: "u8",
    torch.bool: "i1",
}
for _name, _ty in (
    ("float8_e4m3fn", "fp8e4nv"),
    ("float8_e5m2", "fp8e5"),
    ("float8_e4m3fnuz", "fp8e4b8"),
    ("float8_e5m2fnuz", "fp8e5b16"),
):
    if hasattr(torch, _name):
        _TORCH_TO_TRITON[getattr(torch, _name)] = _ty


@dataclass(frozen=True)
class Resources:
    """What the compiler decided for one kernel configuration on the target."""

    ok: bool
    registers: int | None = None  # per thread (VGPRs on AMD)
    spill_bytes: int | None = None  # per thread (NVIDIA STACK; AMD VGPR spills × 4 B)
    shared_bytes: int | None = None  # per program (dynamic + static)
    mma: str | None = None  # wgmma | tcgen05 | mma | mfma | None (no matrix instruction)
    num_warps: int = 4
    num_stages: int = 3
    compile_s: float = 0.0
    error: str | None = None
    rejected: bool = False  # the target's compiler (its MLIR passes, ptxas) or its resource limits refused the kernel: the GPU would too

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def target_of(spec: dict[str, Any]) -> Any:
    from triton.backends.compiler import GPUTarget

    arch = spec["arch"]
    return GPUTarget(
        spec["backend"],
        int(arch) if spec["backend"] == "cuda" else str(arch),
        int(spec["warp_size"]),
    )


def signature_of(
    fn: Any, bound: dict[str, Any]
) -> tuple[dict[str, str], dict[tuple[int, ...], Any]]:
    """Triton's signature and constexprs for a launch, from the values it was called with."""
    from triton.runtime.jit import JITFunction

    params = JITFunction(fn).params
    signature: dict[str, str] = {}
    constexprs: dict[tuple[int, ...], Any] = {}
    for i, p in enumerate(params):
        value = bound.get(p.name, p.default if p.has_default else None)
        value = getattr(value, "value", value) if type(value).__name__ == "constexpr" else value
        if p.is_constexpr:
            signature[p.name] = "constexpr"
            constexprs[(i,)] = value
        elif value is None:
            signature[p.name] = "constexpr"
            constexprs[(i,)] = None
        elif hasattr(value, "data_ptr"):
            dtype = getattr(value, "dtype", None)
            if dtype not in _TORCH_TO_TRITON:
                raise TypeError(
                    f"argument `{p.name}` has dtype {dtype}, which the AOT path does not map"
                )
            signature[p.name] = "*" + _TORCH_TO_TRITON[dtype]
        elif isinstance(value, bool):
            signature[p.name] = "i1"
        elif isinstance(value, int):
            signature[p.name] = "i32" if -(2**31) <= value < 2**31 else "i64"
        elif isinstance(value, float):
            signature[p.name] = "fp32"
        else:
            raise TypeError(
                f"argument `{p.name}` is a {type(value).__name__}, which the AOT path does not take"
            )
    return signature, constexprs


def compile_launch(
    fn: Any,
    bound: dict[str, Any],
    options: dict[str, Any],
    spec: dict[str, Any],
    cache_dir: str | None = None,
) -> Resources:
    """Compile `fn` as launched (`bound` argument values, `options` num_warps/num_stages) for
    the target `spec` ({backend, arch, warp_size}); never raises."""
    warps = int(options.get("num_warps", 4))
    stages = int(options.get("num_stages", 3 if spec["backend"] == "cuda" else 2))
    started = time.perf_counter()
    try:
        import triton
        from triton.compiler import ASTSource

        if cache_dir:
            os.environ["TRITON_CACHE_DIR"] = cache_dir
        signature, constexprs = signature_of(fn, bound)
        refused: Exception | None = None
        with PristineLanguage.restored(), _compiled_helpers(fn), _Diagnostics() as diagnostics:
            from triton.runtime.jit import JITFunction

            _pristine_codegen_builtins()

            src = ASTSource(fn=JITFunction(fn), signature=signature, constexprs=constexprs)
            try:
                kernel = triton.compile(
                    src, target=target_of(spec), options={"num_warps": warps, "num_stages": stages}
                )
            except Exception as exc:
                if not _refused_by_compiler(exc):
                    raise
                refused = exc

        def rejected(error: str) -> Resources:  # the target refuses it: the candidate's fault
            return Resources(
                ok=False,
                num_warps=warps,
                num_stages=stages,
                compile_s=time.perf_counter() - started,
                rejected=True,
                error=error,
            )

        if refused is not None:
            return rejected(
                f"{type(refused).__name__}: {refused}".strip().splitlines()[0][:200]
                + diagnostics.summary()
            )
        found = _read_nvidia(kernel) if spec["backend"] == "cuda" else _read_amd(kernel)
        limit = int(spec.get("shared_per_unit") or 0)
        if (
            limit and found.get("shared_bytes", 0) > limit
        ):  # the driver refuses such a launch (triton's OutOfResources)
            return rejected(
                f"out of shared memory: a program needs {found['shared_bytes']} bytes, the target has {limit} per unit; smaller tiles or fewer stages"
            )
        # The launch parameters the compiled kernel has, not the ones asked for.
        metadata = getattr(kernel, "metadata", None)
        warps = int(getattr(metadata, "num_warps", warps) or warps)
        stages = int(getattr(metadata, "num_stages", stages) or stages)
        return Resources(
            ok=True,
            num_warps=warps,
            num_stages=stages,
            compile_s=time.perf_counter() - started,
            **found,
        )
    except BaseException as exc:
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        if os.environ.get("ARENA_SIM_DEBUG"):
            import traceback

            traceback.print_exc()
        message = f"{type(exc).__name__}: {exc}".strip().splitlines()[0][:300]
        return Resources(
            ok=False,
            num_warps=warps,
            num_stages=stages,
            compile_s=time.perf_counter() - started,
            error=message,
        )


def _refused_by_compiler(exc: BaseException) -> bool:
    """Whether a compile failed in the target's own back end (an MLIR pass or ptxas), as it
    would on that GPU, rather than in this AOT path (a front-end error on a kernel the
    interpreter ran is more likely this path's limit: reported, never held against it)."""
    return type(exc).__name__ == "PTXASError" or (
        isinstance(exc, RuntimeError) and "PassManager::run failed" in str(exc)
    )


class _Diagnostics:
    """Captures what the compiler's C++ writes to stderr (MLIR diagnostics, failed assertions)
    while compiling, to quote it when the compile fails; passed on to stderr afterwards."""

    def __enter__(self) -> _Diagnostics:
        sys.stderr.flush()
        self.file = tempfile.TemporaryFile()
        self.saved = os.dup(2)
        os.dup2(self.file.fileno(), 2)
        self.text = ""
        return self

    def __exit__(self, *exc: object) -> None:
        sys.stderr.flush()
        os.dup2(self.saved, 2)
        os.close(self.saved)
        self.file.seek(0)
        self.text = self.file.read().decode(errors="replace")
        self.file.close()
        if self.text:  # what the compiler said still reaches the worker's log
            os.write(2, self.text.encode())

    def summary(self) -> str:
        """What is worth quoting, read after exit: the pass that failed and its failed assertion,
        else the first error line (ptxas's, say)."""
        found = []
        if m := re.search(r"Pipeline failed while executing \[`([^`]+)`", self.text):
            found.append(f"in the pass {m.group(1)}")
        if m := re.search(r"Assertion `(.+?)' failed", self.text):
            found.append(f"assertion `{m.group(1)}` failed")
        if not found:
            found = [line.strip() for line in self.text.splitlines() if "error" in line.lower()][:1]
        return f" ({'; '.join(found)[:300]})" if found else ""
