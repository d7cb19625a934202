"""Which baseline a measured figure belongs to: the provenance of core/data/sim_baselines.json.

A `sim:` speedup divides a predicted candidate time by the baseline's time measured on the GPU.
That figure is only the baseline's while the baseline is the code that was measured: a baseline
improved later (a library call where a torch composition was) would otherwise inflate every
simulated speedup of its task without anyone seeing it. So each measured entry carries:

- `code_sha256`: one hash of the code that ran: the task's baseline.py, every module of the task
  folder it imports (at any depth), and inputs.py where the task has one (the values a
  data-dependent baseline is timed on: routing, slots, lengths). Each file is hashed by its
  syntax tree without docstrings (`code_digest`), so a reformatting, a comment or a docstring
  edit leaves it unchanged and anything that changes what runs does not;
- `files`: each of those files' plain sha256, for a reader with `sha256sum`;
- `versions`: the libraries it ran with (`library_versions`: torch, triton, Liger, vLLM, ...,
  the CUDA runtime and the driver), shown with the figure; a different library version does not
  make a figure stale by itself (the CPU that predicts has other versions than the GPU that measured).

`task_code(task_dir)` computes today's; core/devices/sim/baselines.py compares the two.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.metadata
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from core.harness.pysource import parse_module

# Distributions whose version a baseline's time can depend on (what the bundled baselines import).
LIBRARIES = (
    "torch",
    "triton",
    "liger-kernel",
    "flashinfer-python",
    "vllm",
    "sgl-kernel",
    "flash-attn",
    "flash-mla",
    "deep-gemm",
    "numpy",
)
REMEASURE = "PYTHONPATH=. python3 bench/sim_h200.py --no-published --write-table --tasks {task}"


@dataclass(frozen=True)
class TaskCode:
    """The baseline's code as it is today: its hash and the files behind it."""

    code_sha256: str
    files: dict[str, str] = field(default_factory=dict)  # name -> plain sha256

    def to_json(self) -> dict[str, Any]:
        return {"code_sha256": self.code_sha256, "files": dict(self.files)}


def code_digest(source: str) -> str:
    """sha256 of a module's syntax tree with its docstrings removed: the same for any layout,
    comment or docstring, different for any change to what runs. A file that does not parse is
    hashed as its bytes (it cannot run anyway; any edit shows)."""
    try:
        tree = parse_module(source)
    except SyntaxError:
        return hashlib.sha256(source.encode()).hexdigest()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and isinstance(body, list)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            node.body = body[1:] or [ast.Pass()]  # type: ignore[attr-defined]
    return hashlib.sha256(_canonical(tree).encode()).hexdigest()


def _canonical(node: Any) -> str:
    """A syntax tree as text, the same on every Python: `ast.dump` is not (3.12 added
    `type_params=[]` to every function, so an H200's Python 3.12 hashed the same file other
    than a 3.11 machine did, and every figure it measured read as another baseline's). Fields
    that are empty or None are left out: a field a newer Python adds is empty in code that an
    older one parses."""
    if isinstance(node, ast.AST):
        fields = [
            f"{name}={_canonical(value)}"
            for name, value in ast.iter_fields(node)
            if value is not None and value != []
        ]
        return f"{type(node).__name__}({','.join(fields)})"
    if isinstance(node, list):
        return "[" + ",".join(_canonical(item) for item in node) + "]"
    return repr(node)


def local_imports(source: str, folder: Path) -> list[str]:
    """File names in `folder` that `source` imports (`import helper`, `from helper import x`,
    `from . import helper`): the task's own modules, which run as part of its baseline."""
    try:
        tree = parse_module(source)
    except SyntaxError:
        return []
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.module:
                names.add(node.module.split(".")[0])
            if node.level:  # from . import helper
                names.update(a.name for a in node.names)
    found = []
    for name in sorted(names):
        if (folder / f"{name}.py").is_file():
            found.append(f"{name}.py")
        elif (folder / name / "__init__.py").is_file():
            found += sorted(p.relative_to(folder).as_posix() for p in (folder / name).rglob("*.py"))
    return found


def task_code(task_dir: Path) -> TaskCode:
    """Today's baseline code of the task in `task_dir` (baseline.py, what it imports from the
    folder, inputs.py)."""
    task_dir = Path(task_dir)
    stamps = tuple(
        (p.name, p.stat().st_mtime_ns, p.stat().st_size)
        for p in sorted(task_dir.glob("*.py"))
        if p.is_file()
    )
    return _task_code(str(task_dir.resolve()), stamps)


@lru_cache(maxsize=256)
def _task_code(folder: str, _stamps: tuple[Any, ...]) -> TaskCode:
    root = Path(folder)
    todo = ["baseline.py"] + (["inputs.py"] if (root / "inputs.py").is_file() else [])
    seen: dict[str, str] = {}
    while todo:
        name = todo.pop()
        if name in seen or not (root / name).is_file():
            continue
        data = (root / name).read_bytes()
        seen[name] = hashlib.sha256(data).hexdigest()
        source = data.decode("utf-8", "replace")
        todo += local_imports(source, (root / name).parent)
    digests = []
    for name in sorted(seen):
        source = (root / name).read_bytes().decode("utf-8", "replace")
        digests.append(f"{name}:{code_digest(source)}")
    code = hashlib.sha256("\n".join(digests).encode()).hexdigest()
    return TaskCode(code, dict(sorted(seen.items())))


def library_versions() -> dict[str, str]:
    """The installed version of each library in LIBRARIES that is installed here (from package
    metadata: nothing is imported), plus torch's CUDA/HIP runtime where torch is loaded."""
    found: dict[str, str] = {}
    for name in LIBRARIES:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    import sys

    torch = sys.modules.get("torch")
    if torch is not None:
        cuda = getattr(torch.version, "cuda", None)
        hip = getattr(torch.version, "hip", None)
        if cuda:
            found["cuda"] = str(cuda)
        if hip:
            found["hip"] = str(hip)
    return found


def remeasure_command(task_id: str) -> str:
    return REMEASURE.format(task=task_id)
