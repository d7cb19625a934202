"""The bundled tasks are found when the package is installed non-editable, away from the
checkout."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_non_editable_install_finds_bundled_tasks(tmp_path):
    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--target",
            str(target),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    assert (target / "tasks" / "gemm" / "bf16_gemm" / "task.yaml").is_file()
    env = {**os.environ, "PYTHONPATH": str(target)}
    code = (
        "import core.tasks.discovery as t; print(t.bundled_tasks_root()); print(len(t.discover()))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    where, count = proc.stdout.split()
    assert where.startswith(str(target)) and int(count) >= 3
    # The manifest and the data it covers ship with the package, and match there: an
    # installed arena evaluates against its bundled tasks (core/tasks/manifest.py).
    assert (target / "core" / "data" / "manifest.json").is_file() and (
        target / "core" / "data" / "sim_constants.json"
    ).is_file()
    code = (
        "import core.tasks.manifest as m; print(m.differences()); print(m.restore_hint(m.MANIFEST))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0] == "[]" and "pip install --force-reinstall" in proc.stdout, (
        proc.stdout
    )
