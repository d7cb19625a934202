"""No candidate can change what judges it (docs/sandbox.md, docs/integrity.md): a candidate that
rewrites the task's reference, a bundled task, the engine's data (the simulator's constants),
the harness and the user's home changes none of them, sandboxed or, as root, unsandboxed (its
worker drops to uid 65534); where it can write (a user's task folder open to all), it is
flagged and the evaluations after it are judged with the copy staged before it ran. Honest
candidates evaluated after it pass.

These run the real sandbox: skipped where this machine cannot sandbox, failed under CI=true."""

from __future__ import annotations

import json
import os
import secrets
import shutil
from pathlib import Path

import pytest

from core.evaluation import sandbox
from core.evaluation.evaluator import Evaluator
from core.evaluation.job import Timing
from core.model.task import Limits
from core.tasks.spec import load_task
from tests.conftest import FIXTURES, ROOT
from tests.test_sandbox import require_sandbox

FAST = Timing(alternations=2, budget_ms=30.0, min_calls=1, max_calls=20)
LIMITS = Limits(compile_s=60, correctness_s=60, performance_s=60)
AXPY = FIXTURES / "tasks" / "elementwise" / "axpy"
HONEST = FIXTURES / "candidates" / "axpy_torch.py"

# Appends to (or, with "w", replaces) every target, reports what it managed on its stdout (the
# compile log) and then computes the right answer: only its side effects are under test.
POISONER = """
import json, os
TARGETS = json.loads({targets!r})
outcome = {{}}
for path, mode in TARGETS:
    try:
        with open(path, mode) as f:
            f.write("def run(x, b):\\n    return x * 0\\n" if mode == "w" else "\\n# poisoned\\n")
        outcome[path] = "written"
    except OSError as exc:
        outcome[path] = type(exc).__name__
print("POISON " + json.dumps({{"uid": os.getuid(), "outcome": outcome}}))


def run(x, b):
    return x * 2 + b
"""


def poisoner(folder: Path, targets: list[tuple[Path, str]]) -> Path:
    path = folder / "poisoner.py"
    path.write_text(POISONER.format(targets=json.dumps([(str(p), m) for p, m in targets])))
    return path


def report(result) -> dict:
    log = result.stage("compile").log
    line = next((x for x in log.splitlines() if x.startswith("POISON ")), None)
    assert line is not None, log[-2000:]
    return json.loads(line[len("POISON ") :])


@pytest.fixture
def targets(tmp_path):
    """What a poisoner goes for, in this checkout, restored afterwards whatever happens: the
    evaluated task's reference, a bundled task's reference, the simulator's constants, the
    harness's timer, a new file in $HOME."""
    files = [
        AXPY / "reference.py",
        ROOT / "tasks" / "norm" / "add_rmsnorm" / "reference.py",
        ROOT / "core" / "data" / "sim_constants.json",
        ROOT / "core" / "harness" / "timing.py",
    ]
    saved = {p: p.read_bytes() for p in files}
    home_file = Path.home() / f".arena-poison-{secrets.token_hex(4)}"
    try:
        yield [(p, "a") for p in files] + [(home_file, "w")]
    finally:
        for p, data in saved.items():
            if p.read_bytes() != data:
                p.write_bytes(data)
        home_file.unlink(missing_ok=True)


def _unchanged(targets: list[tuple[Path, str]], before: dict[Path, bytes]) -> None:
    for path, _ in targets:
        assert (path.read_bytes() if path.exists() else None) == before[path], f"{path} was changed"


@pytest.fixture(scope="module")
def unsandboxed(tmp_path_factory):
    """One warm harness without the sandbox (as `--unsandboxed` runs it) for the module."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(sandbox.SWITCH, "off")
        with Evaluator("cpu", workdir=tmp_path_factory.mktemp("runs"), timing=FAST) as evaluator:
            yield evaluator


def test_sandboxed_a_poisoner_changes_nothing_and_honest_candidates_still_pass(
    cpu_evaluator, monkeypatch, tmp_path, targets
):
    monkeypatch.delenv(sandbox.SWITCH, raising=False)
    require_sandbox()
    before = {p: p.read_bytes() if p.exists() else None for p, _ in targets}
    evaluator = cpu_evaluator  # the session's warm sandboxed harness, as `arena` uses one
    task = load_task(AXPY)
    bad = evaluator.evaluate(task, poisoner(tmp_path, targets), limits=LIMITS)
    honest = evaluator.evaluate(task, HONEST, limits=LIMITS)
    seen = report(bad)
    # Hidden (the task folders, $HOME: not in the sandbox) or read-only (core/): never written.
    assert all(v != "written" for v in seen["outcome"].values()), seen
    assert seen["uid"] == sandbox.SANDBOX_UID
    _unchanged(targets, before)
    assert bad.status == "passed" and not bad.integrity_flags, (bad.stages, bad.integrity_flags)
    assert honest.status == "passed" and honest.sandbox["mode"] == "bubblewrap", honest.stages


def test_unsandboxed_as_root_candidates_run_as_nobody_and_cannot_write_the_installation(
    unsandboxed, tmp_path, targets
):
    if os.geteuid() != 0:
        pytest.skip(
            "only root's unsandboxed candidates are dropped to uid 65534 (an ordinary user's run as that user)"
        )
    before = {p: p.read_bytes() if p.exists() else None for p, _ in targets}
    task = load_task(AXPY)
    bad = unsandboxed.evaluate(task, poisoner(tmp_path, targets), limits=LIMITS)
    honest = unsandboxed.evaluate(task, HONEST, limits=LIMITS)
    seen = report(bad)
    assert seen["uid"] == sandbox.SANDBOX_UID, seen
    assert all(v == "PermissionError" for v in seen["outcome"].values()), seen
    _unchanged(targets, before)
    assert bad.sandbox["mode"] == "unsandboxed" and bad.status == "passed", bad.stages
    assert honest.status == "passed", honest.stages


def test_a_task_folder_a_candidate_can_write_is_flagged_and_later_candidates_use_the_staged_copy(
    unsandboxed, tmp_path
):
    """A user's task folder, open to all, unsandboxed: the poisoner rewrites the reference and
    the baseline to return zeros. Its own evaluation is flagged; the next candidate is judged
    with the files as staged before the poisoner ran, and passes."""
    task_dir = tmp_path / "tasks" / "elementwise" / "axpy"
    shutil.copytree(AXPY, task_dir)
    for p in [task_dir, *task_dir.iterdir()]:
        p.chmod(0o777 if p.is_dir() else 0o666)
    targets = [(task_dir / "reference.py", "w"), (task_dir / "baseline.py", "w")]
    task = load_task(task_dir)
    bad = unsandboxed.evaluate(task, poisoner(tmp_path, targets), limits=LIMITS)
    honest = unsandboxed.evaluate(task, HONEST, limits=LIMITS)
    assert all(v == "written" for v in report(bad)["outcome"].values())
    assert "x * 0" in (task_dir / "reference.py").read_text()  # the poison is on disk ...
    assert bad.status == "failed" and any(
        f.startswith("task_files_modified") for f in bad.integrity_flags
    ), bad.integrity_flags
    flag = next(f for f in bad.integrity_flags if f.startswith("task_files_modified"))
    assert "reference.py" in flag and "baseline.py" in flag, flag
    assert honest.status == "passed" and not honest.integrity_flags, (
        honest.stages,
        honest.integrity_flags,
    )  # ... and judged nothing
