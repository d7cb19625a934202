"""Agent runs that tell the truth. Before a run starts, the preflight checks every agent's CLI
(on PATH, answering `--version`), its endpoint (a cheap request with a short timeout) and every
device (parses, probes), and lists every problem at once, one line each naming the run-file
entry and the fix; nothing is stored. With `--skip-preflight` an agent that cannot work ends
its attempt `agent_error`: never scored, never a correct result on the leaderboard."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

from arena_tui.cli import main
from arena_tui.run_cmd import resume_command
from core.agents.base import AgentConfig
from core.orchestration import preflight
from core.orchestration.runfile import RunSpec
from core.store.db import Store
from tests.fakes.openai_server import FakeOpenAI

FAKE_BIN = Path(__file__).resolve().parent / "fakes" / "bin"


def dead_url() -> str:
    """A loopback port nobody listens on: connections are refused at once."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def run_file(tmp_path: Path, devices: str) -> Path:
    path = tmp_path / "agents.yaml"
    path.write_text(
        "name: truth\ntasks: [elementwise/axpy]\n"
        f"devices: {devices}\n"
        "agents:\n"
        "  - {name: claude, kind: claude, budget_s: 60}\n"
        f"  - {{name: local, kind: openai, model: m, budget_s: 60, options: {{base_url: '{dead_url()}', retries: 0}}}}\n"
    )
    return path


@pytest.fixture
def no_clis(tmp_path, monkeypatch):
    """A PATH without any agent CLI."""
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))


def test_a_missing_cli_a_dead_endpoint_and_a_device_typo_fail_preflight_with_three_lines(
    tmp_path, fixture_tasks, no_clis, capsys
):
    db = tmp_path / "arena.db"
    code = main(
        [
            "--db",
            str(db),
            "--tasks-dir",
            str(fixture_tasks),
            "run",
            str(run_file(tmp_path, "[cpu, 'cuda:O']")),
            "--headless",
        ]
    )
    err = capsys.readouterr().err
    assert code == 2
    lines = [line.strip() for line in err.splitlines() if line.startswith("  ")]
    assert len(lines) == 3, err
    claude, local, device = lines
    assert (
        claude.startswith("agents[0] (claude): the `claude` CLI is not on PATH")
        and "Fix: install it" in claude
    )
    assert (
        local.startswith("agents[1] (local): the endpoint http://127.0.0.1:")
        and "does not answer" in local
    )
    assert "Fix: start the server, or correct options.base_url" in local
    assert (
        device.startswith("devices[1] (cuda:O): unknown device `cuda:O`: use cpu, cuda:N")
        and "Fix:" in device
    )
    assert "3 problems (nothing was stored)" in err and "--skip-preflight" in err
    with Store.open(db) as store:
        assert store.list_runs() == [], "exit 2 before anything is stored"
    # With --json, stdout is one JSON error object that carries every problem.
    assert (
        main(
            [
                "--db",
                str(db),
                "--tasks-dir",
                str(fixture_tasks),
                "run",
                str(run_file(tmp_path, "[cpu, 'cuda:O']")),
                "--json",
            ]
        )
        == 2
    )
    error = json.loads(capsys.readouterr().out)["error"]
    assert (
        "3 problems" in error and "agents[0] (claude)" in error and "devices[1] (cuda:O)" in error
    )


def test_with_skip_preflight_the_attempts_end_agent_error_and_the_leaderboard_shows_no_correct_result(
    tmp_path, fixture_tasks, no_clis, capsys
):
    db = tmp_path / "arena.db"
    code = main(
        [
            "--db",
            str(db),
            "--tasks-dir",
            str(fixture_tasks),
            "run",
            str(run_file(tmp_path, "[cpu]")),
            "--skip-preflight",
        ]
    )
    out = capsys.readouterr().out
    assert code == 1, "a run whose agents never worked does not pass"
    assert (
        "agent_error (the `claude` CLI of agent 'claude' is not on PATH" in out
        and "Connection refused" in out
        and "not scored" in out
    )
    with Store.open(db) as store:
        run = store.list_runs()[0]
        attempts = store.attempts(run.id)
        assert [a.outcome for a in attempts] == ["agent_error", "agent_error"]
        assert all(a.state == "done" and a.job_id is None for a in attempts), (
            "the starter left in the workspace is not scored"
        )
        assert store.results(run.id) == []
    assert main(["--db", str(db), "leaderboard", "--json"]) == 0
    entries = json.loads(capsys.readouterr().out)["boards"]["cpu"]["entries"]
    assert {
        e["agent"]: (e["results"], e["correct"], e["failures"], e["agent_errors"]) for e in entries
    } == {"claude": (0, 0.0, 1, 1), "local": (0, 0.0, 1, 1)}
    assert main(["--db", str(db), "leaderboard"]) == 0
    table = capsys.readouterr().out
    assert "failures" in table and "100%" not in table, (
        "no correct result for agents that never ran"
    )
    assert main(["--db", str(db), "runs", "show", run.id]) == 0
    assert capsys.readouterr().out.count("agent_error") >= 2


def test_a_working_cli_and_endpoint_pass_and_unset_credentials_are_named(monkeypatch):
    monkeypatch.setenv("PATH", f"{FAKE_BIN}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("ARENA_TEST_UNSET_KEY", raising=False)
    with FakeOpenAI([]) as server:
        spec = RunSpec(
            name="ok",
            tasks=("elementwise/axpy",),
            devices=("sim:h200",),
            agents=(
                AgentConfig("claude", "claude"),
                AgentConfig("codex", "codex", options={"env": ["ARENA_TEST_UNSET_KEY"]}),
                AgentConfig("local", "openai", model="m", options={"base_url": server.base_url}),
                AgentConfig("ref", "reference"),
            ),
        )
        problems = preflight.check(spec, timeout_s=5)
        assert [r.path for r in server.requests] == ["/v1/models"], (
            "one cheap request, no completion"
        )
    assert [str(p) for p in problems] == [
        "agents[1] (codex): options.env names ARENA_TEST_UNSET_KEY, which is not set in the environment. "
        "Fix: export ARENA_TEST_UNSET_KEY=..., or drop it from options.env if codex is logged in another way"
    ]


def test_device_ids_that_do_not_parse_are_refused_even_without_the_preflight():
    spec = RunSpec(
        name="x", tasks=("elementwise/axpy",), devices=("cpu", "box1/cuda:x", "sim:h201")
    )
    assert [p.entry for p in preflight.device_problems(spec)] == [
        "devices[1] (box1/cuda:x)",
        "devices[2] (sim:h201)",
    ]


def test_ctrl_c_names_the_exact_resume_command():
    class Args:
        db, tasks_dir, hosts, skip_preflight = (
            Path("/tmp/my arena.db"),
            None,
            Path("hosts.yaml"),
            False,
        )

    assert (
        resume_command("r-20261201-abcd", Args())
        == "arena --db '/tmp/my arena.db' run --resume r-20261201-abcd --hosts hosts.yaml"
    )


def test_a_refused_key_is_named_with_its_variable(monkeypatch):
    monkeypatch.setenv("ARENA_TEST_KEY", "sk-wrong")
    with FakeOpenAI([], token="sk-right") as server:
        spec = RunSpec(
            name="x",
            tasks=("elementwise/axpy",),
            devices=("sim:h200",),
            agents=(
                AgentConfig(
                    "local",
                    "openai",
                    model="m",
                    options={"base_url": server.base_url, "api_key_env": "ARENA_TEST_KEY"},
                ),
            ),
        )
        [problem] = preflight.check(spec, timeout_s=5)
    assert (
        "refused the key (HTTP 401: Incorrect API key provided)" in problem.problem
        and problem.fix == "set a valid key in ARENA_TEST_KEY"
    )
