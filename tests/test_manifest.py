"""The manifest of bundled files (core/tasks/manifest.py, docs/sandbox.md): the arena refuses, in one
line with exit 2, to evaluate against a bundled task or data file that no longer matches it,
naming the file and the command that restores it; `arena tasks add-model`, the user's own edit,
re-records what it changes. The tests work on a copy of the package root (tasks and core/data)
with the manifest module pointed at it; the last one checks the real, committed manifest."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from core.evaluation.evaluator import Evaluator
from core.tasks import manifest
from core.tasks.manifest import ManifestMismatch
from core.tasks.model_config import read_config
from core.tasks.model_rows import add_model
from core.tasks.spec import load_task
from tests.conftest import FIXTURES, ROOT


@pytest.fixture
def shipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A package root as installed from a checkout: the axpy fixture as a bundled task, the
    engine's data, a manifest of both, and a .git folder (so the restore command is git's)."""
    root = tmp_path / "pkg"
    shutil.copytree(
        FIXTURES / "tasks" / "elementwise" / "axpy", root / "tasks" / "elementwise" / "axpy"
    )
    shutil.copytree(
        ROOT / "tasks" / "norm" / "add_rmsnorm", root / "tasks" / "norm" / "add_rmsnorm"
    )
    shutil.copytree(
        ROOT / "core" / "data",
        root / "core" / "data",
        ignore=shutil.ignore_patterns("manifest.json"),
    )
    (root / ".git").mkdir()
    monkeypatch.setattr(manifest, "PACKAGE_ROOT", root)
    monkeypatch.setattr(manifest, "TASKS_DIR", root / "tasks")
    monkeypatch.setattr(manifest, "DATA_DIR", root / "core" / "data")
    monkeypatch.setattr(manifest, "MANIFEST", root / "core" / "data" / "manifest.json")
    assert manifest.main(["update"]) == 0
    return root


def test_a_changed_engine_data_file_is_refused_naming_it_and_its_restore_command(shipped):
    Evaluator("cpu").close()  # as shipped: fine
    constants = shipped / "core" / "data" / "sim_constants.json"
    constants.write_text(constants.read_text().replace("{", "{ ", 1))
    with pytest.raises(ManifestMismatch) as caught:
        Evaluator("cpu")
    message = str(caught.value)
    assert "\n" not in message and "core/data/sim_constants.json" in message, message
    assert f"git -C {shipped} checkout -- core/data/sim_constants.json" in message
    shutil.rmtree(shipped / ".git")  # an installed package: pip restores it
    with pytest.raises(
        ManifestMismatch,
        match=r"pip install --force-reinstall --no-deps PATH`, PATH being the kernel-arena checkout",
    ):
        Evaluator("cpu")


def test_a_changed_or_added_bundled_task_file_is_refused_before_anything_runs(shipped, capsys):
    task_dir = shipped / "tasks" / "elementwise" / "axpy"
    reference = task_dir / "reference.py"
    reference.write_text(reference.read_text().replace("2", "3"))
    with Evaluator("cpu") as evaluator:
        with pytest.raises(
            ManifestMismatch, match=r"tasks/elementwise/axpy/reference\.py no longer matches"
        ):
            evaluator.evaluate(load_task(task_dir), FIXTURES / "candidates" / "axpy_torch.py")
    from arena_tui.cli import main

    code = main(
        [
            "--tasks-dir",
            str(shipped / "tasks"),
            "eval",
            "--task",
            "elementwise/axpy",
            "--candidate",
            str(FIXTURES / "candidates" / "axpy_torch.py"),
            "--no-store",
        ]
    )
    _, err = capsys.readouterr()
    assert code == 2 and err.count("\n") == 1 and "reference.py" in err and "checkout --" in err, (
        err
    )
    manifest.main(["update"])
    (task_dir / "inputs.py").write_text(
        "def make_inputs(*a):\n    return []\n"
    )  # a file that would change the inputs
    with pytest.raises(
        ManifestMismatch, match=r"tasks/elementwise/axpy/inputs\.py is not a bundled file"
    ):
        manifest.stage_task(task_dir)
    (task_dir / "inputs.py").unlink()
    (task_dir / "check.py").unlink(missing_ok=True)
    (task_dir / "baseline.py").unlink()
    with pytest.raises(ManifestMismatch, match=r"baseline\.py is missing"):
        manifest.stage_task(task_dir)


def test_add_model_re_records_the_task_yaml_it_edits(shipped, capsys):
    task_dir = shipped / "tasks" / "norm" / "add_rmsnorm"
    changes = add_model(
        read_config(FIXTURES / "models" / "DeepSeek-V3.json"), [load_task(task_dir)]
    )
    assert changes[0].added and not changes[0].error, changes
    staged = manifest.stage_task(task_dir)  # the user's edit: the manifest followed it
    assert b"note: residual add + RMSNorm" in staged.named(task_dir)["task.yaml"]
    spec = task_dir / "task.yaml"
    spec.write_text(spec.read_text() + "# an edit by hand\n")  # not through add-model: refused
    with pytest.raises(
        ManifestMismatch,
        match=r"task\.yaml no longer matches.*python -m core\.tasks\.manifest update",
    ):
        manifest.stage_task(task_dir)


def test_a_task_the_user_makes_in_the_tasks_folder_is_theirs_never_a_mismatch(shipped, capsys):
    """`arena tasks new` in a checkout writes beside the shipped tasks: the manifest ships none of
    it, so it stages (evaluates, validates) like a task anywhere else, add-model leaves the
    manifest alone, and `check` names it without failing."""
    from arena_tui.cli import main

    assert main(["--tasks-dir", str(shipped / "tasks"), "tasks", "new", "moe/my_kernel"]) == 0
    folder = shipped / "tasks" / "moe" / "my_kernel"
    staged = manifest.stage_task(folder)
    assert set(staged.named(folder)) == {"task.yaml", "reference.py", "baseline.py", "starter.py"}
    assert not manifest.is_bundled(folder / "task.yaml")
    assert manifest.is_bundled(shipped / "tasks" / "elementwise" / "axpy" / "task.yaml")
    assert manifest.user_task_folders() == ["tasks/moe/my_kernel"]
    assert manifest.differences() == [] and manifest.main(["check"]) == 0
    assert "tasks/moe/my_kernel: a user's task" in capsys.readouterr().out
    before = manifest.MANIFEST.read_text()
    manifest.record([folder / "task.yaml"])
    assert manifest.MANIFEST.read_text() == before
    assert manifest.shipped_task_ids() == ["elementwise/axpy", "norm/add_rmsnorm"]


def test_every_task_folder_git_tracks_is_shipped_in_the_manifest():
    """A new bundled task is committed with its manifest entries (a folder the manifest does not
    know is a user's own task, which the check above lets pass)."""
    import subprocess

    tracked = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "tasks/*/*/task.yaml"],
        check=False,
        capture_output=True,
        text=True,
    )
    if tracked.returncode != 0:
        pytest.skip("not a git checkout")
    ids = sorted("/".join(line.split("/")[1:3]) for line in tracked.stdout.split())
    assert ids and set(ids) <= set(manifest.shipped_task_ids())


def test_the_committed_manifest_matches_the_bundled_files():
    """Editing a bundled task or core/data by hand? Run `python -m core.tasks.manifest update`."""
    assert manifest.PACKAGE_ROOT == ROOT
    assert manifest.differences() == []
