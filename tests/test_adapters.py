"""The coding-agent adapters (core/agents/), read as documentation of each tool's format.

For every CLI agent (Claude Code, Codex, Cursor, Gemini CLI): the command line `launch()`
builds (docs/agents.md), what `parse()` makes of the stream recorded in that tool's documented
format (tests/fixtures/transcripts/), that a malformed line never raises and is kept verbatim,
and that the fake executable in tests/fakes/bin/ accepts the adapter's command line, streams
something the adapter understands and writes solution.py, while a command line missing a
required flag is refused with exit status 2, as the real tool would refuse it.

Then the registry (`adapter(kind)`), and the OpenAI-compatible tool loop against a scripted
server on loopback (tests/fakes/openai_server.py): an episode, the workspace confinement, auth
and the turn limit. No network, no API keys.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from core.agents import (
    AGENT_KINDS,
    AgentConfig,
    CliAgent,
    InProcessAgent,
    Launch,
    Step,
    UnknownAgentKind,
    adapter,
    register,
)
from core.agents.offline import ReferenceAgent, ReplayAgent
from core.agents.openai_compat import OpenAICompatAgent
from tests.fakes.fake_cli import GARBAGE
from tests.fakes.openai_server import FakeOpenAI, answer, failure, tool_calls

TESTS = Path(__file__).resolve().parent
FAKE_BIN = TESTS / "fakes" / "bin"
TRANSCRIPTS = TESTS / "fixtures" / "transcripts"
PROMPT = "Optimize the kernel in solution.py."
STARTER = "import torch\n\n\ndef run(x, b):\n    return torch.add(b, x, alpha=2)  # the starter\n"
# what every recorded episode writes into solution.py (Codex does not print it: codex.files.json)
RECORDED_SOLUTION = json.loads((TRANSCRIPTS / "codex.files.json").read_text())["item_2"][
    "solution.py"
]
CHECK_REPORT = "compile      passed  0.4 s\ncorrectness  passed  3/3 visible workloads\nsolution.py passes the visible checks"

CLI_KINDS = ("claude", "codex", "cursor", "gemini")
FAKE_NAME = {"claude": "claude", "codex": "codex", "cursor": "cursor-agent", "gemini": "gemini"}
RECORDING = {
    "claude": "claude.jsonl",
    "codex": "codex.jsonl",
    "cursor": "cursor.jsonl",
    "gemini": "gemini.jsonl",
}


# --- helpers -------------------------------------------------------------------------------------


def config(kind: str, model: str | None = None, **options) -> AgentConfig:
    return AgentConfig(name=f"{kind}-test", kind=kind, model=model, options=options)


def lines_of(recording: str) -> list[str]:
    return [line for line in (TRANSCRIPTS / recording).read_text().splitlines() if line.strip()]


def parse_all(kind: str, lines: list[str]) -> list[Step]:
    """All steps of a stream, parsed by one fresh adapter as the runner does for one attempt."""
    agent = adapter(kind)
    return [step for line in lines for step in agent.parse(line)]


def kinds(steps: list[Step]) -> list[str]:
    return [s.kind for s in steps]


def calls(steps: list[Step]) -> list[tuple[str | None, str | None]]:
    return [(s.tool, s.call_id) for s in steps if s.kind == "tool_call"]


def result_ids(steps: list[Step]) -> list[str | None]:
    return [s.call_id for s in steps if s.kind == "tool_result"]


def without(argv: list[str], flag: str, count: int) -> list[str]:
    """argv with `flag` (and the `count - 1` values after it) taken out."""
    at = argv.index(flag)
    return argv[:at] + argv[at + count :]


def run_fake(
    launch: Launch, workspace: Path, argv: list[str] | None = None, **env: str
) -> subprocess.CompletedProcess[str]:
    """The fake CLI started the way the runner starts the real one: argv[0] looked up on PATH
    (tests/fakes/bin first), in the workspace, stdin from /dev/null unless the launch feeds it."""
    environment = {
        **os.environ,
        **launch.env,
        **env,
        "PATH": f"{FAKE_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    for knob in (
        "FAKE_AGENT_HANG",
        "FAKE_AGENT_GARBAGE",
        "FAKE_AGENT_EXEC",
        "FAKE_AGENT_DELAY",
        "FAKE_AGENT_EXIT",
        "FAKE_AGENT_TRANSCRIPT",
    ):
        if knob not in env:
            environment.pop(knob, None)
    stdin = (
        {"input": launch.stdin.decode()}
        if launch.stdin is not None
        else {"stdin": subprocess.DEVNULL}
    )
    return subprocess.run(
        argv or launch.argv,
        cwd=workspace,
        env=environment,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        **stdin,
    )


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "solution.py").write_text(STARTER)
    return ws


# --- Claude Code ---------------------------------------------------------------------------------


def test_claude_launch_is_print_mode_stream_json_verbose_without_permission_prompts(workspace):
    launch = adapter("claude").launch(
        config(
            "claude",
            "claude-sonnet-4-5",
            max_turns=40,
            args=["--append-system-prompt", "Be brief."],
        ),
        workspace,
        PROMPT,
    )
    assert launch.argv == [
        "claude",
        "-p",
        PROMPT,
        "--output-format",
        "stream-json",
        "--verbose",  # stream-json with -p fails without --verbose
        "--permission-mode",
        "bypassPermissions",  # headless: nobody approves an edit or a command
        "--model",
        "claude-sonnet-4-5",
        "--max-turns",
        "40",
        "--append-system-prompt",
        "Be brief.",  # options.args, verbatim, last
    ]
    assert launch.stdin is None

    bare = adapter("claude").launch(
        config("claude", permission_mode="acceptEdits"), workspace, PROMPT
    )
    assert "--model" not in bare.argv and "--max-turns" not in bare.argv
    assert bare.argv[bare.argv.index("--permission-mode") + 1] == "acceptEdits"
    with pytest.raises(ValueError, match="permission_mode"):
        adapter("claude").launch(config("claude", permission_mode="yolo"), workspace, PROMPT)


def test_claude_stream_json(tmp_path):
    """system init (nothing), assistant content blocks (thinking, text, tool_use, each message's
    usage once per message id), user tool_result blocks, and a result with the session totals."""
    steps = parse_all("claude", lines_of("claude.jsonl"))
    assert kinds(steps) == [
        "thinking",
        "usage",
        "text",
        "tool_call",  # msg_01A arrives as three lines, its usage counted once
        "tool_result",
        "tool_call",
        "usage",
        "tool_result",  # msg_01B: Write
        "tool_call",
        "usage",
        "tool_result",  # msg_01C: Bash `arena check`
        "text",
        "usage",  # msg_01D: the answer
        "usage",
        "final",  # result: session totals, then the answer
    ]
    assert calls(steps) == [
        ("Read", "toolu_01Read"),
        ("Write", "toolu_01Write"),
        ("Bash", "toolu_01Bash"),
    ]
    assert result_ids(steps) == ["toolu_01Read", "toolu_01Write", "toolu_01Bash"], (
        "tool_use_id pairs each result with its call"
    )
    write, bash = (s for s in steps if s.tool in ("Write", "Bash"))
    assert write.arguments == {
        "file_path": "/tmp/arena/ws-attempt-1/solution.py",
        "content": RECORDED_SOLUTION,
    }
    assert bash.arguments["command"] == "arena check"
    results = [s for s in steps if s.kind == "tool_result"]
    assert results[2].text == CHECK_REPORT, "a content list of text blocks is joined"
    assert not any(s.is_error for s in steps)

    usage = [s for s in steps if s.kind == "usage"]
    # input = input_tokens + cache writes + cache reads (what the model read, the OpenAI convention)
    assert [(u.input_tokens, u.output_tokens, u.cumulative) for u in usage[:-1]] == [
        (4 + 5210 + 12020, 1, False),
        (6 + 640 + 17230, 3, False),
        (5 + 310 + 17870, 2, False),
        (4 + 220 + 18180, 1, False),
    ]
    total = usage[-1]
    assert (total.input_tokens, total.output_tokens, total.cost_usd, total.cumulative) == (
        19 + 6380 + 65300,
        912,
        0.0421,
        True,
    )
    assert all(u.cost_usd is None for u in usage[:-1]), "only the result reports cost"
    assert steps[-1] == Step(
        "final",
        text="solution.py now computes 2x + b in one PyTorch expression and passes the visible checks.",
    )


def test_claude_errors_and_notices():
    agent = adapter("claude")
    [final] = agent.parse(
        json.dumps(
            {"type": "result", "subtype": "error_max_turns", "is_error": True, "num_turns": 40}
        )
    )
    assert final.kind == "final" and final.is_error and final.text == "error_max_turns"
    [usage, final] = agent.parse(
        json.dumps(
            {
                "type": "result",
                "subtype": "error_during_execution",
                "is_error": True,
                "errors": ["API Error: 529 overloaded"],
                "total_cost_usd": 0.5,
                "usage": {"input_tokens": 10, "output_tokens": 2},
            }
        )
    )
    assert usage.cost_usd == 0.5 and usage.cumulative and final.is_error and "529" in final.text
    steps = agent.parse(
        json.dumps(
            {
                "type": "assistant",
                "error": "authentication_failed",
                "message": {
                    "id": "msg_X",
                    "content": [{"type": "text", "text": "Invalid API key"}],
                },
            }
        )
    )
    assert (
        kinds(steps) == ["text", "error"]
        and steps[1].is_error
        and steps[1].text == "authentication_failed"
    )
    assert agent.parse('{"type":"system","subtype":"compact_boundary"}') == [
        Step(
            "text",
            text="[system: compact_boundary]",
            raw='{"type":"system","subtype":"compact_boundary"}',
        )
    ]
    assert agent.parse('{"type":"stream_event","event":{"type":"content_block_delta"}}') == [], (
        "partial deltas: the full message follows"
    )
    assert agent.parse('{"type":"user","message":{"role":"user","content":"the prompt"}}') == [], (
        "the prompt echoed back"
    )
    [thinking] = agent.parse(
        '{"type":"assistant","message":{"content":[{"type":"redacted_thinking","data":"..."}]}}'
    )
    assert thinking == Step(
        "thinking",
        text="[redacted thinking]",
        raw='{"type":"assistant","message":{"content":[{"type":"redacted_thinking","data":"..."}]}}',
    )
    [failed] = agent.parse(
        json.dumps(
            {
                "type": "user",
                "message": {
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": "t1",
                            "content": "Exit code 1",
                            "is_error": True,
                        }
                    ]
                },
            }
        )
    )
    assert failed.kind == "tool_result" and failed.is_error and failed.call_id == "t1"


# --- Codex ---------------------------------------------------------------------------------------


def test_codex_launch_is_exec_json_in_a_writable_sandbox_with_the_prompt_after_double_dash(
    workspace,
):
    launch = adapter("codex").launch(
        config("codex", "gpt-5-codex", args="-c model_reasoning_effort=high"), workspace, PROMPT
    )
    assert launch.argv == [
        "codex",
        "exec",
        "--json",
        "--sandbox",
        "workspace-write",  # the default sandbox is read-only: no edit of solution.py
        "--skip-git-repo-check",  # a workspace is no git repository
        "-m",
        "gpt-5-codex",
        "-c",
        "model_reasoning_effort=high",  # options.args as one string, split like a shell
        "--",
        PROMPT,  # `--` ends the options: no prompt is read as a flag
    ]
    assert launch.stdin is None, "stdin from /dev/null, or codex waits for more input on it"
    dashed = adapter("codex").launch(config("codex"), workspace, "--fast please")
    assert dashed.argv[-2:] == ["--", "--fast please"] and "-m" not in dashed.argv
    with pytest.raises(ValueError, match="sandbox"):
        adapter("codex").launch(config("codex", sandbox="none"), workspace, PROMPT)


def test_codex_json_items():
    """thread/turn markers (nothing), item.started/completed {item: {id, type}}: reasoning,
    command_execution, file_change, agent_message; turn.completed with the running usage."""
    steps = parse_all("codex", lines_of("codex.jsonl"))
    assert kinds(steps) == [
        "thinking",
        "tool_call",
        "tool_result",  # command_execution: started, then completed
        "tool_call",
        "tool_result",  # file_change: only completed, both from one line
        "tool_call",
        "tool_result",
        "text",  # agent_message
        "usage",
        "final",  # turn.completed
    ]
    assert calls(steps) == [("shell", "item_1"), ("apply_patch", "item_2"), ("shell", "item_3")]
    assert result_ids(steps) == ["item_1", "item_2", "item_3"], (
        "the item id pairs a call with its result"
    )
    shell, patch, check = (s for s in steps if s.kind == "tool_call")
    assert shell.arguments == {"command": "bash -lc 'cat solution.py'"}
    assert patch.arguments == {"changes": ["update /tmp/arena/ws-attempt-1/solution.py"]}
    assert [s.text for s in steps if s.kind == "tool_result"][2] == CHECK_REPORT + "\n"
    usage = steps[-2]
    assert (usage.input_tokens, usage.output_tokens, usage.cost_usd, usage.cumulative) == (
        48213,
        1375,
        None,
        True,
    ), "a running total (cached input already inside input_tokens); Codex reports no cost"
    assert steps[-1] == Step(
        "final", text="Rewrote solution.py as `x * 2 + b`; `arena check` passes."
    )


def test_codex_first_json_shape_used_item_type_and_assistant_message():
    agent = adapter("codex")
    assert (
        agent.parse(
            '{"type":"item.started","item":{"id":"item_0","item_type":"assistant_message","text":""}}'
        )
        == []
    )
    [text] = agent.parse(
        '{"type":"item.completed","item":{"id":"item_0","item_type":"assistant_message","text":"done"}}'
    )
    assert text.kind == "text" and text.text == "done"
    [tool_call] = agent.parse(
        '{"type":"item.started","item":{"id":"item_1","item_type":"command_execution","command":"ls","status":"in_progress"}}'
    )
    assert (
        agent.parse(
            '{"type":"item.updated","item":{"id":"item_1","item_type":"command_execution","command":"ls","status":"in_progress"}}'
        )
        == []
    ), "one tool_call per item, however many updates"
    [result] = agent.parse(
        '{"type":"item.completed","item":{"id":"item_1","item_type":"command_execution","command":"ls","aggregated_output":"nope","exit_code":2,"status":"failed"}}'
    )
    assert (tool_call.call_id, result.call_id, result.is_error) == ("item_1", "item_1", True)
    assert agent.parse('{"type":"turn.completed","usage":{"input_tokens":5,"output_tokens":1}}')[
        -1
    ] == Step("final", text="done")


def test_codex_failures():
    agent = adapter("codex")
    [error] = agent.parse('{"type":"error","message":"Reconnecting... 1/5"}')
    assert error.kind == "error" and error.is_error, "transient trouble: an error, not the end"
    error, final = agent.parse('{"type":"turn.failed","error":{"message":"stream disconnected"}}')
    assert (error.kind, final.kind, final.is_error, final.text) == (
        "error",
        "final",
        True,
        "stream disconnected",
    )
    [call, result] = agent.parse(
        json.dumps(
            {
                "type": "item.completed",
                "item": {
                    "id": "m1",
                    "type": "mcp_tool_call",
                    "server": "docs",
                    "tool": "search",
                    "arguments": {"q": "triton"},
                    "error": {"message": "timeout"},
                    "status": "failed",
                },
            }
        )
    )
    assert (call.tool, call.arguments, result.is_error, result.text) == (
        "docs.search",
        {"q": "triton"},
        True,
        "timeout",
    )


def test_codex_legacy_msg_events():
    """Before openai/codex PR #4525: {"id", "msg": {"type", ...}} after a config line and the prompt."""
    lines = lines_of("codex_legacy.jsonl")
    assert json.loads(lines[1]) == {"prompt": "Optimize the kernel in solution.py."}
    steps = parse_all("codex", lines)  # the config header and the prompt carry nothing
    assert kinds(steps) == [
        "thinking",
        "tool_call",
        "tool_result",
        "tool_call",
        "tool_result",
        "tool_call",
        "tool_result",
        "usage",
        "text",
        "final",
    ]
    assert calls(steps) == [("shell", "call_A1"), ("apply_patch", "call_A2"), ("shell", "call_A3")]
    assert result_ids(steps) == ["call_A1", "call_A2", "call_A3"]
    assert steps[1].arguments == {"command": "bash -lc 'cat solution.py'"}, (
        "an argv list is joined like a shell"
    )
    assert steps[3].arguments == {"changes": ["/tmp/arena/ws-attempt-1/solution.py"]}
    usage = steps[7]
    assert (usage.input_tokens, usage.output_tokens, usage.cumulative) == (40100, 1200, True), (
        "token_count's total_token_usage, not last_token_usage"
    )
    assert steps[-1] == Step(
        "final", text="Rewrote solution.py as `x * 2 + b`; `arena check` passes.", raw=lines[-1]
    )


def test_codex_legacy_config_header_carries_nothing():
    # Releases before openai/codex#4525 print a summary of their configuration first.
    assert adapter("codex").parse(lines_of("codex_legacy.jsonl")[0]) == []


# --- Cursor --------------------------------------------------------------------------------------


def test_cursor_launch_is_print_mode_stream_json_forced(workspace):
    launch = adapter("cursor").launch(
        config("cursor", "sonnet-4.5", args="--resume 'chat 42'"), workspace, PROMPT
    )
    assert launch.argv == [
        "cursor-agent",
        "-p",
        PROMPT,
        "--output-format",
        "stream-json",
        "--force",  # without it, actions that need approval are rejected in print mode
        "--model",
        "sonnet-4.5",
        "--resume",
        "chat 42",
    ]
    assert launch.stdin is None


def test_cursor_stream_json():
    """system init and the echoed user prompt (nothing), thinking deltas gathered into one step,
    assistant messages, tool_call started/completed {<name>ToolCall: {args, result}}, result.
    Cursor reports no usage."""
    steps = parse_all("cursor", lines_of("cursor.jsonl"))
    assert kinds(steps) == [
        "thinking",
        "text",
        "tool_call",
        "tool_result",
        "tool_call",
        "tool_result",
        "tool_call",
        "tool_result",
        "text",
        "final",
    ]
    assert steps[0].text == "Read the starter, then replace it."
    assert calls(steps) == [
        ("read", "toolu_vrtx_01Read"),
        ("write", "toolu_vrtx_01Write"),
        ("shell", "toolu_vrtx_01Shell"),
    ]
    assert result_ids(steps) == ["toolu_vrtx_01Read", "toolu_vrtx_01Write", "toolu_vrtx_01Shell"]
    read, write, shell = (s for s in steps if s.kind == "tool_call")
    assert read.arguments == {"path": "solution.py"}
    assert write.arguments == {
        "path": "/tmp/arena/ws-attempt-1/solution.py",
        "fileText": RECORDED_SOLUTION,
    }, "toolCallId is dropped"
    assert shell.arguments["command"] == "arena check"
    results = [s for s in steps if s.kind == "tool_result"]
    assert results[0].text.startswith("import torch\nimport triton")
    assert results[1].text == "wrote /tmp/arena/ws-attempt-1/solution.py (6 lines)"
    assert results[2].text == CHECK_REPORT + "\n" and not any(r.is_error for r in results)
    assert "usage" not in kinds(steps)
    assert steps[-1].kind == "final" and not steps[-1].is_error
    assert (
        steps[-1].text
        == "I'll read the starter first.solution.py now computes `x * 2 + b` and passes `arena check`."
    )


def test_cursor_failed_tool_calls_and_results():
    agent = adapter("cursor")
    [result] = agent.parse(
        json.dumps(
            {
                "type": "tool_call",
                "subtype": "completed",
                "call_id": "c1",
                "tool_call": {
                    "writeToolCall": {
                        "args": {"path": "/etc/x"},
                        "result": {"rejected": {"reason": "outside the workspace"}},
                    }
                },
            }
        )
    )
    assert (result.call_id, result.is_error, result.text) == ("c1", True, "outside the workspace")
    [result] = agent.parse(
        json.dumps(
            {
                "type": "tool_call",
                "subtype": "completed",
                "call_id": "c2",
                "tool_call": {
                    "shellToolCall": {
                        "args": {"command": "arena check"},
                        "result": {"success": {"exitCode": 1, "stdout": "", "stderr": "FAILED"}},
                    }
                },
            }
        )
    )
    assert result.is_error and result.text == "FAILED", (
        "a shell command that exits non-zero is a failed call"
    )
    [call] = agent.parse(
        json.dumps(
            {
                "type": "tool_call",
                "subtype": "started",
                "call_id": "c3",
                "tool_call": {"function": {"name": "grep", "arguments": '{"pattern": "tl.load"}'}},
            }
        )
    )
    assert (call.tool, call.arguments) == ("grep", {"pattern": "tl.load"}), (
        "function calls carry JSON-string arguments"
    )
    [final] = agent.parse('{"type":"result","subtype":"error","is_error":true,"result":"aborted"}')
    assert final.kind == "final" and final.is_error


# --- Gemini CLI ----------------------------------------------------------------------------------


def test_gemini_launch_is_headless_stream_json_yolo(workspace):
    launch = adapter("gemini").launch(
        config("gemini", "gemini-2.5-pro", args=["--include-directories", "/data"]),
        workspace,
        PROMPT,
    )
    assert launch.argv == [
        "gemini",
        "-p",
        PROMPT,
        "--output-format",
        "stream-json",
        "--yolo",  # approve every tool call: headless, nothing else could
        "-m",
        "gemini-2.5-pro",
        "--include-directories",
        "/data",
    ]
    assert launch.stdin is None


def test_gemini_stream_json():
    """init and the user message (nothing), assistant message deltas (text steps as they come),
    tool_use / tool_result paired by tool_id, result with the session's stats."""
    steps = parse_all("gemini", lines_of("gemini.jsonl"))
    assert kinds(steps) == [
        "text",
        "text",
        "tool_call",
        "tool_result",
        "tool_call",
        "tool_result",
        "tool_call",
        "tool_result",
        "text",
        "text",
        "usage",
        "final",
    ]
    assert [s.text for s in steps[:2]] == ["I'll read the starter ", "first."], (
        "deltas are not held back"
    )
    assert calls(steps) == [
        ("read_file", "read_file-1764041271000-a1"),
        ("write_file", "write_file-1764041275000-b2"),
        ("run_shell_command", "run_shell_command-1764041279000-c3"),
    ]
    assert result_ids(steps) == [c for _, c in calls(steps)]
    assert steps[4].arguments == {
        "file_path": "/tmp/arena/ws-attempt-1/solution.py",
        "content": RECORDED_SOLUTION,
    }
    assert steps[7].text == CHECK_REPORT and not any(s.is_error for s in steps)
    usage = steps[-2]
    assert (usage.input_tokens, usage.output_tokens, usage.cost_usd, usage.cumulative) == (
        24610,
        1230,
        None,
        True,
    ), "Gemini reports no cost"
    assert steps[-1] == Step(
        "final", text="solution.py now computes `x * 2 + b` and passes `arena check`."
    ), "the answer: the assistant's text since the last tool call"


def test_gemini_errors():
    agent = adapter("gemini")
    [warning] = agent.parse(
        '{"type":"error","severity":"warning","message":"Loop detected, continuing"}'
    )
    assert warning.kind == "error" and not warning.is_error, "a warning does not fail the run"
    [error] = agent.parse('{"type":"error","severity":"error","message":"quota exceeded"}')
    assert error.is_error
    [result] = agent.parse(
        '{"type":"tool_result","tool_id":"t1","status":"error","error":{"type":"invalid_tool_params","message":"no such file"}}'
    )
    assert (result.call_id, result.is_error, result.text) == ("t1", True, "no such file")
    [final] = agent.parse(
        '{"type":"result","status":"error","error":{"type":"FatalTurnLimitedError","message":"turn limit reached"}}'
    )
    assert final == Step("final", text="turn limit reached", is_error=True, raw=final.raw)


# --- what every CLI adapter shares ---------------------------------------------------------------


@pytest.mark.parametrize(
    "recording",
    ["claude.jsonl", "codex.jsonl", "codex_legacy.jsonl", "cursor.jsonl", "gemini.jsonl"],
)
def test_each_line_is_kept_verbatim_once_on_its_first_step(recording):
    kind = recording.split(".")[0].split("_")[0]
    agent = adapter(kind)
    for line in lines_of(recording):
        steps = agent.parse(line)
        if steps:
            assert steps[0].raw == line, "the raw line rides on the line's first step"
            assert all(s.raw is None for s in steps[1:]), "… and only there, so it is stored once"


MALFORMED = [
    *GARBAGE,
    "",
    "   ",
    "{",
    '{"type": "assistant", "message": ',
    "[" * 100_000,
    '{"no_type": true}',
    "null",
    "\x00\xff garbage",
]


@pytest.mark.parametrize("kind", CLI_KINDS)
def test_malformed_lines_never_raise_and_keep_the_raw_line(kind):
    agent = adapter(kind)
    for line in MALFORMED:
        steps = agent.parse(line)
        if not line.strip():
            assert steps == [], "a blank line carries nothing"
            continue
        assert steps == [Step("text", text=line.strip(), raw=line.strip())], f"{line[:60]!r}"
    assert agent.parse(GARBAGE[-1])[0].raw == "x" * 100_000, (
        "a 100 000-character line is kept whole"
    )


@pytest.mark.parametrize("kind", CLI_KINDS)
def test_garbage_between_events_changes_nothing_else(kind):
    lines = lines_of(RECORDING[kind])
    mixed = [lines[0], *GARBAGE, *lines[1:]]
    steps = [s for s in parse_all(kind, mixed) if s.raw not in GARBAGE]
    assert steps == parse_all(kind, lines), "the adapter's state survives the garbage"


@pytest.mark.parametrize("kind", CLI_KINDS)
def test_api_keys_are_passed_through_by_name_never_by_value(kind, workspace, monkeypatch):
    usual = {
        "claude": "ANTHROPIC_API_KEY",
        "codex": "OPENAI_API_KEY",
        "cursor": "CURSOR_API_KEY",
        "gemini": "GEMINI_API_KEY",
    }[kind]
    monkeypatch.setenv(usual, "key-from-the-arena")
    monkeypatch.setenv("ARENA_TEST_EXTRA_KEY", "extra")
    monkeypatch.setenv("ARENA_TEST_UNRELATED_SECRET", "do-not-pass")
    monkeypatch.delenv("ARENA_TEST_UNSET_KEY", raising=False)
    launch = adapter(kind).launch(
        config(kind, env=["ARENA_TEST_EXTRA_KEY", "ARENA_TEST_UNSET_KEY"]), workspace, PROMPT
    )
    assert (
        launch.env[usual] == "key-from-the-arena" and launch.env["ARENA_TEST_EXTRA_KEY"] == "extra"
    )
    assert (
        "ARENA_TEST_UNRELATED_SECRET" not in launch.env and "ARENA_TEST_UNSET_KEY" not in launch.env
    )
    with pytest.raises(ValueError, match=r"options\.env"):
        adapter(kind).launch(config(kind, env={"KEY": "value"}), workspace, PROMPT)
    with pytest.raises(ValueError, match=r"options\.args"):
        adapter(kind).launch(config(kind, args={"--model": "x"}), workspace, PROMPT)


# --- the fake CLIs, run with the adapters' command lines ------------------------------------------


@pytest.mark.parametrize("kind", CLI_KINDS)
def test_the_fake_cli_accepts_the_command_line_streams_the_recording_and_writes_solution_py(
    kind, workspace, tmp_path
):
    launch = adapter(kind).launch(config(kind, "some-model"), workspace, PROMPT)
    argv_file = tmp_path / "argv.json"
    done = run_fake(launch, workspace, FAKE_AGENT_ARGV_FILE=str(argv_file))
    assert done.returncode == 0, done.stderr
    given = json.loads(argv_file.read_text())
    assert given["argv"] == [FAKE_NAME[kind], *launch.argv[1:]] and Path(given["cwd"]) == workspace
    assert given["stdin"] == "", "nothing on stdin"
    steps = parse_all(kind, done.stdout.splitlines())
    assert steps == parse_all(kind, lines_of(RECORDING[kind])), (
        "the stdout is the recording, parsed as such"
    )
    assert steps[-1].kind == "final" and not steps[-1].is_error
    assert {"tool_call", "tool_result"} <= set(kinds(steps))
    assert (workspace / "solution.py").read_text() == RECORDED_SOLUTION


@pytest.mark.parametrize("kind", CLI_KINDS)
def test_a_prompt_that_looks_like_a_flag_is_still_the_prompt(kind, workspace, tmp_path):
    prompt = "--fast: optimize solution.py"
    launch = adapter(kind).launch(config(kind), workspace, prompt)
    argv_file = tmp_path / "argv.json"
    done = run_fake(launch, workspace, FAKE_AGENT_ARGV_FILE=str(argv_file))
    assert done.returncode == 0, done.stderr
    assert any(arg.strip() == prompt for arg in json.loads(argv_file.read_text())["argv"])


@pytest.mark.parametrize("kind", CLI_KINDS)
def test_the_fake_cli_streams_garbage_the_adapter_survives(kind, workspace):
    done = run_fake(
        adapter(kind).launch(config(kind), workspace, PROMPT), workspace, FAKE_AGENT_GARBAGE="1"
    )
    assert done.returncode == 0, done.stderr
    steps = parse_all(kind, done.stdout.splitlines())
    raws = {s.raw for s in steps}
    assert all(g in raws for g in GARBAGE), "every malformed line is in the transcript verbatim"
    assert steps[-1].kind == "final"


REQUIRED = [
    ("claude", "-p", 1),  # print mode: the interactive UI needs a terminal
    ("claude", "--output-format", 2),
    ("claude", "--verbose", 1),  # stream-json with -p requires --verbose
    ("codex", "exec", 1),
    ("codex", "--json", 1),
    ("codex", "--skip-git-repo-check", 1),  # the workspace is no git repository
    ("cursor", "-p", 1),
    ("cursor", "--output-format", 2),
    ("gemini", "-p", 2),
    ("gemini", "--output-format", 2),
]


@pytest.mark.parametrize(
    ("kind", "flag", "count"), REQUIRED, ids=[f"{k}-{f.lstrip('-')}" for k, f, _ in REQUIRED]
)
def test_the_fake_cli_refuses_a_command_line_missing_a_required_flag(kind, flag, count, workspace):
    launch = adapter(kind).launch(config(kind), workspace, PROMPT)
    done = run_fake(launch, workspace, argv=without(launch.argv, flag, count))
    assert done.returncode == 2, done.stderr
    assert done.stdout == "" and done.stderr.strip()
    assert (workspace / "solution.py").read_text() == STARTER


PERMISSIONS = [
    ("claude", "--permission-mode", 2),
    ("codex", "--sandbox", 2),
    ("cursor", "--force", 1),
    ("gemini", "--yolo", 1),
]


@pytest.mark.parametrize(("kind", "flag", "count"), PERMISSIONS, ids=[k for k, _, _ in PERMISSIONS])
def test_without_its_permission_flag_the_agent_could_not_write_solution_py(
    kind, flag, count, workspace
):
    launch = adapter(kind).launch(config(kind), workspace, PROMPT)
    done = run_fake(launch, workspace, argv=without(launch.argv, flag, count))
    assert done.returncode == 0 and "refused" in done.stderr
    assert (workspace / "solution.py").read_text() == STARTER


# --- the registry --------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", AGENT_KINDS)
def test_adapter_gives_a_fresh_instance_of_each_kind_per_call(kind):
    first, second = adapter(kind), adapter(kind)
    assert first is not second and type(first) is type(second)
    assert first.kind == kind
    assert isinstance(first, CliAgent if kind in CLI_KINDS else InProcessAgent)


def test_a_fresh_instance_matters_the_parsers_keep_per_attempt_state():
    lines = lines_of("claude.jsonl")
    reused = adapter("claude")
    first = [s for line in lines for s in reused.parse(line)]
    again = [s for line in lines for s in reused.parse(line)]
    assert kinds(again).count("usage") == 1 < kinds(first).count("usage"), (
        "message ids already counted are skipped"
    )
    assert parse_all("claude", lines) == first


def test_the_offline_kinds_resolve():
    assert isinstance(adapter("reference"), ReferenceAgent)
    assert isinstance(adapter("replay"), ReplayAgent)
    assert isinstance(adapter("openai"), OpenAICompatAgent)


def test_an_unknown_kind_is_refused():
    with pytest.raises(UnknownAgentKind, match="aider"):
        adapter("aider")
    with pytest.raises(ValueError):  # UnknownAgentKind is a ValueError: a run file's mistake
        adapter("")
    with pytest.raises(UnknownAgentKind, match="AGENT_KINDS"):
        register("aider", lambda: None)  # type: ignore[arg-type, return-value]


# --- the OpenAI-compatible tool loop ---------------------------------------------------------------


class StubCheck:
    """`arena check` for the in-process agent: counts its calls, returns a canned report."""

    def __init__(self, report: str = CHECK_REPORT) -> None:
        self.report, self.calls = report, 0

    async def __call__(self) -> str:
        self.calls += 1
        return self.report


def run_openai(
    server: FakeOpenAI, workspace: Path, check: StubCheck | None = None, **options
) -> list[Step]:
    steps: list[Step] = []
    agent = adapter("openai")
    cfg = config("openai", "fake-model", **{"base_url": server.base_url, "retries": 0, **options})
    asyncio.run(
        asyncio.wait_for(
            agent.run(cfg, workspace, PROMPT, steps.append, check or StubCheck()), timeout=20
        )
    )
    return steps


def tool_messages(body: dict) -> list[dict]:
    return [m for m in body["messages"] if m["role"] == "tool"]


def test_openai_episode_lists_writes_checks_and_answers(workspace):
    new = "import torch\n\n\ndef run(x, b):\n    return x * 2 + b\n"
    script = [
        tool_calls(("list_files", {}), text="Let me look around."),
        tool_calls(("write_file", {"path": "solution.py", "content": new})),
        tool_calls(("run_check", {})),
        answer(
            "solution.py is x * 2 + b and passes the visible checks.",
            prompt_tokens=400,
            completion_tokens=12,
        ),
    ]
    check = StubCheck()
    with FakeOpenAI(script) as server:
        steps = run_openai(server, workspace, check)
    assert (workspace / "solution.py").read_text() == new
    assert check.calls == 1
    assert kinds(steps) == [
        "usage",
        "text",
        "tool_call",
        "tool_result",
        "usage",
        "tool_call",
        "tool_result",
        "usage",
        "tool_call",
        "tool_result",
        "usage",
        "final",
    ]
    assert calls(steps) == [
        ("list_files", "call_0"),
        ("write_file", "call_0"),
        ("run_check", "call_0"),
    ]
    results = [s for s in steps if s.kind == "tool_result"]
    assert (
        results[0].text == "solution.py"
        and results[1].text == f"wrote solution.py ({len(new)} characters)"
    )
    assert results[2].text == CHECK_REPORT and not any(s.is_error for s in steps)
    usage = [s for s in steps if s.kind == "usage"]
    assert [(u.input_tokens, u.output_tokens, u.cumulative) for u in usage] == [
        (100, 20, False)
    ] * 3 + [(400, 12, False)], "each request's usage is an increment"
    assert steps[-1] == Step(
        "final", text="solution.py is x * 2 + b and passes the visible checks."
    )

    requests = [r.body for r in server.completions]
    assert len(requests) == 4
    first = requests[0]
    assert first["model"] == "fake-model" and first["tool_choice"] == "auto"
    assert [t["function"]["name"] for t in first["tools"]] == [
        "read_file",
        "write_file",
        "list_files",
        "run_check",
    ]
    assert [m["role"] for m in first["messages"]] == ["system", "user"] and first["messages"][1][
        "content"
    ] == PROMPT
    assistant = requests[1]["messages"][2]
    assert (
        assistant["role"] == "assistant"
        and assistant["tool_calls"][0]["function"]["name"] == "list_files"
    )
    assert tool_messages(requests[1]) == [
        {"role": "tool", "tool_call_id": "call_0", "content": "solution.py"}
    ], "the listing went back"
    assert tool_messages(requests[2])[-1]["content"] == f"wrote solution.py ({len(new)} characters)"
    assert tool_messages(requests[3])[-1] == {
        "role": "tool",
        "tool_call_id": "call_0",
        "content": CHECK_REPORT,
    }, "the check report went back"
    assert all("Authorization" not in r.headers for r in server.requests), (
        "a local server without api_key_env gets no key"
    )


def test_openai_paths_that_leave_the_workspace_are_refused(workspace, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("hidden workloads")
    (workspace / "link").symlink_to(outside, target_is_directory=True)
    (workspace / "secret.txt").symlink_to(outside / "secret.txt")
    script = [
        tool_calls(
            ("write_file", {"path": "../x", "content": "escaped"}),
            ("write_file", {"path": str(outside / "abs.py"), "content": "escaped"}),
            ("write_file", {"path": "link/evil.py", "content": "escaped"}),
            ("read_file", {"path": "secret.txt"}),
            ("write_file", "{not json"),
        ),
        answer("I could not."),
    ]
    with FakeOpenAI(script) as server:
        steps = run_openai(server, workspace)
    results = [s for s in steps if s.kind == "tool_result"]
    assert result_ids(steps) == ["call_0", "call_1", "call_2", "call_3", "call_4"]
    assert all(r.is_error and r.text.startswith("error: ") for r in results)
    assert "'..'" in results[0].text and "absolute" in results[1].text
    assert "outside the workspace" in results[2].text and "outside the workspace" in results[3].text
    assert "not a JSON object" in results[4].text
    assert not (tmp_path / "x").exists() and sorted(p.name for p in outside.iterdir()) == [
        "secret.txt"
    ], "nothing was written outside"
    assert (workspace / "solution.py").read_text() == STARTER
    sent = tool_messages(server.completions[1].body)
    assert [m["content"] for m in sent] == [r.text for r in results], "the model reads each refusal"
    assert "hidden workloads" not in json.dumps(server.completions[1].body)
    assert steps[-1] == Step("final", text="I could not.")


def test_openai_401_is_an_error_step_without_retry(workspace):
    with FakeOpenAI([answer("never sent")], token="sk-right") as server:
        steps = run_openai(server, workspace, retries=3, retry_delay_s=0.05)
    assert len(server.requests) == 1, "a wrong key is not retried"
    assert [s.kind for s in steps] == ["error"] and steps[0].is_error and "401" in steps[0].text


def test_openai_a_server_error_is_retried(workspace):
    with FakeOpenAI([failure(503, "overloaded"), answer("ok")]) as server:
        steps = run_openai(server, workspace, retries=1, retry_delay_s=0.01)
    assert len(server.requests) == 2
    assert kinds(steps) == ["usage", "final"] and steps[-1].text == "ok"


def test_openai_sends_the_key_named_by_api_key_env_as_a_bearer_token(workspace, monkeypatch):
    monkeypatch.setenv("ARENA_TEST_OPENAI_KEY", "sk-test-123")
    with FakeOpenAI([answer("hello")], token="sk-test-123") as server:
        steps = run_openai(server, workspace, api_key_env="ARENA_TEST_OPENAI_KEY")
    assert server.requests[0].headers["Authorization"] == "Bearer sk-test-123"
    assert steps[-1] == Step("final", text="hello")

    monkeypatch.delenv("ARENA_TEST_OPENAI_KEY")
    with FakeOpenAI([answer("hello")]) as server:
        steps = run_openai(server, workspace, api_key_env="ARENA_TEST_OPENAI_KEY")
    assert server.requests == [], "nothing is sent without the key"
    assert kinds(steps) == ["error"] and "ARENA_TEST_OPENAI_KEY" in steps[0].text


def test_openai_max_turns_stops_the_loop_with_an_error(workspace):
    with FakeOpenAI([tool_calls(("list_files", {}))] * 5) as server:
        steps = run_openai(server, workspace, max_turns=2)
    assert len(server.completions) == 2
    assert kinds(steps) == ["usage", "tool_call", "tool_result"] * 2 + ["error"]
    assert steps[-1].is_error and "max_turns=2" in steps[-1].text
    assert "final" not in kinds(steps)


def test_openai_needs_a_model(workspace):
    steps: list[Step] = []
    asyncio.run(
        adapter("openai").run(
            replace(config("openai"), model=None), workspace, PROMPT, steps.append, StubCheck()
        )
    )
    assert kinds(steps) == ["error"] and "model" in steps[0].text
