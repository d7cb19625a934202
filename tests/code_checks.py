"""The code checks CI runs, as one function each tool: ruff's lint and format check, mypy and
import-linter, each run from this interpreter's environment on a project folder whose
pyproject.toml holds the tool's settings. tests/test_code_rules.py runs them on this
repository; it also runs them on tiny projects, to show that each one can fail."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

INSTALL_HINT = "pip install -e '.[dev]'"
MAX_LINES = 200  # of a tool's output in a failure message; the rest is counted, not shown


@dataclass(frozen=True)
class Check:
    """One tool run on a project folder: the module that must be importable, and its argv."""

    name: str
    module: str  # the importable module that says the tool is installed
    argv: tuple[str, ...]  # run with this interpreter, in the project folder


CHECKS = {
    # one line a finding (RUFF_OUTPUT_FORMAT below does the same for the format check)
    "ruff lint": Check(
        "ruff check",
        "ruff",
        ("-m", "ruff", "check", "--no-cache", "--output-format", "concise", "."),
    ),
    "ruff format": Check(
        "ruff format --check", "ruff", ("-m", "ruff", "format", "--check", "--no-cache", ".")
    ),
    # files, strictness and the rest come from [tool.mypy]
    "mypy": Check("mypy", "mypy", ("-m", "mypy")),
    # import-linter has no `python -m` entry: call the function behind its `lint-imports` script
    "import contracts": Check(
        "lint-imports",
        "importlinter",
        (
            "-c",
            "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())",
        ),
    ),
}


@dataclass(frozen=True)
class Outcome:
    ok: bool
    report: str  # the command and everything it printed, for the assertion message


def require(check: Check) -> None:
    """Skip when the tool is missing here; under CI=true a missing tool fails instead (a check
    that silently does not run is no check)."""
    if importlib.util.find_spec(check.module) is not None:
        return
    reason = f"{check.name} is not installed ({INSTALL_HINT}: the dev extra has it)"
    if os.environ.get("CI") == "true":
        pytest.fail(reason)
    pytest.skip(reason)


def run_check(check: Check, project: Path, timeout: float = 600) -> Outcome:
    """Run one check in `project` (its pyproject.toml configures the tool); the project's own
    packages are importable, as import-linter needs to build its graph."""
    require(check)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(project), os.environ.get("PYTHONPATH")])),
    }
    env.pop("MYPYPATH", None)
    env["RUFF_OUTPUT_FORMAT"] = "concise"
    proc = subprocess.run(
        [sys.executable, *check.argv],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    lines = (proc.stdout + proc.stderr).strip().splitlines()
    output = "\n".join(lines[:MAX_LINES])
    if len(lines) > MAX_LINES:
        output += f"\n... and {len(lines) - MAX_LINES} more lines (run `{check.name}` to see them)"
    return Outcome(
        proc.returncode == 0, f"`{check.name}` in {project} exited {proc.returncode}:\n{output}"
    )
