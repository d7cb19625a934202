"""Find host Python that a Triton kernel's body calls (the `sim:` devices' counting).

Interpreted, a kernel is Python: a call in its body to an ordinary Python function runs on
every program, with whatever it reaches through globals (the candidate's own tensors, torch),
outside the interpreter's counting. Compiled for a GPU the same call runs once, at compile
time, on constants. So a kernel whose body calls host Python is not counted as it would run:
`host_calls` names those calls, read from the kernel's source (and its @triton.jit helpers'),
and the performance stage fails such a kernel rather than predict it.

What a kernel may call: Triton (@triton.jit functions, triton.language and its builtins,
libdevice, triton.cdiv and the like, @triton.constexpr_function), Python's builtins, and
methods of the values it computes.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import textwrap
from typing import Any


def host_calls(fn: Any, _seen: set[int] | None = None) -> list[str]:
    """`module.name` of every host Python callable the kernel `fn` (a Python function, or a
    JITFunction) or a @triton.jit function it calls names in a call; [] when its source is not
    available."""
    seen = _seen if _seen is not None else set()
    for _ in range(4):  # an Autotuner or Heuristics wraps a JITFunction, which wraps the function
        if inspect.isfunction(fn) or not hasattr(fn, "fn"):
            break
        fn = fn.fn
    if id(fn) in seen or not inspect.isfunction(fn):
        return []
    seen.add(id(fn))
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError):
        return []
    local = {
        n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
    }
    local |= {
        a.arg
        for n in ast.walk(tree)
        if isinstance(n, (ast.FunctionDef, ast.Lambda))
        for a in n.args.args + n.args.kwonlyargs
    }
    defined = next((n for n in tree.body if isinstance(n, ast.FunctionDef)), None)
    # Its body only: the decorators' arguments (`@triton.autotune(configs=_configs())`, the
    # Triton tutorial's pattern) and the parameters' defaults run once, on the host, when the
    # module is imported, as they do for a GPU.
    body = defined.body if defined is not None else tree.body
    found: list[str] = []
    for node in (n for statement in body for n in ast.walk(statement)):
        if not isinstance(node, ast.Call):
            continue
        target = _resolve(node.func, fn.__globals__, local)
        if target is _UNKNOWN:
            continue
        if _is_jit(target):
            found += host_calls(target, seen)
        elif not _allowed(target):
            name = f"{getattr(target, '__module__', None) or '?'}.{getattr(target, '__qualname__', None) or ast.unparse(node.func)}"
            if name not in found:
                found.append(name)
    return found


_UNKNOWN = object()
PURE_MODULES = {
    "builtins",
    "math",
    "_operator",
    "operator",
}  # functions of constants only: nothing to reach a tensor through


def _resolve(node: ast.AST, scope: dict[str, Any], local: set[str]) -> Any:
    """The object a call's function expression names (a global, or an attribute chain from one),
    or _UNKNOWN where it is a local value (a tensor's method) or not resolvable statically."""
    if isinstance(node, ast.Name):
        if node.id in local:
            return _UNKNOWN
        if node.id in scope:
            return scope[node.id]
        return getattr(builtins, node.id, _UNKNOWN)
    if isinstance(node, ast.Attribute):
        owner = _resolve(node.value, scope, local)
        if owner is _UNKNOWN:
            return _UNKNOWN
        return getattr(owner, node.attr, _UNKNOWN)
    return _UNKNOWN


def _is_jit(obj: Any) -> bool:
    from triton.runtime.jit import JITFunction

    try:
        from triton.runtime.interpreter import InterpretedFunction
    except ImportError:  # pragma: no cover - every Triton this runs on has it
        InterpretedFunction = JITFunction  # type: ignore[misc,assignment]
    return isinstance(obj, (JITFunction, InterpretedFunction))


def _allowed(obj: Any) -> bool:
    module = getattr(obj, "__module__", None) or getattr(type(obj), "__module__", "") or ""
    if module in PURE_MODULES or module.split(".")[0] == "triton":
        return True
    try:
        import triton.language as tl

        if tl.core.is_builtin(obj):
            return True
    except Exception:  # noqa: BLE001 - an object that refuses attribute access is not Triton's
        pass
    return False
