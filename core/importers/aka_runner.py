"""Reading and replaying an AgentKernelArena runner (`scripts/task_runner.py`): its `TEST_SHAPES`,
the names its loop unpacks each shape into, the entry `run_compile()` asserts, its tolerance, and
a replay of `run_correctness` stopped at the entry call (`capture_call`) or at its reference."""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.importers.kernelbench_problem import ProblemError


@dataclass
class Runner:
    """What the template says: shapes, the names each is unpacked into, the entry, the tolerance."""

    path: Path
    tree: ast.Module
    shapes: list[tuple[Any, ...]]
    names: list[str]
    entry: str
    atol: float | None
    rtol: float | None

    @classmethod
    def read(cls, folder: Path, config: dict[str, Any]) -> Runner:
        path = folder / "scripts" / "task_runner.py"
        if not path.is_file():
            raise ProblemError(
                "external", "has no scripts/task_runner.py: it runs its own commands"
            )
        tree = ast.parse(path.read_text(), filename=str(path))
        defs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
        shapes = _test_shapes(tree)
        if shapes is None or not {"run_correctness", "load_module", "run_compile"} <= set(defs):
            raise ProblemError(
                "off_template",
                "its runner does not follow the generated template (TEST_SHAPES, load_module, run_correctness)",
            )
        names = _loop_names(defs["run_correctness"])
        if not names:
            raise ProblemError(
                "off_template",
                "run_correctness does not unpack `enumerate(TEST_SHAPES)` into names",
            )
        kernels = set(config.get("target_kernel_functions") or [])
        entries = [n for n in _hasattr_names(defs["run_compile"]) if n not in kernels]
        if not entries:
            raise ProblemError(
                "off_template", "run_compile names no entry function (hasattr) besides the kernels"
            )
        atol, rtol = _tolerance(defs["run_correctness"])
        return cls(path, tree, shapes, names, entries[0], atol, rtol)


def _test_shapes(tree: ast.Module) -> list[tuple[Any, ...]] | None:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "TEST_SHAPES" for t in node.targets
        ):
            try:
                value = ast.literal_eval(node.value)
            except ValueError:
                return None
            if isinstance(value, list) and value:
                return [tuple(v) if isinstance(v, (tuple, list)) else (v,) for v in value]
    return None


def _loop_names(fn: ast.FunctionDef) -> list[str]:
    for node in ast.walk(fn):
        if (
            isinstance(node, ast.For)
            and isinstance(node.iter, ast.Call)
            and getattr(node.iter.func, "id", None) == "enumerate"
        ):
            if (
                node.iter.args
                and isinstance(node.iter.args[0], ast.Name)
                and node.iter.args[0].id == "TEST_SHAPES"
            ):
                target = node.target
                if isinstance(target, ast.Tuple) and len(target.elts) == 2:
                    inner = target.elts[1]
                    if isinstance(inner, ast.Tuple) and all(
                        isinstance(e, ast.Name) for e in inner.elts
                    ):
                        return [e.id for e in inner.elts]  # type: ignore[union-attr,attr-defined]
                    if isinstance(inner, ast.Name):
                        return [inner.id]
    return []


def _hasattr_names(fn: ast.FunctionDef) -> list[str]:
    names = []
    for node in ast.walk(fn):
        if (
            isinstance(node, ast.Call)
            and getattr(node.func, "id", None) == "hasattr"
            and len(node.args) == 2
        ):
            arg = node.args[1]
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                names.append(arg.value)
    return names


def _tolerance(fn: ast.FunctionDef) -> tuple[float | None, float | None]:
    for node in ast.walk(fn):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) in (
            "allclose",
            "assert_close",
        ):
            kw = {k.arg: k.value for k in node.keywords}
            try:
                atol = float(ast.literal_eval(kw["atol"])) if "atol" in kw else None
                rtol = float(ast.literal_eval(kw["rtol"])) if "rtol" in kw else None
            except ValueError:
                continue
            return atol, rtol
    return None, None


class Captured(BaseException):
    """Raised by the stand-in entry: carries the call's arguments out of the runner's loop
    (a BaseException, so the runner's own `except Exception` lets it through)."""

    def __init__(self, args: tuple[Any, ...], kwargs: dict[str, Any]):
        super().__init__("captured")
        self.call_args, self.call_kwargs = args, kwargs


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


def _runner_namespace(
    runner: Runner, shape: tuple[Any, ...], device: str, entry: Callable[..., Any]
) -> dict[str, Any]:
    import types

    ns: dict[str, Any] = {
        "__name__": "aka_runner",
        "__file__": str(runner.path),
        "__arena_device__": device,
    }
    exec(compile(replayable_source(runner.tree), str(runner.path), "exec"), ns)
    ns["TEST_SHAPES"] = [shape]
    stub = types.SimpleNamespace(**{runner.entry: entry})
    ns["load_module"] = lambda: stub
    return ns


def capture_call(
    runner: Runner, source_file: Path, shape: tuple[Any, ...], device: str = "cpu"
) -> Captured:
    def entry(*args: Any, **kwargs: Any) -> Any:
        raise Captured(args, kwargs)

    try:
        ns = _runner_namespace(runner, shape, device, entry)
        verdict = ns["run_correctness"]()
    except Captured as call:
        return call
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
    arguments is an entry argument (by index, cast to a dtype where the runner casts) or a constant."""

    name: str
    args: tuple[tuple[Any, ...], ...]  # ("arg", index, dtype or None) | ("const", value)
    kwargs: tuple[tuple[str, tuple[Any, ...]], ...]


def capture_reference(runner: Runner, source_file: Path, shape: tuple[Any, ...]) -> ReferenceCall:
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
    )


def output_shapes(
    runner: Runner, source_file: Path, shape: tuple[Any, ...]
) -> list[tuple[tuple[int, ...], str, int | None]]:
    """(shape, dtype, in-place input index or None) of each output, from one call of the task's
    own kernel on the CPU, in Triton's interpreter (this process is a forked child)."""
    import os

    os.environ["TRITON_INTERPRET"] = "1"
    import importlib.util

    import torch

    call = capture_call(runner, source_file, shape)
    spec = importlib.util.spec_from_file_location("aka_source", source_file)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    try:
        spec.loader.exec_module(module)  # type: ignore[union-attr]
        before = [a.clone() if isinstance(a, torch.Tensor) else a for a in call.call_args]
        result = getattr(module, runner.entry)(*call.call_args, **call.call_kwargs)
    except Exception as exc:  # noqa: BLE001 - the kernel may not run in the interpreter
        raise ProblemError(
            "interpreter",
            f"its kernel does not run in Triton's CPU interpreter (needed for the outputs' shapes): {type(exc).__name__}: {str(exc)[:160]}",
        ) from None
    outs = result if isinstance(result, (tuple, list)) else [] if result is None else [result]
    if not all(isinstance(o, torch.Tensor) for o in outs):
        raise ProblemError("outputs", f"`{runner.entry}` returns something other than tensors")
    described: list[tuple[tuple[int, ...], str, int | None]] = [
        (tuple(o.shape), str(o.dtype).removeprefix("torch."), None) for o in outs
    ]
    if not described:  # written in place: the inputs the call changed
        for i, (a, b) in enumerate(zip(call.call_args, before)):
            if isinstance(a, torch.Tensor) and not torch.equal(a, b):
                described.append((tuple(a.shape), str(a.dtype).removeprefix("torch."), i))
    if not described:
        raise ProblemError(
            "outputs", f"`{runner.entry}` returns nothing and changes none of its inputs"
        )
    return described
