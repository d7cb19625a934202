"""The `arena` command line: tasks, eval, bad input, exit codes."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from arena_tui.cli import main
from core import __version__


def run_cli(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_version(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert __version__ in capsys.readouterr().out


def test_tasks_list_and_show_never_reveal_hidden_workloads(capsys):
    code, out, _ = run_cli(capsys, "tasks", "list")
    assert code == 0 and "gemm/bf16_gemm" in out and "norm/add_rmsnorm" in out
    from core.tasks.discovery import find_task

    task = find_task("gemm/bf16_gemm")
    code, out, _ = run_cli(capsys, "tasks", "show", "gemm/bf16_gemm")
    assert code == 0 and "signature" in out
    for w in task.gpu.visible:
        assert str(w.axes["N"]) in out
    rows = [[tok for tok in line.split() if tok.strip("│┃║|")] for line in out.splitlines()]
    for w in list(task.gpu.hidden.fixed) + list(task.cpu.hidden.fixed):
        values = [str(v) for v in w.axes.values()]
        assert not any(row[: len(values)] == values for row in rows), (
            f"hidden workload {w.label} shown"
        )
    assert "never shown" in out


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["eval", "--task", "gemm/nope", "--candidate", "x.py"], "unknown task `gemm/nope`"),
        (["eval", "--task", "elementwise/axpy", "--candidate", "missing.py"], "does not exist"),
        (
            ["eval", "--task", "elementwise/axpy", "--candidate", "{c}/axpy_no_run.py"],
            "defines no `run`",
        ),
        (
            [
                "eval",
                "--task",
                "elementwise/axpy",
                "--candidate",
                "{c}/axpy_torch.py",
                "--device",
                "tpu:0",
            ],
            "unknown device `tpu:0`",
        ),
    ],
)
def test_bad_input_gets_one_line_and_exit_code_2(capsys, fixture_tasks, candidates, args, says):
    args = [a.format(c=candidates) for a in args]
    code, out, err = run_cli(capsys, "--tasks-dir", str(fixture_tasks), *args)
    assert code == 2
    assert says in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_eval_json_prints_exactly_one_result_object(fixture_tasks, candidates):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "arena_tui.cli",
            "--tasks-dir",
            str(fixture_tasks),
            "eval",
            "--task",
            "elementwise/axpy",
            "--candidate",
            str(candidates / "axpy_wrong.py"),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 1, proc.stderr
    result = json.loads(proc.stdout)
    assert proc.stdout.count("\n") == 1
    for key in (
        "schema_version",
        "task_id",
        "candidate_sha256",
        "device",
        "timing_kind",
        "status",
        "failed_stage",
        "stages",
        "workloads",
        "speedup",
        "sol_fraction",
        "points",
        "integrity_flags",
        "review_notes",
        "versions",
    ):
        assert key in result
    assert result["status"] == "failed" and result["failed_stage"] == "correctness"
    assert result["device"]["vendor"] == "cpu"


def test_arena_alone_evaluates_every_starter_and_prints_the_scores(capsys, fixture_tasks):
    code, out, _ = run_cli(capsys, "--tasks-dir", str(fixture_tasks))
    assert code == 0
    assert "elementwise/axpy" in out and "Scores" in out and "passed" in out


def test_tasks_show_prints_brackets_in_a_description_as_written(capsys, tmp_path, fixture_tasks):
    import shutil

    folder = tmp_path / "elementwise" / "axpy"
    shutil.copytree(fixture_tasks / "elementwise" / "axpy", folder)
    yaml_path = folder / "task.yaml"
    yaml_path.write_text(
        yaml_path.read_text().replace(
            "description: y = 2 * x + b, elementwise, float32.",
            "description: 'y[i] = 2 * x[i] + b[i], [bold] stays text'",
        )
    )
    assert main(["--tasks-dir", str(tmp_path), "tasks", "show", "elementwise/axpy"]) == 0
    assert "y[i] = 2 * x[i] + b[i], [bold] stays text" in capsys.readouterr().out


def test_a_gpu_this_machine_lacks_is_bad_input_at_once_and_json_gets_an_error_object(
    capsys, fixture_tasks, candidates, monkeypatch
):
    import time

    from arena_tui import local_devices

    monkeypatch.setattr(local_devices, "_gpu_ids", lambda: ())  # as on a machine without a GPU
    start = time.monotonic()
    args = [
        "--tasks-dir",
        str(fixture_tasks),
        "eval",
        "--task",
        "elementwise/axpy",
        "--candidate",
        str(candidates / "axpy_torch.py"),
        "--device",
        "cuda:0",
    ]
    code, out, err = run_cli(capsys, *args)
    assert (
        code == 2
        and "`cuda:0`: this machine has no GPU" in err
        and "sim:h200" in err
        and len(err.strip().splitlines()) == 1
    )
    code, out, err = run_cli(capsys, *args, "--json")
    assert code == 2 and "no GPU" in json.loads(out)["error"] and out.count("\n") == 1
    assert time.monotonic() - start < 5  # no probe, no harness started
    assert local_devices.default_device() == "sim:h200"  # what `arena` alone runs on here


def test_demo_takes_one_task_or_more_and_names_an_unknown_one(capsys, monkeypatch):
    """`arena demo --task ID` evaluates that task's starter alone (what ran is faked here: the
    path to the evaluator is what is tested); an unknown id is one line and exit 2."""
    import core.evaluation.evaluator as evaluator_module
    from tests.test_store import make_result

    ran: list[str] = []

    class Fake:
        def __init__(self, device: str) -> None:
            from types import SimpleNamespace

            self.info = SimpleNamespace(
                id="cpu", vendor="cpu", model="x86_64", arch="x86_64", type="cpu"
            )
            self.info.timing_kind, self.info.sol_peaks, self.info.extra = "cpu", None, {}

        def __enter__(self):  # type: ignore[no-untyped-def]
            return self

        def __exit__(self, *exc: object) -> None:
            pass

        def evaluate(self, task, candidate, on_event=None):  # type: ignore[no-untyped-def]
            ran.append(task.id)
            return make_result(task.id, device="cpu")

    monkeypatch.setattr(evaluator_module, "Evaluator", Fake)
    code, out, _ = run_cli(capsys, "demo", "--task", "norm/add_rmsnorm", "--device", "cpu")
    assert code == 0 and ran == ["norm/add_rmsnorm"] and "norm/add_rmsnorm" in out
    code, _, err = run_cli(capsys, "demo", "--task", "norm/nope", "--device", "cpu")
    assert code == 2 and "unknown task `norm/nope`" in err and len(err.strip().splitlines()) == 1
