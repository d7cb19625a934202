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

import hashlib
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from typing import Any

import torch

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


class _compiled_helpers:
    """While compiling: the interpreter is off (Triton's code generator reads the knob), and the
    kernel's module sees compilable JITFunctions where the interpreter put InterpretedFunctions
    (helpers decorated after the interpreter was switched on)."""

    def __init__(self, fn: Any):
        self.globals = getattr(fn, "__globals__", {})
        self.saved: dict[str, Any] = {}
        self.knob: Any = None
        self.env: str | None = None

    def __enter__(self) -> None:
        import triton
        from triton.runtime.interpreter import InterpretedFunction
        from triton.runtime.jit import JITFunction

        runtime = getattr(getattr(triton, "knobs", None), "runtime", None)
        self.env = os.environ.get("TRITON_INTERPRET")
        os.environ["TRITON_INTERPRET"] = "0"
        if runtime is not None:
            self.knob = runtime.interpret
            runtime.interpret = False
        for name, value in list(self.globals.items()):
            if isinstance(value, InterpretedFunction):
                self.saved[name] = value
                self.globals[name] = JITFunction(value.fn)

    def __exit__(self, *exc: object) -> None:
        import triton

        self.globals.update(self.saved)
        runtime = getattr(getattr(triton, "knobs", None), "runtime", None)
        if runtime is not None and self.knob is not None:
            runtime.interpret = self.knob
        if self.env is None:
            os.environ.pop("TRITON_INTERPRET", None)
        else:
            os.environ["TRITON_INTERPRET"] = self.env


class PristineLanguage:
    """Triton's language modules as the compiler needs them.

    The interpreter patches `triton.language` (its builtins, `tensor` methods, `range`, ...)
    around each launch, but a device-function call (`InterpretedFunction.__call__`, e.g. the
    combine function of `tl.sum`) patches it and never restores it (Triton 3.6.0). The code
    generator then meets interpreter builtins and fails ("'ir.value' object has no attribute
    'dtype'"). `keep()` records the modules' attributes before any interpretation; `restored()`
    puts them back around a compile and the interpreter's versions after."""

    saved: list[tuple[Any, dict[str, Any]]] | None = None

    @classmethod
    def _owners(cls) -> list[Any]:
        import triton.language as tl

        owners = [
            tl,
            tl.core,
            tl.math,
            tl.tensor,
            tl.dtype,
            getattr(tl.core, "tensor_descriptor_base", None),
            getattr(tl, "standard", None),
        ]
        return [o for o in owners if o is not None]

    @classmethod
    def keep(cls) -> None:
        if cls.saved is None:
            cls.saved = [(o, dict(vars(o))) for o in cls._owners()]
        # The code generator copies `min`, `max` and `print` out of triton.language.core into a
        # class-level namespace when it is first imported: imported under the interpreter's
        # patches, it would keep the interpreter's builtins for good. Import it now, unpatched.
        import triton.compiler.code_generator  # noqa: F401

    @classmethod
    def restored(cls) -> _Swap:
        return _Swap(cls.saved or [])


def _pristine_codegen_builtins() -> None:
    """Point the code generator's `min`/`max`/`print` at the language's own builtins, whatever
    was patched when it was imported (a kernel using Python's min or max must compile
    regardless of import order)."""
    import triton.language as tl
    from triton.compiler import code_generator

    names = code_generator.CodeGenerator.builtin_namespace
    saved = dict(
        next((want for owner, want in (PristineLanguage.saved or []) if owner is tl.core), {})
    )
    for name, attr in (("min", "builtin_min"), ("max", "builtin_max"), ("print", "device_print")):
        value = saved.get(attr) or getattr(tl.core, attr, None)
        if value is not None and not getattr(value, "__module__", "").startswith("triton.runtime"):
            names[name] = value


class _Swap:
    def __init__(self, saved: list[tuple[Any, dict[str, Any]]]):
        self.saved, self.now = saved, [(o, dict(vars(o))) for o, _ in saved]

    @staticmethod
    def _apply(owner: Any, want: dict[str, Any]) -> None:
        for name, value in want.items():
            if (
                name in ("__dict__", "__weakref__", "__doc__")
                or vars(owner).get(name, _MISSING) is value
            ):
                continue
            try:
                setattr(owner, name, value)
            except (AttributeError, TypeError):
                pass
        for name in [n for n in vars(owner) if n not in want]:
            try:
                delattr(owner, name)
            except (AttributeError, TypeError):
                pass

    def __enter__(self) -> None:
        for owner, want in self.saved:
            self._apply(owner, want)

    def __exit__(self, *exc: object) -> None:
        for owner, want in self.now:
            self._apply(owner, want)


_MISSING = object()


def _tool(name: str) -> str | None:
    import triton

    path = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", name)
    return path if os.path.isfile(path) else None


def _read_nvidia(kernel: Any) -> dict[str, Any]:
    ptx = kernel.asm.get("ptx", "")
    mma = (
        "tcgen05"
        if "tcgen05.mma" in ptx
        else "wgmma"
        if "wgmma.mma_async" in ptx
        else "mma"
        if "mma.sync" in ptx
        else None
    )
    found: dict[str, Any] = {
        "shared_bytes": int(getattr(kernel.metadata, "shared", 0) or 0),
        "mma": mma,
    }
    cuobjdump = _tool("cuobjdump")
    cubin = kernel.asm.get("cubin")
    if cuobjdump and cubin:
        # A name of its own: two workers compiling the same kernel shared `sim-<hash>.cubin`, and
        # one's unlink made the other's cuobjdump read nothing (predictions varied by 15%).
        fd, path = tempfile.mkstemp(
            prefix=f"sim-{hashlib.sha256(cubin).hexdigest()[:16]}-", suffix=".cubin"
        )
        with os.fdopen(fd, "wb") as f:
            f.write(cubin)
        try:
            out = subprocess.run(
                [cuobjdump, "-res-usage", path],
                check=False,
                capture_output=True,
                text=True,
                timeout=60,
            ).stdout
        finally:
            os.unlink(path)
        usage = dict(re.findall(r"(REG|STACK|SHARED):(\d+)", out))
        found["registers"] = int(usage["REG"]) if "REG" in usage else None
        found["spill_bytes"] = int(usage["STACK"]) if "STACK" in usage else None
        found["shared_bytes"] += int(usage.get("SHARED", 0))
    return found


def _read_amd(kernel: Any) -> dict[str, Any]:
    asm = kernel.asm.get("amdgcn", "")
    value = lambda key: int(m.group(1)) if (m := re.search(rf"\.{key}:\s*(\d+)", asm)) else None
    spills = value("vgpr_spill_count")
    return {
        "registers": value("vgpr_count"),
        "spill_bytes": None if spills is None else 4 * spills,
        "shared_bytes": int(getattr(kernel.metadata, "shared", 0) or 0),
        "mma": "mfma" if "v_mfma" in asm else None,
    }
