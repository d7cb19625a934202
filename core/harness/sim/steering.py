"""Which loops of a counted kernel may skip iterations (core/harness/sim/loops.py).

A sampled loop runs a few of its iterations and counts the others as their mean. That is right
where the iterations are alike and independent: a GEMM's K loop, an attention kernel's KV loop.
Its loop-carried values (the accumulator, advanced pointers) come out wrong after a skipped
iteration, which costs only values, never counts. It is wrong where a value carried from one
iteration to the next *steers* the later ones: a persistent grouped GEMM walks its groups with a
tile index and a running row offset carried through the loop (`tile += programs`, `seen +=
tiles`, `start = end`), and a `while` or an `if` in the next iteration reads them. Skip a group
and the next one sampled sees the skipped groups' rows as its own: the Triton tutorial's grouped
GEMM was counted with 5 to 35 times its work at prefill sizes, and its exact programs (which run
every iteration) counted differently from their sampled twins, so an honest kernel failed as one
that tells watched programs apart.

The rule, read from the kernel's source (its AST, as Triton's code generator reads loop-carried
values): a `for` loop carries the names its body assigns that were bound before it (the
function's parameters, earlier assignments), its own target aside. A name steers if it is
read by a branch or a loop bound (the test of an `if`, a `while` or a conditional expression,
the iterable of a `for`), or flows into such a name through assignments (flow-insensitive, so a
name reused for two jobs counts as steering: safe, only slower). A loop that carries a steering
name runs every iteration, counted; the loops inside it are judged on their own. Where the
source cannot be read (a kernel made from a string), loops are sampled as before. Imports only
the standard library: the harness is shipped alone.
"""

from __future__ import annotations

import ast
import inspect
import linecache
import sys
import textwrap
from dataclasses import dataclass
from types import CodeType


@dataclass(frozen=True)
class LoopCarry:
    """What one `for` loop carries from an iteration to the next, and which of it steers."""

    line: int  # the `for` statement's line in its file
    carried: frozenset[str]
    steering: frozenset[str]


_FUNCTIONS: dict[CodeType, dict[int, LoopCarry]] = {}


def loop_at_caller(depth: int = 2) -> LoopCarry | None:
    """The loop whose iterable is being made `depth` frames up (a `range(...)` call in a kernel
    that `SampledRange` replaces), or None where it is not a `for` statement's or the kernel's
    source cannot be read."""
    try:
        frame = sys._getframe(depth)
    except ValueError:
        return None
    loops = _loops_of(frame.f_code)
    line = frame.f_lineno
    if not loops or line is None:
        return None
    return loops.get(line)


def _loops_of(code: CodeType) -> dict[int, LoopCarry]:
    """Every line of every `for` header in `code`'s function, mapped to its loop (cached per
    code object: the interpreter compiles each kernel once)."""
    found = _FUNCTIONS.get(code)
    if found is None:
        found = _FUNCTIONS[code] = _analyse(code)
    return found


def _analyse(code: CodeType) -> dict[int, LoopCarry]:
    function = _function_ast(code)
    if function is None:
        return {}
    offset = code.co_firstlineno - function.lineno
    steering = steering_names(function)
    loops: dict[int, LoopCarry] = {}
    for loop in _for_loops(function):
        carried = carried_names(function, loop)
        carry = LoopCarry(loop.lineno + offset, carried, carried & steering)
        # The header's lines: the interpreter's frame stands on the iterable's call.
        end = loop.iter.end_lineno or loop.iter.lineno
        for line in range(loop.lineno, end + 1):
            inner = loops.get(line + offset)
            if inner is None or inner.line < carry.line:
                loops[line + offset] = carry
    return loops


def _function_ast(code: CodeType) -> ast.FunctionDef | None:
    """The function `code` was compiled from, parsed from its file (the interpreter compiles a
    kernel with its file's name and line numbers)."""
    lines = linecache.getlines(code.co_filename)
    if not lines or code.co_firstlineno > len(lines):
        return None
    try:
        block = inspect.getblock(lines[code.co_firstlineno - 1 :])
        tree = ast.parse(textwrap.dedent("".join(block)))
    except (SyntaxError, IndentationError, ValueError, TypeError):
        return None
    node = tree.body[0] if tree.body else None
    if not isinstance(node, ast.FunctionDef) or node.name != code.co_name:
        return None
    return node


def _for_loops(function: ast.FunctionDef) -> list[ast.For]:
    return [n for n in ast.walk(function) if isinstance(n, ast.For)]


def _targets(node: ast.AST) -> set[str]:
    """The plain names an assignment target binds (`a`, `a, b`, `(a, [b, c])`)."""
    if isinstance(node, ast.Name):
        return {node.id}
    if isinstance(node, (ast.Tuple, ast.List)):
        return set().union(*(_targets(e) for e in node.elts)) if node.elts else set()
    if isinstance(node, ast.Starred):
        return _targets(node.value)
    return set()


def _reads(node: ast.AST | None) -> set[str]:
    if node is None:
        return set()
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _bindings(node: ast.AST) -> list[tuple[set[str], set[str]]]:
    """Every binding under `node` (itself included): (the names bound, the names their value
    reads)."""
    return [found for n in ast.walk(node) for found in _node_bindings(n)]


def _node_bindings(node: ast.AST) -> list[tuple[set[str], set[str]]]:
    """The bindings `node` itself makes, not its children's: (the names bound, the names their
    value reads; an augmented assignment reads its own target too)."""
    if isinstance(node, ast.Assign):
        value = _reads(node.value)
        return [(_targets(t), value) for t in node.targets]
    if isinstance(node, ast.AugAssign):
        names = _targets(node.target)
        return [(names, _reads(node.value) | names)]
    if isinstance(node, (ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
        return [(_targets(node.target), _reads(node.value))]
    if isinstance(node, ast.For):
        return [(_targets(node.target), _reads(node.iter))]
    return []


def steering_names(function: ast.FunctionDef) -> frozenset[str]:
    """The names that decide which code runs and how often: read by a branch's test or a loop's
    bound, or flowing into such a name through any assignment of the function."""
    tests: set[str] = set()
    for n in ast.walk(function):
        if isinstance(n, (ast.If, ast.While, ast.IfExp)):
            tests |= _reads(n.test)
        elif isinstance(n, ast.For):
            tests |= _reads(n.iter)
    feeds: dict[str, set[str]] = {}
    for names, value in _bindings(function):
        for name in names:
            feeds.setdefault(name, set()).update(value)
    steering, todo = set(tests), list(tests)
    while todo:
        for source in feeds.get(todo.pop(), ()):
            if source not in steering:
                steering.add(source)
                todo.append(source)
    return frozenset(steering)


def carried_names(function: ast.FunctionDef, loop: ast.For) -> frozenset[str]:
    """The names `loop`'s body assigns that were bound before it: its parameters and what the
    function assigned on an earlier line (Triton's own rule for a loop's carried values), the
    loop's target aside."""
    args = function.args
    before = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs}
    for extra in (args.vararg, args.kwarg):
        if extra is not None:
            before.add(extra.arg)
    for n in ast.walk(function):
        if getattr(n, "lineno", loop.lineno) < loop.lineno:
            for names, _value in _node_bindings(n):
                before |= names
    assigned: set[str] = set()
    for statement in loop.body + loop.orelse:
        for names, _value in _bindings(statement):
            assigned |= names
    return frozenset((assigned & before) - _targets(loop.target))
