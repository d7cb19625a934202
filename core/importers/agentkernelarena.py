"""`arena import agentkernelarena PATH`: AgentKernelArena's Triton tasks as arena tasks.

An AgentKernelArena task is a folder with `config.yaml` (the source file to optimise, the
kernels in it, compile / correctness / performance commands) and a bespoke
`scripts/task_runner.py`. Most Triton runners follow one generated template: a module-level
`TEST_SHAPES` list, `load_module()` that imports the source file, and `run_correctness()` that,
for each shape, seeds torch, builds the inputs, calls the source's entry function (the one
`run_compile()` asserts with `hasattr`) and compares it with a PyTorch reference. Those convert:

- the inputs are the ones the runner itself builds (`inputs.py` replays its `run_correctness`
  at the workload's shape, on the evaluation's device and seed, and stops it at the entry call,
  before any kernel runs), so their dtypes, layouts (a transposed cache) and value ranges
  (indices, quantised weights) are the task's own;
- the axes are the names `run_correctness` unpacks each shape into, the visible workloads its
  `TEST_SHAPES`, the hidden ones those shapes scaled to sizes that are not powers of two;
- `reference.py`, `baseline.py` and `starter.py` are the task's source file with a `run` that calls
  its entry: the reference is the task's original kernel, which AgentKernelArena's own check
  accepts and which is its baseline (its `reference_*` functions are code inside a loop, not a
  function of the inputs); the tolerance is the runner's own `allclose` tolerance;
- arguments that do not change across the shapes used (a flag, an activation's name) are fixed
  in `run`; shapes whose non-size entries differ from the first shape's are left out.

Everything else (HIP, CUDA and FlyDSL tasks, runners off the template, template tasks whose
conversion fails) becomes an external task (core/importers/aka_external.py): its own commands
in this arena's sandbox, scored by its own rules; HIP ones run only on AMD devices. Repository
and image tasks are reported, with the reason.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from core.importers.isolate import isolated
from core.importers.kernelbench_problem import ProblemError, not_power_of_two
from core.importers.report import Converted, ImportReport, Skipped

FAMILY = "agentkernelarena"
LICENSE = "Apache-2.0"
HIDDEN_FACTORS = (0.7, 1.3)
DEFAULT_TOLERANCE = 1.0e-2
OnTask = Callable[[int, int, str, "Converted | Skipped"], None]


@dataclass(frozen=True)
class Options:
    timeout_s: float = 120.0
    external: bool = (
        True  # tasks that do not convert become external tasks (core/importers/aka_external.py)
    )


def find_tasks(root: Path) -> list[Path]:
    """Every task folder (one holding config.yaml) under the checkout's tasks/ folder."""
    base = root / "tasks" if (root / "tasks").is_dir() else root
    return sorted(p.parent for p in base.rglob("config.yaml") if ".git" not in p.parts)


def import_agentkernelarena(
    root: Path | str, out: Path | str, options: Options = Options(), on_task: OnTask | None = None
) -> ImportReport:
    root, out = Path(root).resolve(), Path(out).resolve()
    if not root.is_dir():
        raise FileNotFoundError(
            f"{root}: no such folder; give the path of an AgentKernelArena checkout"
        )
    folders = find_tasks(root)
    if not folders:
        raise FileNotFoundError(
            f"{root}: no AgentKernelArena tasks (expected tasks/**/config.yaml); give the checkout's root"
        )
    report = ImportReport("agentkernelarena", str(root), str(out))
    for i, folder in enumerate(folders, 1):
        source = str(folder.relative_to(root))
        outcome = isolated(
            _convert_one, (folder, source, out, options.external), source, options.timeout_s
        )
        if (
            options.external
            and isinstance(outcome, Skipped)
            and outcome.kind in ("timeout", "crash")
        ):
            outcome = _as_external(
                folder, source, out, f"{outcome.kind}: {outcome.reason}"
            )  # copying files runs none of its code
        (report.converted if isinstance(outcome, Converted) else report.skipped).append(outcome)  # type: ignore[arg-type]
        if on_task:
            on_task(i, len(folders), source, outcome)
    return report


def category_of(source: str) -> str:
    """`tasks/triton2triton/vllm/x` -> `triton2triton/vllm`."""
    parts = Path(source).parts
    start = 1 if parts and parts[0] == "tasks" else 0
    return "/".join(parts[start : start + 2])


def task_name(folder: Path) -> str:
    parts = [p for p in folder.parts[-3:] if p not in ("tasks", "triton2triton")]
    return re.sub(r"[^a-z0-9]+", "_", "_".join(parts).lower()).strip("_").replace("triton_", "", 1)


# --- one task ------------------------------------------------------------------------------------


def _convert_one(
    folder: Path, source: str, out: Path, external: bool = True
) -> Converted | Skipped:
    try:
        return convert(folder, source, out)
    except ProblemError as exc:
        return (
            _as_external(folder, source, out, f"{exc.kind}: {exc.reason}")
            if external
            else Skipped(source, exc.kind, exc.reason)
        )


def _as_external(folder: Path, source: str, out: Path, why: str) -> Converted | Skipped:
    """A task that did not convert, as an external task; where even that is impossible (a
    repository or image task), Skipped with that reason."""
    from core.importers.aka_external import write_external

    try:
        return write_external(folder, source, out, task_name(folder), FAMILY, LICENSE, why)
    except ProblemError as exc:
        return Skipped(source, exc.kind, exc.reason)


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


def convert(folder: Path, source: str, out: Path) -> Converted:
    config = yaml.safe_load((folder / "config.yaml").read_text()) or {}
    kind = str(config.get("task_type", ""))
    if kind != "triton2triton":
        amd = " (HIP: AMD devices only)" if "hip" in kind else ""
        raise ProblemError(
            kind or "unknown",
            f"a `{kind}` task{amd}: only Triton-to-Triton tasks convert to ordinary tasks",
        )
    sources = config.get("source_file_path") or []
    if len(sources) != 1:
        raise ProblemError(
            "off_template",
            f"source_file_path lists {len(sources)} files: one source module converts",
        )
    source_file = folder / sources[0]
    runner = Runner.read(folder, config)
    usable = [s for s in runner.shapes if _modes(s) == _modes(runner.shapes[0])]
    sizes = [i for i, v in enumerate(runner.shapes[0]) if type(v) is int]
    if not sizes:
        raise ProblemError("off_template", "TEST_SHAPES holds no integer sizes to scale")
    hidden = _hidden_shapes(runner, source_file, usable, sizes)
    if not hidden:
        raise ProblemError(
            "no_hidden",
            "no scaled shape builds its inputs and runs the kernel: hidden workloads are impossible",
        )
    shapes = usable + hidden
    calls = [capture_call(runner, source_file, s) for s in shapes]
    runs = [output_shapes(runner, source_file, s) for s in shapes]
    layout = _layout(runner, source_file, calls, runs, shapes, sizes)
    outputs = runs[0]
    reference = capture_reference(runner, source_file, usable[0])

    name = task_name(folder)
    target = out / FAMILY / name
    target.mkdir(parents=True, exist_ok=True)
    notes = [
        f"entry: {runner.entry}",
        f"shapes used: {len(usable)} of {len(runner.shapes)} (the first shape's flags)",
    ]
    (target / "task.yaml").write_text(
        _task_yaml(config, source, runner, usable, hidden, sizes, layout, outputs, notes)
    )
    entry = _entry_module(
        source_file, source, runner, layout, [i for _, _, i in outputs if i is not None]
    )
    (target / "baseline.py").write_text(entry)
    (target / "starter.py").write_text(entry)
    (target / "reference.py").write_text(_reference_module(runner, source, layout, reference))
    (target / "inputs.py").write_text(_inputs_module(runner, source, sizes, usable[0]))
    return Converted(source, f"{FAMILY}/{name}", str(target), tuple(notes))


def _modes(shape: tuple[Any, ...]) -> tuple[Any, ...]:
    """A shape's non-size entries (flags, names, floats): shapes that differ there are other tasks."""
    return tuple(v for v in shape if type(v) is not int)


# --- reading the runner ---------------------------------------------------------------------------


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
                        return [e.id for e in inner.elts]  # type: ignore[union-attr]
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


# --- replaying the runner -------------------------------------------------------------------------


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
    described = [(tuple(o.shape), str(o.dtype).removeprefix("torch."), None) for o in outs]
    if not described:  # written in place: the inputs the call changed
        for i, (a, b) in enumerate(zip(call.call_args, before)):
            if isinstance(a, torch.Tensor) and not torch.equal(a, b):
                described.append((tuple(a.shape), str(a.dtype).removeprefix("torch."), i))
    if not described:
        raise ProblemError(
            "outputs", f"`{runner.entry}` returns nothing and changes none of its inputs"
        )
    return described


# --- shapes as axes -------------------------------------------------------------------------------


@dataclass
class _Layout:
    arg_names: list[str]  # every positional argument, then keyword arguments, in call order
    tensor: dict[str, tuple[list[str | int], str]]  # name -> (dims, dtype)
    fixed: dict[str, Any]  # arguments baked into run: the same in every shape used
    kw_names: list[str]
    n_positional: int
    outputs: list[list[str | int]]  # each returned output's dims (in-place ones: [])
    shapes: list[tuple[Any, ...]]  # every shape the task uses, visible then hidden
    derived: dict[str, list[int]]  # axes no shape entry gives simply: their value at each shape
    # integer arguments that change with the shape but are, at every shape, one dimension of a
    # tensor argument (`head_size` = q.shape[-1]): run reads them off that tensor, name -> (tensor, dim)
    from_shape: dict[str, tuple[str, int]] = field(default_factory=dict)

    def axes(self, runner: Runner, shape: tuple[Any, ...], sizes: list[int]) -> dict[str, int]:
        i = self.shapes.index(shape)
        return {**_axes_of(runner, shape, sizes), **{a: v[i] for a, v in self.derived.items()}}


def _layout(
    runner: Runner,
    source_file: Path,
    calls: list[Captured],
    runs: list[list[tuple[tuple[int, ...], str, int | None]]],
    shapes: list[tuple[Any, ...]],
    sizes: list[int],
) -> _Layout:
    import torch

    first = calls[0]
    n_pos = len(first.call_args)
    kw_names = list(first.call_kwargs)
    values = [list(c.call_args) + [c.call_kwargs.get(k) for k in kw_names] for c in calls]
    params = _parameters(source_file, runner.entry)
    names = [params[i] if i < len(params) else f"arg{i}" for i in range(n_pos)] + kw_names
    tensor: dict[str, tuple[list[str | int], str]] = {}
    fixed: dict[str, Any] = {}
    derived: dict[str, list[int]] = {}
    axis_values = [_axes_of(runner, s, sizes) for s in shapes]

    def dims_of(label: str, per_shape: list[tuple[int, ...]]) -> list[str | int]:
        if len({len(p) for p in per_shape}) != 1:
            raise ProblemError("shapes", f"`{label}` changes rank across shapes")
        dims: list[str | int] = []
        for d in range(len(per_shape[0])):
            column = [int(p[d]) for p in per_shape]
            try:
                dims.append(_dim_expr(column, axis_values))
            except (
                ProblemError
            ):  # a size the runner computes (num_writes + 8): recorded per workload
                axis = f"{label}_d{d}"
                derived[axis] = column
                dims.append(axis)
        return dims

    varying: list[tuple[str, list[Any]]] = []
    tensor_shapes: dict[str, list[tuple[int, ...]]] = {}
    for j, name in enumerate(names):
        column = [v[j] for v in values]
        if all(isinstance(v, torch.Tensor) for v in column):
            tensor_shapes[name] = [tuple(v.shape) for v in column]
            tensor[name] = (
                dims_of(name, tensor_shapes[name]),
                str(column[0].dtype).removeprefix("torch."),
            )
        elif column[0] is None or all(
            v == column[0] and type(v) is type(column[0]) for v in column
        ):
            fixed[name] = column[0]
        else:
            varying.append((name, column))
    from_shape = {name: _shape_source(name, column, tensor_shapes) for name, column in varying}
    outputs = []
    for k, (_, _, inplace) in enumerate(runs[0]):
        label = f"out{k}" if len(runs[0]) > 1 else "out"
        outputs.append([] if inplace is not None else dims_of(label, [r[k][0] for r in runs]))
    return _Layout(names, tensor, fixed, kw_names, n_pos, outputs, shapes, derived, from_shape)


def _shape_source(
    name: str, column: list[Any], tensor_shapes: dict[str, list[tuple[int, ...]]]
) -> tuple[str, int]:
    """The (tensor argument, dimension) that equals integer argument `name` at every shape; a
    `scalar_arg` ProblemError where there is none (a block size the runner picks, say)."""
    if all(type(v) is int for v in column):
        for tname, per_shape in tensor_shapes.items():
            for d in range(len(per_shape[0])):
                if all(p[d] == v for p, v in zip(per_shape, column)):
                    return tname, d
    raise ProblemError(
        "scalar_arg",
        f"argument `{name}` is a {type(column[0]).__name__} that changes with the shape and is no tensor argument's dimension: "
        "only tensors, and integers read off their shapes, may vary",
    )


def _parameters(source_file: Path, entry: str) -> list[str]:
    """The entry's positional parameter names, from the source file (nothing is imported)."""
    for node in ast.walk(ast.parse(source_file.read_text())):
        if isinstance(node, ast.FunctionDef) and node.name == entry:
            return [a.arg for a in node.args.posonlyargs + node.args.args]
    return []


def _dim_expr(sizes: list[int], axes: list[dict[str, int]]) -> str | int:
    """A dimension as an axis, k × axis, axis // k, a product of two axes, or a constant."""
    if (
        len(set(sizes)) == 1
        and len(axes) > 1
        and all(len({a[n] for a in axes}) > 1 for n in axes[0])
    ):
        return sizes[0]
    names = list(axes[0])
    for n in names:
        if all(s == a[n] for s, a in zip(sizes, axes)):
            return n
    for n in names:
        for k in (2, 3, 4, 8, 16, 32, 64, 128):
            if all(s == k * a[n] for s, a in zip(sizes, axes)):
                return f"{k} * {n}"
            if all(a[n] % k == 0 and s == a[n] // k for s, a in zip(sizes, axes)):
                return f"{n} // {k}"
        for m in names:
            if m >= n and all(s == a[n] * a[m] for s, a in zip(sizes, axes)):
                return f"{n} * {m}"
    if len(set(sizes)) == 1:
        return sizes[0]
    raise ProblemError(
        "shapes", f"a dimension ({sizes}) follows no axis of {', '.join(names)} simply"
    )


def _hidden_shapes(
    runner: Runner, source_file: Path, usable: list[tuple[Any, ...]], sizes: list[int]
) -> list[tuple[Any, ...]]:
    """The largest and the smallest shape, scaled to sizes that are not powers of two, where the
    runner still builds inputs for them and the kernel runs."""
    picks = [
        max(usable, key=lambda s: _volume(s, sizes)),
        min(usable, key=lambda s: _volume(s, sizes)),
    ]
    found: list[tuple[Any, ...]] = []
    for base, factor in zip(picks, HIDDEN_FACTORS[::-1]):
        for multiple in (1, 8, 16, 64):
            shape = tuple(
                not_power_of_two(v * factor, multiple) if i in sizes and v >= 4 else v
                for i, v in enumerate(base)
            )
            if shape in usable or shape in found or shape == base:
                continue
            try:
                capture_call(runner, source_file, shape)
                output_shapes(runner, source_file, shape)
            except ProblemError:
                continue
            found.append(shape)
            break
    return found


def _volume(shape: tuple[Any, ...], sizes: list[int]) -> int:
    v = 1
    for i in sizes:
        v *= max(1, int(shape[i]))
    return v


# --- the files ------------------------------------------------------------------------------------


def _axes_of(runner: Runner, shape: tuple[Any, ...], sizes: list[int]) -> dict[str, int]:
    return {runner.names[i]: int(shape[i]) for i in sizes}


def _task_yaml(
    config: dict[str, Any],
    source: str,
    runner: Runner,
    usable: list[tuple[Any, ...]],
    hidden: list[tuple[Any, ...]],
    sizes: list[int],
    layout: _Layout,
    outputs: list[tuple[tuple[int, ...], str, int | None]],
    notes: list[str],
) -> str:
    from core.importers.kernelbench import _Dumper, _Flow

    axes = {runner.names[i]: f"AgentKernelArena shape entry `{runner.names[i]}`" for i in sizes}
    axes.update(
        {
            a: "a size the runner computes from the shape (derived: recorded per workload)"
            for a in layout.derived
        }
    )
    inputs = [
        {"name": n, "shape": _Flow.list(dims), "dtype": dtype}
        for n, (dims, dtype) in layout.tensor.items()
    ]
    out_specs: list[dict[str, Any]] = []
    for k, (_, dtype, inplace) in enumerate(outputs):
        if inplace is not None:
            out_specs.append(
                {
                    "name": f"{layout.arg_names[inplace]}_out",
                    "dtype": dtype,
                    "inplace_of": layout.arg_names[inplace],
                }
            )
        else:
            out_specs.append(
                {
                    "name": f"out{k}" if len(outputs) > 1 else "out",
                    "shape": _Flow.list(layout.outputs[k]),
                    "dtype": dtype,
                }
            )
    out_dims = [layout.outputs[k] for k, o in enumerate(outputs) if o[2] is None]
    atol = runner.atol if runner.atol is not None else DEFAULT_TOLERANCE
    rtol = runner.rtol if runner.rtol is not None else DEFAULT_TOLERANCE
    prompt = (config.get("prompt") or {}).get("instructions") or f"Optimise `{runner.entry}`."
    moved = list(layout.tensor.values()) + [
        (d, o[1]) for d, o in zip(out_dims, [o for o in outputs if o[2] is None])
    ]
    byte_terms = (
        " + ".join(f"{_numel_expr(dims)} * {_itemsize(dtype)}" for dims, dtype in moved) or "1"
    )
    spec = {
        "schema_version": 1,
        "description": " ".join(str(prompt).split())
        + f" (AgentKernelArena {source}; run(*inputs) calls `{runner.entry}`.)",
        "models": _Flow.list(["AgentKernelArena"]),
        "languages": _Flow.list(["triton", "pytorch"]),
        "baseline_kind": "vendor_kernel_library",
        "baseline": f"the task's own Triton kernel, `{runner.entry}` (AgentKernelArena's baseline)",
        "provenance": {
            "source": "agentkernelarena",
            "file": source,
            "license": LICENSE,
            "derived": {
                "hidden_workloads": f"TEST_SHAPES scaled to sizes that are not powers of two: {', '.join(str(h) for h in hidden)}",
                "reference": "the runner's own reference_* function, called as run_correctness calls it",
                "tolerance": f"the runner's own allclose: atol {atol:g}, rtol {rtol:g}"
                if runner.atol is not None
                else f"none in the runner: {DEFAULT_TOLERANCE:g}",
                "flops": "unknown (the task states none): 1, so the speed of light is the bytes' alone",
                "bytes": "the sizes of the tensor arguments and of the outputs",
                "fixed_arguments": {k: repr(v) for k, v in layout.fixed.items()},
                "arguments_from_shapes": {
                    k: f"{t}.shape[{d}]" for k, (t, d) in layout.from_shape.items()
                },
            },
            "notes": notes,
        },
        "axes": axes,
        "inputs": inputs,
        "outputs": out_specs,
        "correctness": _Flow({"atol": atol, "rtol": rtol, "min_match": 1.0, "seeds": 3}),
        "flops": "1",
        "bytes": byte_terms,
        "peak": "bf16"
        if any(d in ("bfloat16", "float16") for _, d in layout.tensor.values())
        else "fp32",
        "workloads": {
            "visible": [_Flow(layout.axes(runner, s, sizes)) for s in usable],
            "hidden": {"fixed": [_Flow(layout.axes(runner, s, sizes)) for s in hidden]},
            "cpu": {
                "visible": [
                    _Flow(layout.axes(runner, s, sizes))
                    for s in sorted(usable, key=lambda s: _volume(s, sizes))[:2]
                ],
                "hidden": {"fixed": [_Flow(layout.axes(runner, hidden[-1], sizes))]},
            },
        },
    }
    header = f"# Written by `arena import agentkernelarena` from {source}; AgentKernelArena is {LICENSE}-licensed.\n"
    return header + yaml.dump(spec, Dumper=_Dumper, sort_keys=False, width=100, allow_unicode=True)


def _numel_expr(dims: list[str | int]) -> str:
    return " * ".join(f"({d})" for d in dims) or "1"


def _itemsize(dtype: str) -> int:
    import torch

    return getattr(torch, dtype).itemsize


def _entry_module(
    source_file: Path, source: str, runner: Runner, layout: _Layout, inplace: list[int]
) -> str:
    return f"""{source_file.read_text().rstrip()}


# --- arena entry, written by `arena import agentkernelarena` from {source} ---
# run(*inputs) takes the tensor arguments of `{runner.entry}` in call order; the others are fixed.
_ARENA_ARGUMENTS = {layout.arg_names!r}
_ARENA_TENSORS = {list(layout.tensor)!r}
_ARENA_FIXED = {layout.fixed!r}
_ARENA_POSITIONAL = {layout.n_positional}
_ARENA_INPLACE = {inplace!r}  # arguments the entry writes in place (its outputs when it returns None)
_ARENA_FROM_SHAPE = {layout.from_shape!r}  # integer arguments read off a tensor's shape: name -> (tensor, dim)


def _arena_argument(name, given):
    if name in given:
        return given[name]
    if name in _ARENA_FROM_SHAPE:
        tensor, dim = _ARENA_FROM_SHAPE[name]
        return int(given[tensor].shape[dim])
    return _ARENA_FIXED[name]


def run(*inputs):
    given = dict(zip(_ARENA_TENSORS, inputs))
    values = [_arena_argument(n, given) for n in _ARENA_ARGUMENTS]
    args, kwargs = values[:_ARENA_POSITIONAL], dict(zip(_ARENA_ARGUMENTS[_ARENA_POSITIONAL:], values[_ARENA_POSITIONAL:]))
    out = {runner.entry}(*args, **kwargs)
    if _ARENA_INPLACE:
        written = tuple(values[i] for i in _ARENA_INPLACE)
        return written if len(written) > 1 else written[0]
    return out
"""


def _reference_module(runner: Runner, source: str, layout: _Layout, call: ReferenceCall) -> str:
    return f'''"""The reference of AgentKernelArena {source}: its runner's own `{call.name}`, called with the
entry's arguments as run_correctness calls it. Written by `arena import agentkernelarena`."""

__arena_device__ = "cpu"
{replayable_source(runner.tree)}


# --- arena entry ---
import torch as _arena_torch

_ARENA_ARGUMENTS = {layout.arg_names!r}
_ARENA_TENSORS = {list(layout.tensor)!r}
_ARENA_FIXED = {layout.fixed!r}
_ARENA_CALL = {call.args!r}
_ARENA_KWARGS = {call.kwargs!r}
_ARENA_FROM_SHAPE = {layout.from_shape!r}  # integer arguments read off a tensor's shape: name -> (tensor, dim)


def _arena_argument(name, given):
    if name in given:
        return given[name]
    if name in _ARENA_FROM_SHAPE:
        tensor, dim = _ARENA_FROM_SHAPE[name]
        return int(given[tensor].shape[dim])
    return _ARENA_FIXED[name]


def _arena_value(spec, values):
    if spec[0] == "const":
        return spec[1]
    v = values[spec[1]]
    return v.to(getattr(_arena_torch, spec[2])) if spec[2] else v


def run(*inputs):
    given = dict(zip(_ARENA_TENSORS, inputs))
    values = [_arena_argument(n, given) for n in _ARENA_ARGUMENTS]
    args = [_arena_value(s, values) for s in _ARENA_CALL]
    kwargs = {{k: _arena_value(s, values) for k, s in _ARENA_KWARGS}}
    return {call.name}(*args, **kwargs)
'''


def _inputs_module(runner: Runner, source: str, sizes: list[int], first: tuple[Any, ...]) -> str:
    return f'''"""Inputs of AgentKernelArena {source}: its runner's run_correctness replayed at the workload's
shape, on the evaluation's device and seed, and stopped at the entry call. Written by `arena import
agentkernelarena`; the task's kernel and reference are not in this file."""

import types

import torch

_RUNNER = {replayable_source(runner.tree)!r}
_NAMES = {runner.names!r}
_FIRST = {first!r}  # the non-size entries (flags, names) of the shapes this task uses
_ENTRY = {runner.entry!r}


class _Captured(BaseException):
    pass


def make_inputs(axes, generator):
    shape = tuple(axes[n] if n in axes else v for n, v in zip(_NAMES, _FIRST))
    device = str(generator.device)

    def entry(*args, **kwargs):
        raise _Captured(args, kwargs)

    ns = {{"__name__": "aka_runner", "__file__": "task_runner.py", "__arena_device__": device}}
    exec(compile(_RUNNER, "task_runner.py", "exec"), ns)
    ns["TEST_SHAPES"] = [shape]
    ns["load_module"] = lambda: types.SimpleNamespace(**{{_ENTRY: entry}})
    seed, manual_seed = generator.initial_seed(), torch.manual_seed
    torch.manual_seed = lambda _ignored: manual_seed(seed)  # the runner seeds 42 + i: the evaluation's seed instead
    try:
        ns["run_correctness"]()
    except _Captured as call:
        args, kwargs = call.args
        values = list(args) + list(kwargs.values())
        return [v.to(device) for v in values if isinstance(v, torch.Tensor)]
    finally:
        torch.manual_seed = manual_seed
    raise RuntimeError(f"the runner never called {{_ENTRY}} at {{shape}}")
'''
