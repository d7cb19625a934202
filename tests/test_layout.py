"""The layout's rules that import-linter cannot see (pyproject's [tool.importlinter] has the
import contracts): core never names its front end, and every layer says what it holds."""

from __future__ import annotations

import ast
from pathlib import Path

from core.harness.protocol import Op

CORE = Path(__file__).resolve().parents[1] / "core"
LAYERS = (
    "model",
    "tasks",
    "devices",
    "evaluation",
    "harness",
    "harness/sim",
    "store",
    "orchestration",
    "agents",
    "rl",
    "importers",
)


def test_core_never_names_the_front_end_or_the_ssh_package():
    named = [str(p.relative_to(CORE)) for p in CORE.rglob("*.py") if "arena_tui" in p.read_text()]
    assert named == [], (
        f"core names arena_tui in {named}: the front end is found through the `arena` console script"
    )


def test_every_layer_has_a_docstring_that_says_what_it_holds():
    for layer in LAYERS:
        doc = ast.get_docstring(ast.parse((CORE / layer / "__init__.py").read_text()))
        assert doc and len(doc) > 100, (
            f"core/{layer}/__init__.py needs a paragraph saying what the layer holds"
        )


def test_ops_compare_equal_to_the_plain_strings_on_the_wire():
    assert Op.TIME == "time" and "time" == Op.TIME and {"op": "time"}["op"] in (Op.TIME,)
    assert str(Op.CHECK_TIMED) == "check_timed"
