"""Parsing Python from several threads at once: CPython 3.11's AST conversion shares one depth
counter across threads (python/cpython#106905), and the arena parses candidates on worker
threads. A garbage-collection callback that yields the GIL puts a thread switch inside every
conversion, which without the lock fails within a few parses on 3.11 (measured: every run)."""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Iterator

import pytest

from core.harness.pysource import compile_expression, parse_expression, parse_module

SOURCE = "\n".join(
    f"def f{i}(a, b):\n    return [(a + b) * {i} for _ in range(3)]" for i in range(60)
)


@pytest.fixture
def switching_collector() -> Iterator[None]:
    """A collection every few allocations, each one yielding the GIL to another thread."""

    def yield_gil(_phase: str, _info: dict) -> None:
        time.sleep(0.0005)

    threshold = gc.get_threshold()
    gc.callbacks.append(yield_gil)
    gc.set_threshold(50, 1, 1)
    try:
        yield
    finally:
        gc.callbacks.remove(yield_gil)
        gc.set_threshold(*threshold)


def test_four_threads_parse_at_once_without_a_recursion_depth_error(switching_collector) -> None:
    errors: list[BaseException] = []

    def parse_a_few() -> None:
        for _ in range(4):
            try:
                assert len(parse_module(SOURCE).body) == 60
                code = compile_expression(parse_expression("2 * (n + 1)"), "<formula>")
                assert eval(code, {}, {"n": 3}) == 8
            except BaseException as error:  # noqa: BLE001 - collected for the assertion below
                errors.append(error)
                return

    threads = [threading.Thread(target=parse_a_few) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []


def test_a_syntax_error_raises_as_ast_parse_raises_it() -> None:
    with pytest.raises(SyntaxError) as caught:
        parse_module("def run(:\n", "candidate.py")
    assert caught.value.filename == "candidate.py"
