"""The code rules, checked by the README's test command: ruff finds nothing ([tool.ruff]), the
code is as `ruff format` writes it, mypy passes on core/ ([tool.mypy]), and the import
contracts hold ([tool.importlinter]: core imports neither arena_tui nor remotes, the harness
imports nothing outside itself, core's layers depend only downward). Each runs the tool as
CI does and shows its output on failure; without the tool the test skips here and fails
under CI=true. The last tests run each check on a tiny project, clean and then broken, so
that none of them can pass without looking, and show the missing-tool rule."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.code_checks import CHECKS, Check, require, run_check

ROOT = Path(__file__).resolve().parent.parent


def _passes(name: str, fix: str = "") -> None:
    outcome = run_check(CHECKS[name], ROOT)
    if not outcome.ok:  # the tool's own words, not a traceback of this file
        pytest.fail(outcome.report + (f"\n({fix})" if fix else ""), pytrace=False)


def test_ruff_finds_nothing():
    _passes("ruff lint", "`ruff check --fix` fixes those marked [*]")


def test_the_code_is_formatted():
    _passes("ruff format", "`ruff format` rewrites them")


def test_mypy_passes_on_core():
    _passes("mypy")


def test_the_import_contracts_hold():
    _passes("import contracts")


# A tiny project for each check: its settings as ours are written, and one file that breaks it.
TINY_PYPROJECT = """\
[tool.ruff]
line-length = 100
[tool.ruff.lint]
select = ["F"]

[tool.mypy]
files = ["tinyproj"]

[tool.importlinter]
root_packages = ["tinyproj"]

[[tool.importlinter.contracts]]
name = "low imports nothing above it"
type = "forbidden"
source_modules = ["tinyproj.low"]
forbidden_modules = ["tinyproj.high"]
"""
CLEAN_LOW = "def double(x: int) -> int:\n    return 2 * x\n"
CLEAN_HIGH = (
    "from tinyproj.low import double\n\n\ndef quad(x: int) -> int:\n    return double(double(x))\n"
)
BROKEN = {
    "ruff lint": (
        "low.py",
        "import os\n\n\ndef double(x: int) -> int:\n    return 2 * x\n",
    ),  # F401
    "ruff format": ("low.py", "def double( x:int )->int:\n    return 2*x\n"),
    "mypy": ("low.py", 'def double(x: int) -> int:\n    return "2" * x\n'),
    "import contracts": (
        "low.py",
        "import tinyproj.high\n\n\ndef double(x: int) -> int:\n    return 2 * x\n",
    ),
}


def _tiny_project(root: Path, replace: tuple[str, str] | None = None) -> Path:
    package = root / "tinyproj"
    package.mkdir(parents=True)
    (root / "pyproject.toml").write_text(TINY_PYPROJECT)
    files = {"__init__.py": "", "low.py": CLEAN_LOW, "high.py": CLEAN_HIGH}
    if replace:
        files[replace[0]] = replace[1]
    for name, text in files.items():
        (package / name).write_text(text)
    return root


@pytest.mark.parametrize("name", list(CHECKS))
def test_each_check_passes_a_clean_project_and_reports_a_broken_one(tmp_path, monkeypatch, name):
    check = CHECKS[name]
    monkeypatch.setenv(
        "MYPY_CACHE_DIR", str(tmp_path / "mypy-cache")
    )  # typeshed's analysis, done once
    clean = run_check(check, _tiny_project(tmp_path / "clean"))
    assert clean.ok, clean.report
    broken = run_check(check, _tiny_project(tmp_path / "broken", BROKEN[name]))
    assert not broken.ok, f"{check.name} passed a project broken for it:\n{broken.report}"
    assert "low.py" in broken.report or "tinyproj.low" in broken.report, (
        broken.report
    )  # it names the place


def test_a_missing_tool_skips_here_and_fails_under_ci(monkeypatch):
    absent = Check("no-such-linter", "no_such_linter_module", ())
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match=r"no-such-linter is not installed"):
        require(absent)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match=r"pip install -e '\.\[dev\]'"):
        require(absent)
