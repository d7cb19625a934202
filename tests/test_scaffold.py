"""`arena tasks new FAMILY/NAME`: a new task folder from a commented template that validates
as generated, never over an existing folder, and only under a known family."""

from __future__ import annotations

from pathlib import Path

import pytest

from arena_tui.cli import main
from core.evaluation.validate import validate_task
from core.evaluation.validate_report import ValidateOptions
from core.tasks.spec import load_task


def _run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_a_scaffolded_task_validates_as_generated(capsys, tmp_path: Path):
    """The checks that need no harness here; tests/test_readme.py runs the README's `arena tasks
    new` and `arena tasks validate` end to end, the baseline's and starter's evaluations too."""
    code, out, err = _run(capsys, "tasks", "new", "norm/my_scale", "--tasks-dir", str(tmp_path))
    assert code == 0, err
    folder = tmp_path / "norm" / "my_scale"
    assert sorted(p.name for p in folder.iterdir()) == [
        "baseline.py",
        "reference.py",
        "starter.py",
        "task.yaml",
    ]
    assert "# " in (folder / "task.yaml").read_text(), "the template explains itself in comments"
    task = load_task(folder)
    assert task.id == "norm/my_scale" and task.model_workloads is not None
    report = validate_task(folder, ValidateOptions(evaluate=False))
    assert report.passed, [c for c in report.checks if not c.passed]
    assert {c.name for c in report.checks} >= {"zeros_fail", "inputs_matter", "formulas"}


def test_it_refuses_to_overwrite(capsys, tmp_path: Path):
    assert _run(capsys, "tasks", "new", "norm/my_scale", "--tasks-dir", str(tmp_path))[0] == 0
    spec = tmp_path / "norm" / "my_scale" / "task.yaml"
    spec.write_text("edited")
    code, _, err = _run(capsys, "tasks", "new", "norm/my_scale", "--tasks-dir", str(tmp_path))
    assert code == 2 and "already exists" in err and "nothing was overwritten" in err
    assert spec.read_text() == "edited"


@pytest.mark.parametrize(
    ("task_id", "says"),
    [
        ("kernels/foo", "family `kernels` is unknown: use one of gemm"),
        ("norm", "is not FAMILY/NAME"),
        ("norm/My-Norm", "not a lowercase identifier"),
        ("norm/a/b", "is not FAMILY/NAME"),
    ],
)
def test_bad_ids_get_one_line_and_exit_code_2(capsys, tmp_path: Path, task_id: str, says: str):
    code, _, err = _run(capsys, "tasks", "new", task_id, "--tasks-dir", str(tmp_path))
    assert code == 2 and says in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not any(tmp_path.iterdir()), "nothing written"
