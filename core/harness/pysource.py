"""Python source parsed under one lock, from any thread.

CPython 3.11 keeps the depth counter of its AST conversion (C tree to `ast` objects and back) in
state shared by every thread of the interpreter. When a garbage collection inside one thread's
conversion runs Python code, another thread may switch in and convert too; the first then fails
with "SystemError: AST constructor recursion depth mismatch" (python/cpython#106905, fixed in
3.12). The arena parses candidates, formulas and task files on worker threads
(`asyncio.to_thread`), so every parse in the project goes through here.
"""

from __future__ import annotations

import ast
import threading
from types import CodeType

_LOCK = threading.Lock()


def parse_module(source: str | bytes, filename: str = "<unknown>") -> ast.Module:
    """`ast.parse` of a file's source, one thread at a time; a syntax error raises as there."""
    with _LOCK:
        return ast.parse(source, filename=filename)


def parse_expression(source: str, filename: str = "<unknown>") -> ast.Expression:
    """`ast.parse(..., mode="eval")`, one thread at a time."""
    with _LOCK:
        return ast.parse(source, filename=filename, mode="eval")


def compile_expression(tree: ast.Expression, filename: str) -> CodeType:
    """`compile` of a parsed expression (the conversion back shares the same counter)."""
    with _LOCK:
        return compile(tree, filename, "eval")
