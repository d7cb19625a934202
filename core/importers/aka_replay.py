"""Replaying an AgentKernelArena runner's `run_correctness` at a shape of our choosing: stopped at
the entry call (`capture_call`: the inputs it builds), watched until its `reference_*` function
is called (`capture_reference`: how the reference's arguments follow from the entry's), and the
task's own kernel called once in Triton's CPU interpreter (`kernel_call`: what it returns and
what it writes in place)."""

from __future__ import annotations

import ast
import types
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.importers.aka_runner import Runner
from core.importers.kernelbench_problem import ProblemError
from core.importers.work import TooMuchWork


class Captured(BaseException):
    """Raised by the stand-in entry: carries the call's arguments out of the runner's loop
    (a BaseException, so the runner's own `except Exception` lets it through)."""

    def __init__(self, args: tuple[Any, ...], kwargs: dict[str, Any]):
        super().__init__("captured")
        self.call_args, self.call_kwargs = args, kwargs

    @property
    def values(self) -> list[Any]:
        return list(self.call_args) + list(self.call_kwargs.values())


class _OnDevice(ast.NodeTransformer):
    """The runner on any device: "cuda" becomes the evaluation's device, `.cuda()` a move to it,
    `torch.cuda.synchronize()` nothing, and the module-level `os.chdir` and `main()` go."""

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        if node.value == "cuda":
            return ast.copy_location(ast.Name("__arena_device__", ast.Load()), node)
        return node

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "cuda" and not node.args:
            return ast.copy_location(
                ast.Call(
                    ast.Attribute(func.value, "to", ast.Load()),
                    [ast.Name("__arena_device__", ast.Load())],
                    [],
                ),
                node,
            )
        if (
            isinstance(func, ast.Attribute)
            and func.attr == "synchronize"
            and ast.unparse(func.value) == "torch.cuda"
        ):
            return ast.copy_location(ast.Constant(None), node)
        return node


def replayable_source(tree: ast.Module) -> str:
    body = []
    for node in tree.body:
        text = ast.unparse(node)
        if isinstance(node, ast.Expr) and text.startswith("os.chdir("):
            continue
        if isinstance(node, ast.If) and "__name__" in ast.unparse(node.test):
            continue
        body.append(node)
    return ast.unparse(
        ast.fix_missing_locations(_OnDevice().visit(ast.Module(body=body, type_ignores=[])))
    )


_code: dict[Path, Any] = {}  # the replayable runner, compiled once per runner


def _runner_namespace(
    runner: Runner, shape: tuple[Any, ...], device: str, entry: Callable[..., Any]
) -> dict[str, Any]:
    if runner.path not in _code:
        _code[runner.path] = compile(replayable_source(runner.tree), str(runner.path), "exec")
    ns: dict[str, Any] = {
        "__name__": "aka_runner",
        "__file__": str(runner.path),
        "__arena_device__": device,
    }
    exec(_code[runner.path], ns)
    ns["TEST_SHAPES"] = [shape]
    stub = types.SimpleNamespace(**{runner.entry: entry})
    ns["load_module"] = lambda: stub
    return ns


def capture_call(runner: Runner, shape: tuple[Any, ...], device: str = "cpu") -> Captured:
    """The entry's arguments as run_correctness builds them at `shape` (seeded as it seeds)."""

    def entry(*args: Any, **kwargs: Any) -> Any:
        raise Captured(args, kwargs)

    try:
        ns = _runner_namespace(runner, shape, device, entry)
        verdict = ns["run_correctness"]()
    except Captured as call:
        return call
    except TooMuchWork:
        raise
    except Exception as exc:  # noqa: BLE001 - the runner's own code may raise anything
        raise ProblemError(
            "replay",
            f"its runner raised {type(exc).__name__} building the inputs of {shape}: {exc}",
        ) from None
    raise ProblemError(
        "replay", f"run_correctness never called `{runner.entry}` at {shape} (it said {verdict!r})"
    )


@dataclass(frozen=True)
class ReferenceCall:
    """How the runner's `reference_*` function is called from the entry's arguments: each of its
    arguments is an entry argument (by index, cast to a dtype where the runner casts) or a
    constant; `on_cpu` where the runner hands it CPU copies (`.cpu()`), as the reference then
    computes on the CPU."""

    name: str
    args: tuple[tuple[Any, ...], ...]  # ("arg", index, dtype or None) | ("const", value)
    kwargs: tuple[tuple[str, tuple[Any, ...]], ...]
    on_cpu: bool = False


def capture_reference(runner: Runner, shape: tuple[Any, ...]) -> ReferenceCall:
    """Replay run_correctness until both the entry and a `reference_*` function have been called,
    and say how the reference's arguments follow from the entry's."""
    import torch

    seen: dict[str, Any] = {}

    def entry(*args: Any, **kwargs: Any) -> Any:
        seen["entry"] = (args, kwargs)
        if "reference" in seen:
            raise Captured(args, kwargs)
        return next((a for a in args if isinstance(a, torch.Tensor)), None)

    ns = _runner_namespace(runner, shape, "cpu", entry)
    names = [n for n, v in ns.items() if n.startswith("reference") and callable(v)]
    if not names:
        raise ProblemError(
            "inline_reference",
            "its runner computes the reference inline, not in a reference_* function: no plain-PyTorch reference to call",
        )
    for n in names:
        real = ns[n]

        def recorder(*args: Any, _name: str = n, _real: Any = real, **kwargs: Any) -> Any:
            seen["reference"] = (_name, args, kwargs)
            if "entry" in seen:
                raise Captured(args, kwargs)
            return _real(*args, **kwargs)

        ns[n] = recorder
    try:
        ns["run_correctness"]()
    except Captured:
        pass
    except TooMuchWork:
        raise
    except Exception as exc:  # noqa: BLE001 - the runner's own code may raise anything
        raise ProblemError(
            "replay", f"its runner raised {type(exc).__name__} replaying {shape}: {exc}"
        ) from None
    if "entry" not in seen or "reference" not in seen:
        raise ProblemError(
            "inline_reference",
            "run_correctness did not call both the entry and a reference_* function",
        )
    entry_args, entry_kwargs = seen["entry"]
    values = list(entry_args) + list(entry_kwargs.values())
    name, ref_args, ref_kwargs = seen["reference"]

    def mapped(v: Any) -> tuple[Any, ...]:
        for j, e in enumerate(values):
            if v is e:
                return ("arg", j, None)
        if isinstance(v, torch.Tensor):
            for j, e in enumerate(values):
                if (
                    isinstance(e, torch.Tensor)
                    and e.shape == v.shape
                    and torch.equal(e.to(v.dtype).cpu(), v.cpu())
                ):
                    return (
                        "arg",
                        j,
                        str(v.dtype).removeprefix("torch.") if e.dtype != v.dtype else None,
                    )
            raise ProblemError(
                "reference_args",
                f"{name} takes a tensor ({tuple(v.shape)}) that is none of the entry's arguments",
            )
        for j, e in enumerate(values):
            if (
                not isinstance(e, torch.Tensor)
                and type(e) is type(v)
                and e == v
                and v not in (None, True, False, 0, 1)
            ):
                return ("arg", j, None)
        return ("const", v)

    return ReferenceCall(
        name,
        tuple(mapped(a) for a in ref_args),
        tuple((k, mapped(v)) for k, v in ref_kwargs.items()),
        _passes_cpu_copies(runner, name),
    )


def _passes_cpu_copies(runner: Runner, name: str) -> bool:
    """Whether run_correctness calls `name` with `.cpu()` copies of its tensors."""
    for node in ast.walk(runner.tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == name:
            return ".cpu()" in ast.unparse(node)
    return False


@dataclass(frozen=True)
class KernelOutput:
    """One output of the entry, from a call of the task's own kernel: `returned` (a tensor of its
    own), `inplace` (the whole argument `arg`, written in place and returned, or written when the
    entry returns nothing) or `view` (a part of argument `arg`, returned as a view of it)."""

    kind: str
    arg: int | None
    shape: tuple[int, ...]
    dtype: str


def kernel_call(
    runner: Runner, source_file: Path, call: Captured
) -> tuple[list[KernelOutput], list[Any], bool]:
    """What the entry returns and writes, and those tensors, from one call of the task's own
    kernel on the CPU in Triton's interpreter (this process is a forked child; `call`'s tensors
    are written where the kernel writes them): each returned tensor that shares memory with an
    argument is an in-place output (the whole argument) or a view of one; an entry that returns
    nothing has the arguments it changed as its outputs (the flag says it returned nothing)."""
    import importlib.util

    from core.harness.triton_cpu import enable_interpreter

    enable_interpreter()  # the harness's CPU device runs it so (bf16 arithmetic corrected)

    import torch

    spec = importlib.util.spec_from_file_location("aka_source", source_file)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    values = call.values
    try:
        spec.loader.exec_module(module)  # type: ignore[union-attr]
        _first_configs_only(module)
        before = [a.clone() if isinstance(a, torch.Tensor) else a for a in values]
        result = getattr(module, runner.entry)(*call.call_args, **call.call_kwargs)
    except TooMuchWork:
        raise
    except Exception as exc:  # noqa: BLE001 - the kernel may not run in the interpreter
        raise ProblemError(
            "interpreter",
            f"its kernel does not run in Triton's CPU interpreter (needed for its outputs): {type(exc).__name__}: {str(exc)[:160]}",
        ) from None
    outs = result if isinstance(result, (tuple, list)) else [] if result is None else [result]
    if not all(isinstance(o, torch.Tensor) for o in outs):
        raise ProblemError("outputs", f"`{runner.entry}` returns something other than tensors")
    found: list[KernelOutput] = []
    tensors: list[Any] = []
    for o in outs:
        dtype = str(o.dtype).removeprefix("torch.")
        owner = next(
            (i for i, a in enumerate(values) if isinstance(a, torch.Tensor) and _shares(o, a)),
            None,
        )
        tensors.append(o)
        if owner is None:
            found.append(KernelOutput("returned", None, tuple(o.shape), dtype))
            continue
        whole = values[owner]
        same = (
            o.data_ptr() == whole.data_ptr()
            and o.shape == whole.shape
            and o.stride() == whole.stride()
        )
        found.append(KernelOutput("inplace" if same else "view", owner, tuple(o.shape), dtype))
    if not outs:  # written in place: the arguments the call changed
        for i, (a, b) in enumerate(zip(values, before)):
            if isinstance(a, torch.Tensor) and not torch.equal(a, b) and not _same_nan(a, b):
                found.append(
                    KernelOutput("inplace", i, tuple(a.shape), str(a.dtype).removeprefix("torch."))
                )
                tensors.append(a)
    if not found:
        raise ProblemError(
            "outputs", f"`{runner.entry}` returns nothing and changes none of its inputs"
        )
    return found, tensors, result is None


def _first_configs_only(module: Any) -> None:
    """Each @triton.autotune kernel of the module keeps its first config: at import only the
    kernel's outputs matter, and the interpreter would run every config to time it (eleven
    runs of a scan kernel took a minute of CPU)."""
    from triton.runtime.autotuner import Autotuner

    for value in vars(module).values():
        seen = 0
        while value is not None and seen < 8:  # heuristics and autotuners wrap each other by .fn
            if isinstance(value, Autotuner) and len(value.configs) > 1:
                value.configs = value.configs[:1]
            value, seen = getattr(value, "fn", None), seen + 1


def _shares(a: Any, b: Any) -> bool:
    """Whether two tensors' memory overlaps."""
    if a.numel() == 0 or b.numel() == 0:
        return False
    sa, sb = a.untyped_storage(), b.untyped_storage()
    return bool(sa.data_ptr() == sb.data_ptr())


def _same_nan(a: Any, b: Any) -> bool:
    """Equal but for NaNs in the same places (torch.equal calls NaN unequal to itself)."""
    import torch

    if not a.is_floating_point() or a.shape != b.shape:
        return False
    return bool(torch.equal(torch.nan_to_num(a, nan=0.0), torch.nan_to_num(b, nan=0.0))) and bool(
        torch.equal(a.isnan(), b.isnan())
    )
