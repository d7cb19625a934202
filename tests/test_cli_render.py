"""Every table the CLI prints, rendered as a pipe renders it (80 columns, no terminal): no cell
holding a number is cut or folded, `tasks list` is one line per task, and the `cpu` device's
interpreted times never appear as a speedup (`--json` keeps every number)."""

from __future__ import annotations

import io
import json
import re
from dataclasses import replace

import pytest
from rich.console import Console

from arena_tui import figures, render
from arena_tui.cli import main
from arena_tui.run_tables import run_summary
from core.model.result import Result, WorkloadFigures
from core.store.db import Store
from core.tasks.discovery import discover
from tests.test_leaderboard import CPU, failed_attempt, record, result

WIDTH = 80
LONG_AGENT = "claude-code-with-a-rather-long-agent-name"


def lines(text: str) -> list[str]:
    return text.splitlines()


def assert_fits(text: str, width: int = WIDTH) -> None:
    too_long = [line for line in lines(text) if len(line) > width]
    assert not too_long, f"{len(too_long)} lines wider than {width}: {too_long[:2]}"


def assert_whole(text: str, numbers: list[str]) -> None:
    """Each number is printed on one line in one piece: never ellipsized (`3.4e-…`) or folded."""
    assert not re.search(r"\d…|…\d", text), f"a number cut with an ellipsis:\n{text}"
    for n in numbers:
        assert any(n in line for line in lines(text)), f"{n!r} is not printed whole:\n{text}"


@pytest.fixture
def filled(tmp_path, monkeypatch):
    """A store as a user's looks after a few runs: measured results of two agents (one with a
    long name), a failure, a tiny speedup, and a run on the cpu device."""
    monkeypatch.setenv("COLUMNS", str(WIDTH))
    path = tmp_path / "arena.db"
    monkeypatch.setenv("ARENA_DB", str(path))
    with Store.open(path) as store:
        a = store.create_run("sweep-with-a-long-descriptive-name")
        record(
            store,
            a,
            LONG_AGENT,
            result("attention/prefill_sliding_window_sinks", 1.234),
            result("gemm/fp8_blockscale_grouped_gemm", None),
            model="claude-opus-4-with-a-long-model-id",
        )
        record(
            store,
            a,
            "codex",
            result("attention/prefill_sliding_window_sinks", 0.000343),
            result("gemm/fp8_blockscale_grouped_gemm", 12.5),
        )
        b = store.create_run("sweep-again")
        record(
            store,
            b,
            "codex",
            result("attention/prefill_sliding_window_sinks", 2.5),
            result("gemm/fp8_blockscale_grouped_gemm", 11.0),
        )
        c = store.create_run("on-cpu")
        record(
            store,
            c,
            "reference",
            result("norm/add_rmsnorm", 0.000361, device=CPU, timing="cpu", sol=None),
        )
        for run in (a, b, c):
            store.finish_run(run)
        yield store, a, b, c


def run(capsys, *args: str) -> str:
    assert main(list(args)) == 0
    out = capsys.readouterr().out
    assert_fits(out)
    return out


def run_json(capsys, *args: str):  # type: ignore[no-untyped-def]
    assert main([*args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_tasks_list_is_one_line_per_task_at_80_columns(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", str(WIDTH))
    out = run(capsys, "tasks", "list")
    tasks = discover()
    for t in tasks:
        assert sum(1 for line in lines(out) if line.startswith(t.id + " ")) == 1, t.id
    header, rule, *body = lines(out)
    assert len([line for line in body if line.split() and "/" in line.split()[0]]) == len(tasks)
    for width in (
        130,
        220,
    ):  # every model from 120 columns, the signature's names from 200: still one line each
        monkeypatch.setenv("COLUMNS", str(width))
        assert main(["tasks", "list"]) == 0
        assert len(
            [
                line
                for line in lines(capsys.readouterr().out)
                if line.split() and "/" in line.split()[0]
            ]
        ) == len(tasks)
    data = run_json(capsys, "tasks", "list")
    assert [t["id"] for t in data] == [t.id for t in tasks] and all(t["baseline"] for t in data)


def test_tasks_show_keeps_every_workload_axis_whole(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", str(WIDTH))
    for task in discover():
        out = run(capsys, "tasks", "show", task.id)
        assert_whole(
            out, [str(v) for w in (*task.gpu.visible, *task.cpu.visible) for v in w.axes.values()]
        )
        shown = run_json(capsys, "tasks", "show", task.id)
        assert shown["id"] == task.id and len(shown["visible"]["gpu"]) == len(task.gpu.visible)


def test_in_place_outputs_read_as_in_place_in_tasks_show(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")  # the signature on one line
    assert main(["tasks", "show", "elementwise/rope"]) == 0
    out = capsys.readouterr().out
    assert (
        "q_out: bfloat16[T, Hq, d] (written in place into input `q`)" in out
        and "scalar" not in out.split("signature")[1].splitlines()[0]
    )


def test_runs_list_show_and_the_run_summary_keep_numbers_whole(capsys, filled):
    store, a, _b, c = filled
    out = run(capsys, "runs", "list")
    assert_whole(out, [a, c])
    out = run(capsys, "runs", "show", a)
    assert_whole(out, ["1.23×", "3.4e-04×", "12.50×", "50.0%"])
    assert "codex" in out and "claude-" in out  # who made each candidate
    shown = run_json(capsys, "runs", "show", a)
    assert shown["run"]["id"] == a and len(shown["jobs"]) == 4 and len(shown["attempts"]) == 2
    assert [r["id"] for r in run_json(capsys, "runs", "list")] == [r.id for r in store.list_runs()]
    console = Console(width=WIDTH, record=True, file=io.StringIO())  # recorded; nothing printed
    run_summary(store, a, console, {j.key for j in store.jobs(a)})
    text = console.export_text()
    assert_fits(text)
    assert_whole(text, ["1.23×", "3.4e-04×", "12.50×"])
    assert "codex" in text and "claude-" in text


def test_leaderboard_and_compare_keep_numbers_whole(capsys, filled):
    _store, a, b, _c = filled
    out = run(capsys, "leaderboard")
    assert_whole(
        out, ["1.23×", "11.73×", "50.0%"]
    )  # codex on gemm: the geometric mean of 12.5× and 11×
    assert "claude-" in out  # a long name folds; it is never dropped
    out = run(capsys, "compare", a, b)
    assert_whole(out, ["2.50×", "11.00×"])


def test_attempts_with_nothing_to_score_fit_80_columns_in_their_own_column(capsys, filled):
    store, a, _b, _c = filled
    failed_attempt(store, a, LONG_AGENT, "gemm/fp8_blockscale_grouped_gemm", "agent_error")
    out = run(capsys, "leaderboard", "--timing", "measured")
    header = next(line.split() for line in lines(out) if line.split()[:1] == ["rank"])
    assert header[-1] == "failures", "at 80 columns too, once an entry has failures"
    assert "violations" not in header  # none: the first column to go
    assert (
        "failures: failed results, and attempts whose agent produced nothing to score"
        in " ".join(out.split())
    )
    out = run(capsys, "runs", "show", a)
    assert "agent_error" in out and "(not scored)" in out
    assert_whole(out, ["1.23×", "3.4e-04×", "12.50×"])


def test_cpu_results_never_show_an_interpreted_speedup(capsys, filled):
    _store, _a, _b, c = filled
    for args in (("runs", "show", c), ("leaderboard", "--timing", "cpu")):
        out = run(capsys, *args)
        assert (
            "3.6e-04" not in out and figures.INTERPRETED_CELL in out and figures.INTERPRETED in out
        )
    shown = run_json(capsys, "runs", "show", c)
    assert shown["jobs"][0]["result"]["speedup"] == pytest.approx(
        0.000361
    )  # --json keeps every number


def _sim_result() -> Result:
    r = result("comm/all_reduce_add_rmsnorm", 3.456, timing="predicted")
    w = WorkloadFigures(
        label="T=8192,H=8192,W=8",
        axes={"T": 8192, "H": 8192, "W": 8},
        hidden=True,
        mode="predicted",
        candidate={"median_us": 1234.5, "band": 0.2},
        baseline={"median_us": 4266.0, "band": 0.2},
        speedup=3.456,
        roofline_us=900.0,
        sol_fraction=0.7291,
        band=0.25,
        bandwidth={"candidate_busbw_gbps": 123.4, "baseline_busbw_gbps": 45.6},
    )
    return replace(r, workloads=[w])


def test_eval_and_demo_summaries_fit_80_columns():
    console = Console(width=WIDTH, record=True, file=io.StringIO())  # recorded; nothing printed
    sim = _sim_result()
    cpu = replace(
        result("norm/add_rmsnorm", 0.000361, device=CPU, timing="cpu", sol=None), sol_fraction=None
    )
    render.result_summary(console, sim)
    render.result_summary(console, cpu)
    render.scores_table(console, [sim, cpu])
    text = console.export_text()
    assert_fits(text)
    assert_whole(
        text,
        [
            "1.23 ms ±20%",
            "4.27 ms ±20%",
            "3.46× ±25%",
            "72.9%",
            "10.0 µs ±1.0%",
            "15.0 µs ±1.0%",
            "466",
        ],
    )
    assert "3.6e-04" not in text and figures.INTERPRETED in text
    assert (
        "generalization" in text and "hidden shapes" in text
    )  # the stored word, defined once in the legend


def test_devices_keep_their_peaks_whole(capsys, monkeypatch):
    from arena_tui import devices_cmd

    monkeypatch.setenv("COLUMNS", str(WIDTH))
    monkeypatch.setenv(
        "XDG_CONFIG_HOME", "/nonexistent"
    )  # no hosts file: this machine's devices only
    monkeypatch.setattr(
        devices_cmd, "local_device_ids", lambda: []
    )  # no probe process: the simulated GPUs' rows
    out = run(capsys, "devices")
    assert_whole(out, ["788", "4.25", "141 GB", "sim:mi355x"])


def test_add_model_lists_the_workloads_it_would_add_whole(capsys, monkeypatch):
    from tests.conftest import FIXTURES

    monkeypatch.setenv("COLUMNS", str(WIDTH))
    out = run(
        capsys,
        "tasks",
        "add-model",
        str(FIXTURES / "models" / "gpt-oss-20b.json"),
        "--dry-run",
        "--no-probe",
    )
    assert (
        out.startswith("gpt-oss-20b: ") and "would add" in out
    )  # named after the file: the config has no _name_or_path
    assert_whole(out, ["H=2880", "V=201088"])


def test_json_commands_print_an_error_object_on_bad_input(capsys, filled):
    for args, says in (
        (["runs", "show", "r-nope"], "unknown run `r-nope`"),
        (["tasks", "show", "gemm/nope"], "unknown task `gemm/nope`"),
        (["leaderboard", "--run", "r-nope"], "unknown run `r-nope`"),
    ):
        assert main([*args, "--json"]) == 2, args
        out = capsys.readouterr().out
        assert says in json.loads(out)["error"] and out.count("\n") == 1
