"""The attempt runner: a CLI agent as a sandboxed subprocess with a budget and caps, stopped
with everything it started; `arena check` over the workspace's socket, never showing a hidden
workload; an agent that cannot read the task's hidden workloads or reference from its sandbox.

The CLI agents here are tiny Python scripts written into tmp with an adapter of the test's own
(the real adapters' fakes live elsewhere); evaluations are stubbed except where the check
report itself is under test."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import sys
import textwrap
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import pytest

from core.agents.base import AgentConfig, Launch, Step
from core.agents.check_server import CheckServer, report_text
from core.agents.runner import Attempt, Usage, run_agent, run_attempt
from core.agents.workspace import Variant, make_workspace
from core.evaluation import sandbox
from core.model.result import STAGES, Result, StageResult, WorkloadFigures
from core.tasks.discovery import find_task

FAKE_HEADER = f"#!{os.path.realpath(sys.executable)}\n"


@dataclass
class FakeCli:
    """An adapter for a fake CLI: runs `script`; each stdout line is JSON {kind, ...Step fields}."""

    script: Path
    kind: str = "claude"

    def launch(self, config: AgentConfig, workspace: Path, prompt: str) -> Launch:
        return Launch(
            argv=[str(self.script)],
            env={"FAKE_MARKER": config.options.get("marker", "")},
            stdin=prompt.encode(),
        )

    def parse(self, line: str) -> list[Step]:
        try:
            data = json.loads(line)
        except ValueError:
            return [Step("text", text=line.strip(), raw=line.strip())]
        return [Step(**data)]


def write_fake(folder: Path, body: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "fake-agent"
    path.write_text(FAKE_HEADER + textwrap.dedent(body))
    path.chmod(0o755)
    return path


def fake_result(
    task_id: str, visible: list[str], hidden: list[str] = (), status: str = "passed"
) -> Result:
    """A result as the harness would give it; `hidden` workloads carry hidden=True."""

    def figures(label: str, is_hidden: bool) -> WorkloadFigures:
        return WorkloadFigures(
            label=label,
            axes={},
            hidden=is_hidden,
            mode="wall",
            candidate={"median_us": 10.0},
            baseline={"median_us": 12.0},
            speedup=1.2,
            roofline_us=None,
            sol_fraction=None,
        )

    stages = [StageResult(n, status="passed", seconds=0.1) for n in STAGES]
    stages[1].workloads = [
        {
            "label": label,
            "axes": {},
            "passed": True,
            "message": None,
            "worst": {"output": "y", "max_abs_err": 1e-7},
        }
        for label in visible
    ]
    stages[2].workloads = [
        {"label": label, "axes": {}, "passed": True, "message": None, "worst": None}
        for label in hidden
    ]
    return Result(
        task_id=task_id,
        candidate_sha256="0" * 64,
        device={"id": "cpu", "model": "test", "vendor": "cpu"},
        timing_kind="cpu",
        status=status,
        failed_stage=None,
        stages=stages,
        workloads=[figures(v, False) for v in visible] + [figures(h, True) for h in hidden],
        speedup=1.2,
        sol_fraction=None,
        sol_source=None,
        points=240.0,
    )


@pytest.fixture
def axpy(fixture_tasks):
    return find_task("elementwise/axpy", fixture_tasks)


def attempt_for(task, **config) -> Attempt:
    base = dict(name="fake", kind="claude", budget_s=30.0)
    return Attempt(
        id="r-test-0000/1",
        run_id="r-test-0000",
        agent=AgentConfig(**{**base, **config}),
        task=task,
        device="cpu",
        variant=Variant(),
    )


def processes_with(marker: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            try:
                data = (
                    Path(f"/proc/{entry}/cmdline").read_bytes()
                    + Path(f"/proc/{entry}/environ").read_bytes()
                )
            except OSError:
                continue
            if marker.encode() in data:
                found.append(int(entry))
    return found


def stub_evaluate(visible_labels: list[str]):
    calls: list[tuple[Path, bool]] = []

    async def evaluate(candidate: Path, visible_only: bool, on_event) -> Result:
        calls.append((candidate, visible_only))
        return fake_result("elementwise/axpy", visible_labels)

    return evaluate, calls


# --- budgets and caps --------------------------------------------------------------------------


def test_a_hung_agent_is_stopped_at_its_budget_with_everything_it_started(tmp_path, axpy):
    marker = f"arena-fake-{secrets.token_hex(4)}"
    script = write_fake(
        tmp_path / "bin",
        """
        import json, os, subprocess, sys, time
        print(json.dumps({"kind": "text", "text": "working"}), flush=True)
        open("solution.py", "a").write("\\n# a first edit\\n")
        # a child in the group, and a daemon that left it: both must die with the agent
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        subprocess.Popen([sys.executable, "-c", "import os, time; os.setsid(); time.sleep(600)"], start_new_session=True)
        time.sleep(600)
    """,
    )
    attempt = attempt_for(axpy, budget_s=3.0, options={"marker": marker})
    evaluate, calls = stub_evaluate(["N=64,D=128"])
    seen = []
    started = time.monotonic()
    outcome = asyncio.run(
        run_attempt(attempt, FakeCli(script), tmp_path / "attempt", evaluate, seen.append)
    )
    elapsed = time.monotonic() - started
    assert outcome.agent.stop_reason == "budget", (outcome.agent.error, seen)
    assert elapsed < 3.0 + 15, "stopped at the budget, not when the agent pleased"
    time.sleep(0.5)
    assert processes_with(marker) == [], "no process the agent started outlives it"
    assert [e.seq for e in seen] == list(range(1, len(seen) + 1)) and all(
        e.attempt == attempt.id and e.agent == "fake" for e in seen
    )
    assert seen[0].kind == "text" and seen[0].text == "working"
    assert seen[-1].kind == "error" and "time budget" in seen[-1].text
    assert calls == [(outcome.submission, False)], (
        "the final solution is evaluated on all workloads"
    )
    assert outcome.result.status == "passed"


def test_the_cost_cap_stops_the_agent(tmp_path, axpy):
    script = write_fake(
        tmp_path / "bin",
        """
        import json, time
        for i in range(1, 100):
            print(json.dumps({"kind": "usage", "input_tokens": 1000 * i, "output_tokens": 100 * i, "cost_usd": 0.1 * i, "cumulative": True}), flush=True)
            time.sleep(0.05)
        time.sleep(600)
    """,
    )
    attempt = attempt_for(axpy, max_cost_usd=0.35)
    evaluate, _ = stub_evaluate(["N=64,D=128"])
    seen = []
    workspace = make_workspace(tmp_path / "attempt", axpy, "cpu", Variant(), 30.0)
    outcome = asyncio.run(run_agent(attempt, FakeCli(script), workspace, evaluate, seen.append))
    assert outcome.stop_reason == "cost_cap"
    assert 0.35 < outcome.usage.cost_usd < 0.8, "stopped soon after the cap was passed"
    assert "cost" in seen[-1].text and seen[-1].kind == "error"


def test_usage_counts_cumulative_reports_once_and_sums_increments():
    usage = Usage()
    for step in (
        Step("usage", input_tokens=10, output_tokens=5),
        Step("usage", input_tokens=20, output_tokens=5),
        Step("usage", input_tokens=30, output_tokens=10, cost_usd=0.5, cumulative=True),
    ):
        usage.add(step)
    assert usage.tokens == 40 and usage.cost_usd == 0.5


def test_the_token_cap_stops_an_in_process_agent(tmp_path, axpy):
    class Chatty:
        kind = "openai"

        async def run(self, config, workspace, prompt, emit, check) -> None:
            for _ in range(1000):
                emit(Step("usage", input_tokens=500, output_tokens=500))
                await asyncio.sleep(0.01)

    attempt = attempt_for(axpy, kind="openai", max_tokens=5000)
    evaluate, _ = stub_evaluate([])
    workspace = make_workspace(tmp_path / "attempt", axpy, "cpu", Variant(), 30.0)
    outcome = asyncio.run(run_agent(attempt, Chatty(), workspace, evaluate))
    assert outcome.stop_reason == "token_cap" and 5000 < outcome.usage.tokens <= 7000


def test_an_agent_that_crashes_before_acting_ends_agent_error_and_is_not_scored(tmp_path, axpy):
    script = write_fake(
        tmp_path / "bin",
        """
        import sys
        print("not json at all", flush=True)
        print("Error: connect ECONNREFUSED 127.0.0.1:443", file=sys.stderr)
        sys.exit(3)
    """,
    )
    evaluate, calls = stub_evaluate(["N=64,D=128"])
    seen = []
    outcome = asyncio.run(
        run_attempt(attempt_for(axpy), FakeCli(script), tmp_path / "attempt", evaluate, seen.append)
    )
    assert outcome.agent.stop_reason == "crashed" and outcome.agent.exit_status == 3
    assert seen[0].raw == "not json at all", "an unparseable line is kept verbatim"
    assert (
        outcome.agent.outcome == "agent_error"
        and "status 3" in outcome.agent.verdict.reason
        and "ECONNREFUSED" in outcome.agent.verdict.reason
    )
    assert calls == [] and outcome.result is None, (
        "the starter left in the workspace is not scored as the agent's work"
    )


def test_an_agent_that_crashes_after_editing_is_still_scored(tmp_path, axpy):
    script = write_fake(
        tmp_path / "bin",
        """
        import sys
        open("solution.py", "a").write("\\n# edited\\n")
        sys.exit(3)
    """,
    )
    evaluate, calls = stub_evaluate(["N=64,D=128"])
    outcome = asyncio.run(
        run_attempt(attempt_for(axpy), FakeCli(script), tmp_path / "attempt", evaluate)
    )
    assert outcome.agent.stop_reason == "crashed" and outcome.agent.outcome == "scored"
    assert len(calls) == 1 and outcome.result.status == "passed"


def test_a_missing_cli_ends_agent_error_naming_it(tmp_path, axpy):
    outcome = asyncio.run(
        run_attempt(
            attempt_for(axpy),
            FakeCli(tmp_path / "no-such-agent"),
            tmp_path / "attempt",
            stub_evaluate([])[0],
        )
    )
    assert outcome.agent.outcome == "agent_error" and outcome.result is None
    assert "no-such-agent` CLI of agent 'fake' is not on PATH" in outcome.agent.verdict.reason


def test_an_agent_that_ends_without_changing_solution_py_is_no_submission(tmp_path, axpy):
    script = write_fake(
        tmp_path / "bin",
        """
        import json
        print(json.dumps({"kind": "tool_call", "tool": "Bash", "arguments": {"command": "ls"}}), flush=True)
        print(json.dumps({"kind": "final", "text": "I looked around"}), flush=True)
    """,
    )
    evaluate, calls = stub_evaluate(["N=64,D=128"])
    outcome = asyncio.run(
        run_attempt(attempt_for(axpy), FakeCli(script), tmp_path / "attempt", evaluate)
    )
    assert outcome.agent.stop_reason == "finished" and outcome.agent.outcome == "no_submission"
    assert calls == [] and outcome.result is None


def test_an_endpoint_error_of_an_in_process_agent_is_agent_error(tmp_path, axpy):
    class Refused:
        kind = "openai"

        async def run(self, config, workspace, prompt, emit, check) -> None:
            emit(
                Step(
                    "error",
                    text="http://127.0.0.1:9/v1/chat/completions: [Errno 111] Connection refused",
                    is_error=True,
                )
            )

    outcome = asyncio.run(
        run_attempt(
            attempt_for(axpy, kind="openai"), Refused(), tmp_path / "attempt", stub_evaluate([])[0]
        )
    )
    assert outcome.agent.stop_reason == "finished", "the loop returned by itself"
    assert (
        outcome.agent.outcome == "agent_error"
        and "Connection refused" in outcome.agent.verdict.reason
    )


def test_the_unchanged_starter_submitted_on_purpose_is_scored_and_labelled(tmp_path, axpy):
    class SubmitsStarter:
        kind = "reference"

        async def run(self, config, workspace, prompt, emit, check) -> None:
            solution = workspace / "solution.py"
            solution.write_text(solution.read_text())  # the same text, written on purpose
            emit(Step("tool_result", text=await check()))

    evaluate, calls = stub_evaluate(["N=64,D=128"])
    outcome = asyncio.run(
        run_attempt(
            attempt_for(axpy, kind="reference"), SubmitsStarter(), tmp_path / "attempt", evaluate
        )
    )
    assert outcome.agent.outcome == "starter" and outcome.result is not None


def test_an_agent_that_finishes_is_recorded_finished(tmp_path, axpy):
    script = write_fake(
        tmp_path / "bin",
        """
        import json
        open("solution.py", "a").write("\\n# edited by the agent\\n")
        print(json.dumps({"kind": "final", "text": "done"}), flush=True)
    """,
    )
    evaluate, _ = stub_evaluate(["N=64,D=128"])
    outcome = asyncio.run(
        run_attempt(attempt_for(axpy), FakeCli(script), tmp_path / "attempt", evaluate)
    )
    assert outcome.agent.stop_reason == "finished" and outcome.agent.exit_status == 0
    assert outcome.submission.read_text().endswith("# edited by the agent\n"), (
        "what is scored is what the agent left"
    )


# --- arena check --------------------------------------------------------------------------------


def test_the_check_report_never_names_a_hidden_workload():
    text = report_text(
        fake_result("elementwise/axpy", ["N=64,D=128"], hidden=["N=33,D=100", "N=118,D=100"])
    )
    assert "N=64,D=128" in text
    assert "N=33" not in text and "N=118" not in text and "generalization" not in text


def test_arena_check_through_the_socket_evaluates_visible_workloads_only(
    tmp_path, axpy, cpu_evaluator, monkeypatch, capsys
):
    """The real pipeline on the fixture task: the check job holds no hidden workload, the
    report shows the visible ones, and the CLI client reaches the socket even at a path longer
    than a socket address holds."""
    from arena_tui.cli import main

    deep = tmp_path.joinpath(*["a-rather-long-folder-name"] * 5)
    ws = make_workspace(deep / "attempt", axpy, "cpu", Variant(), 600)
    assert len(str(ws.socket)) > 108
    seen_events = []

    async def evaluate(candidate: Path, on_event) -> Result:
        def both(e):
            seen_events.append(e)
            on_event(e)

        return await cpu_evaluator.aevaluate(axpy, candidate, on_event=both, visible_only=True)

    async def scenario() -> int:
        async with CheckServer(ws.socket, ws.submissions, evaluate):
            monkeypatch.setenv("ARENA_CHECK_SOCKET", str(ws.socket))
            return await asyncio.to_thread(main, ["check"])

    code = asyncio.run(scenario())
    captured = capsys.readouterr()
    assert code == 0, captured.err
    hidden = [w.label for w in axpy.workloads(cpu=True).hidden.fixed]
    checked = [e.workload for e in seen_events if hasattr(e, "workload")]
    assert checked and not set(checked) & set(hidden), "no hidden workload was in the check's job"
    assert not any(
        getattr(e, "stage", None) == "generalization" and getattr(e, "workload", None)
        for e in seen_events
    )
    for label in ("N=64,D=128", "N=16,D=256"):
        assert label in captured.out
    for label in hidden:
        assert label not in captured.out and label not in captured.err
    assert "speedup" in captured.out and "compile" in captured.out
    assert (ws.submissions / "check-001" / "solution.py").is_file(), "the checked file is kept"


def test_arena_check_outside_an_attempt_says_so(monkeypatch, capsys):
    from arena_tui.cli import main

    monkeypatch.delenv("ARENA_CHECK_SOCKET", raising=False)
    assert main(["check"]) == 2
    assert "ARENA_CHECK_SOCKET" in capsys.readouterr().err


# --- the agent's sandbox ------------------------------------------------------------------------


def require_sandbox() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        status = sandbox.sandbox_status()
    if sandbox.is_sandboxed(status):
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI must run the agent sandbox test, but {status}")
    pytest.skip(status)


def test_an_agent_cannot_read_hidden_workloads_or_the_reference_from_its_sandbox(
    tmp_path, axpy, monkeypatch
):
    require_sandbox()
    monkeypatch.delenv(sandbox.SWITCH, raising=False)
    monkeypatch.setenv("SECRET_TOKEN_OF_THE_HOST", "do-not-leak")
    store = Path(os.environ["ARENA_DB"])
    store.parent.mkdir(parents=True, exist_ok=True)
    store.write_text("the results store")
    targets = {
        "task_yaml": str(axpy.file("task.yaml")),
        "reference": str(axpy.file("reference.py")),
        "bundled_reference": str(
            Path(__file__).resolve().parent.parent
            / "tasks"
            / "activation"
            / "silu_mul"
            / "reference.py"
        ),
        "store": str(store),
        "checkout_tests": str(Path(__file__).resolve()),
    }
    script = write_fake(
        tmp_path / "bin",
        f"""
        import json, os, subprocess
        targets = {json.dumps(targets)}
        seen = {{}}
        for name, path in targets.items():
            try:
                seen[name] = open(path).read()[:200]
            except OSError as exc:
                seen[name] = "unreadable: " + type(exc).__name__
        seen["workspace"] = sorted(os.listdir("."))
        open("solution.py", "a").write("# the agent can write here\\n")
        seen["home"] = os.environ.get("HOME")
        seen["secret"] = os.environ.get("SECRET_TOKEN_OF_THE_HOST")
        check = subprocess.run(["arena", "check"], capture_output=True, text=True)
        seen["check"] = [check.returncode, check.stdout, check.stderr[-2000:]]
        print(json.dumps({{"kind": "text", "text": json.dumps(seen)}}), flush=True)
    """,
    )
    evaluate, calls = stub_evaluate(["N=64,D=128", "N=16,D=256"])
    seen = []
    outcome = asyncio.run(
        run_attempt(
            attempt_for(axpy, budget_s=60.0),
            FakeCli(script),
            tmp_path / "attempt",
            evaluate,
            seen.append,
        )
    )
    assert sandbox.is_sandboxed(outcome.agent.sandbox_status or ""), outcome.agent.sandbox_status
    report = json.loads(next(e.text for e in seen if e.kind == "text" and e.text.startswith("{")))
    for name in targets:
        assert report[name] in ("",) or report[name].startswith("unreadable"), (
            f"{name} was readable: {report[name]!r}"
        )
    assert "N=33" not in json.dumps(report)
    assert report["workspace"] == [".arena-check.sock", "PROMPT.md", "solution.py"]
    assert report["home"] == str((tmp_path / "attempt" / "home").resolve())
    assert report["secret"] is None, "the arena's environment does not leak into the agent's"
    code, out, err = report["check"]
    assert code == 0 and "N=64,D=128" in out, err
    assert [visible for _, visible in calls] == [True, False], (
        "one check (visible only), then the final evaluation"
    )
    assert outcome.submission.read_text().endswith("# the agent can write here\n")
