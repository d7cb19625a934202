"""Fake agent CLIs for tests: `tests/fakes/bin/{claude,codex,cursor-agent,gemini}` call `main`.

Each fake checks its command line the way the real tool would (a wrong flag set exits with a
usage error, so a test catches an adapter that builds a wrong command), then replays a stream
recorded in the tool's documented format (tests/fixtures/transcripts/<tool>.jsonl) line by
line, and does to its current directory what the recorded tool calls say: a write of
solution.py writes it, so an end-to-end test sees a changed solution. Writes the real tool
would not be allowed to make (no permission flag, read-only sandbox) are refused and said on
stderr. Standard library only: the fakes may run inside the attempt sandbox.

Environment knobs, for the attempt runner's tests:
- FAKE_AGENT_HANG=1        print the first line, then sleep until killed;
  FAKE_AGENT_HANG=stubborn the same, ignoring SIGTERM (only SIGKILL ends it);
- FAKE_AGENT_GARBAGE=1     after the first line, print malformed lines (not JSON, cut JSON, a
                           JSON array, an unknown event type, a 100 000-character line);
- FAKE_AGENT_EXEC=1        run the recorded shell commands (e.g. `arena check`) in the current
                           directory and put their real output into the recorded result;
- FAKE_AGENT_DELAY=S       sleep S seconds between lines (live display tests);
- FAKE_AGENT_EXIT=N        exit with N after the stream (default 0);
- FAKE_AGENT_TRANSCRIPT=P  replay P instead of the default recording;
- FAKE_AGENT_ARGV_FILE=P   write {"argv", "cwd", "stdin"} as JSON to P (what the fake was given).
`--version` alone prints a version line and exits 0, as the real tools do.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

TRANSCRIPTS = Path(__file__).resolve().parent.parent / "fixtures" / "transcripts"
RECORDED_CWD = "/tmp/arena/ws-attempt-1"  # the workspace the recordings were made in
GARBAGE = [
    "this is not JSON at all",
    '{"type": "assistant", "message": {"content": [',
    "[1, 2, 3]",
    '"just a string"',
    '{"type": "event_from_a_future_version", "payload": {"x": 1}}',
    "x" * 100_000,  # longer than asyncio's default 64 KiB line limit
]


class UsageError(Exception):
    """A command line the real tool would reject."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: error: {message}")


def _parser(prog: str) -> _Parser:
    # no abbreviations: a real CLI would not take `--verb` for `--verbose` either
    return _Parser(prog=prog, allow_abbrev=False, add_help=False)


@dataclass
class Run:
    """What the command line allows this fake to do."""

    prompt: str
    may_write: bool
    may_exec: bool
    stdin: str = ""
    transcript: str = ""
    files: dict[str, dict[str, str]] = field(
        default_factory=dict
    )  # codex: content behind file_change


# --- command lines -------------------------------------------------------------------------


def claude_args(argv: list[str]) -> Run:
    p = _parser("claude")
    p.add_argument("-p", "--print", action="store_true")
    p.add_argument("--output-format", choices=["text", "json", "stream-json"], default="text")
    p.add_argument("--verbose", action="store_true")
    p.add_argument("--model")
    p.add_argument(
        "--permission-mode",
        choices=["acceptEdits", "bypassPermissions", "default", "plan"],
        default="default",
    )
    p.add_argument("--dangerously-skip-permissions", action="store_true")
    p.add_argument("--max-turns", type=int)
    p.add_argument("--allowedTools", "--allowed-tools", action="append")
    p.add_argument("--disallowedTools", "--disallowed-tools", action="append")
    p.add_argument("--append-system-prompt")
    p.add_argument("--add-dir", action="append")
    p.add_argument("--include-partial-messages", action="store_true")
    p.add_argument("prompt", nargs="?")
    a = p.parse_args(argv)
    if not a.print:
        raise UsageError(
            "fake claude: only print mode (-p) is recorded; the interactive UI needs a terminal"
        )
    if not a.prompt:
        raise UsageError(
            "Error: Input must be provided either through stdin or as a prompt argument when using --print"
        )
    if a.output_format != "stream-json":
        raise UsageError(
            f"fake claude: only --output-format stream-json is recorded, not {a.output_format}"
        )
    if not a.verbose:
        raise UsageError(
            "Error: When using --print, --output-format=stream-json requires --verbose"
        )
    bypass = a.dangerously_skip_permissions or a.permission_mode == "bypassPermissions"
    return Run(a.prompt, may_write=bypass or a.permission_mode == "acceptEdits", may_exec=bypass)


def codex_args(argv: list[str]) -> Run:
    p = _parser("codex")
    sub = p.add_subparsers(dest="command", parser_class=_Parser)
    e = sub.add_parser("exec", allow_abbrev=False, add_help=False)
    e.add_argument("--json", "--experimental-json", action="store_true")
    e.add_argument(
        "-s",
        "--sandbox",
        choices=["read-only", "workspace-write", "danger-full-access"],
        default="read-only",
    )
    e.add_argument("-m", "--model")
    e.add_argument("--skip-git-repo-check", action="store_true")
    e.add_argument("-C", "--cd")
    e.add_argument("-c", "--config", action="append")
    e.add_argument("--full-auto", action="store_true")
    e.add_argument("--dangerously-bypass-approvals-and-sandbox", action="store_true")
    e.add_argument("--ephemeral", action="store_true")
    e.add_argument("-o", "--output-last-message")
    e.add_argument("-p", "--profile")
    e.add_argument("prompt", nargs="?")
    a = p.parse_args(argv)
    if a.command != "exec":
        raise UsageError("fake codex: only `codex exec` is recorded")
    if not a.json:
        raise UsageError("fake codex: only `codex exec --json` is recorded")
    if not a.skip_git_repo_check and not any(
        (d / ".git").exists() for d in [Path.cwd(), *Path.cwd().parents]
    ):
        raise UsageError(
            "Not inside a trusted directory and --skip-git-repo-check was not specified."
        )
    # like the real one: a prompt of `-` or none is read from stdin, and piped stdin is read
    # to its end and appended, so a runner that leaves stdin open hangs here, as Codex does
    stdin = "" if sys.stdin is None or sys.stdin.isatty() else sys.stdin.read()
    prompt = stdin if a.prompt in (None, "-") else a.prompt
    if not prompt:
        raise UsageError(
            "No prompt provided. Either specify one as an argument or pipe the prompt into stdin."
        )
    writable = a.sandbox != "read-only" or a.full_auto or a.dangerously_bypass_approvals_and_sandbox
    files = json.loads((TRANSCRIPTS / "codex.files.json").read_text())
    return Run(prompt, may_write=writable, may_exec=True, stdin=stdin, files=files)


def cursor_args(argv: list[str]) -> Run:
    p = _parser("cursor-agent")
    p.add_argument("-p", "--print", action="store_true")
    p.add_argument("--output-format", choices=["text", "json", "stream-json"], default="text")
    p.add_argument("--stream-partial-output", action="store_true")
    p.add_argument("-f", "--force", action="store_true")
    p.add_argument("--model")
    p.add_argument("--api-key")
    p.add_argument("--resume")
    p.add_argument("prompt", nargs="?")
    a = p.parse_args(argv)
    if not a.print:
        raise UsageError("fake cursor-agent: only print mode (-p) is recorded")
    if not a.prompt:
        raise UsageError("fake cursor-agent: no prompt given")
    if a.output_format != "stream-json":
        raise UsageError(
            f"fake cursor-agent: only --output-format stream-json is recorded, not {a.output_format}"
        )
    return Run(a.prompt, may_write=a.force, may_exec=a.force)


def gemini_args(argv: list[str]) -> Run:
    p = _parser("gemini")
    p.add_argument("-p", "--prompt")
    p.add_argument("-m", "--model")
    p.add_argument("-o", "--output-format", choices=["text", "json", "stream-json"], default="text")
    p.add_argument("-y", "--yolo", action="store_true")
    p.add_argument("--approval-mode", choices=["default", "auto_edit", "yolo"])
    p.add_argument("-s", "--sandbox", action="store_true")
    p.add_argument("--include-directories", action="append")
    p.add_argument("--skip-trust", action="store_true")
    p.add_argument("query", nargs="?")
    a = p.parse_args(argv)
    if a.yolo and a.approval_mode:
        raise UsageError(
            "Cannot use both --yolo (-y) and --approval-mode together. Use --approval-mode=yolo instead."
        )
    if not a.prompt:
        raise UsageError("fake gemini: only headless mode (-p PROMPT) is recorded")
    if a.output_format != "stream-json":
        raise UsageError(
            f"fake gemini: only --output-format stream-json is recorded, not {a.output_format}"
        )
    mode = "yolo" if a.yolo else a.approval_mode or "default"
    return Run(a.prompt, may_write=mode in ("yolo", "auto_edit"), may_exec=mode == "yolo")


# --- what the recorded tool calls do --------------------------------------------------------


@dataclass
class Actions:
    """Effects found in one recorded event: files to write, commands to run (keyed by call id)."""

    writes: list[tuple[str, str]] = field(default_factory=list)
    edits: list[tuple[str, str, str]] = field(default_factory=list)
    commands: list[tuple[str, str]] = field(default_factory=list)


def claude_actions(event: dict[str, Any], run: Run) -> Actions:
    found = Actions()
    if event.get("type") != "assistant":
        return found
    for block in event.get("message", {}).get("content", []):
        if block.get("type") != "tool_use":
            continue
        args = block.get("input", {})
        if block.get("name") == "Write":
            found.writes.append((args["file_path"], args["content"]))
        elif block.get("name") == "Edit":
            found.edits.append((args["file_path"], args["old_string"], args["new_string"]))
        elif block.get("name") == "Bash":
            found.commands.append((block["id"], args["command"]))
    return found


def claude_patch(event: dict[str, Any], outputs: dict[str, tuple[str, int]]) -> None:
    if event.get("type") != "user":
        return
    for block in event.get("message", {}).get("content", []):
        if isinstance(block, dict) and block.get("tool_use_id") in outputs:
            output, code = outputs[block["tool_use_id"]]
            block["content"], block["is_error"] = output, code != 0


def codex_actions(event: dict[str, Any], run: Run) -> Actions:
    found = Actions()
    item, msg = event.get("item") or {}, event.get("msg") or {}
    if event.get("type") == "item.completed" and item.get("type") == "file_change":
        found.writes += list(run.files.get(item["id"], {}).items())
    if event.get("type") == "item.started" and item.get("type") == "command_execution":
        found.commands.append((item["id"], _unwrap(shlex.split(item["command"]))))
    if msg.get("type") == "patch_apply_begin":
        found.writes += list(run.files.get(msg["call_id"], {}).items())
    if msg.get("type") == "exec_command_begin":
        found.commands.append((msg["call_id"], _unwrap(msg["command"])))
    return found


def _unwrap(argv: list[str]) -> str:
    """Codex runs commands as `bash -lc CMD`; a login shell would reset PATH from /etc/profile
    and lose the test's fake `arena`, so the fake runs CMD in a plain shell."""
    if len(argv) == 3 and argv[1] in ("-lc", "-c"):
        return argv[2]
    return shlex.join(argv)


def codex_patch(event: dict[str, Any], outputs: dict[str, tuple[str, int]]) -> None:
    item, msg = event.get("item") or {}, event.get("msg") or {}
    if event.get("type") == "item.completed" and item.get("id") in outputs:
        item["aggregated_output"], item["exit_code"] = outputs[item["id"]]
        item["status"] = "completed" if item["exit_code"] == 0 else "failed"
    if msg.get("type") == "exec_command_end" and msg.get("call_id") in outputs:
        output, code = outputs[msg["call_id"]]
        msg.update(
            stdout=output,
            stderr="",
            aggregated_output=output,
            formatted_output=output,
            exit_code=code,
        )


def cursor_actions(event: dict[str, Any], run: Run) -> Actions:
    found = Actions()
    if event.get("type") != "tool_call" or event.get("subtype") != "started":
        return found
    call = event.get("tool_call", {})
    if "writeToolCall" in call:
        args = call["writeToolCall"]["args"]
        found.writes.append((args["path"], args["fileText"]))
    if "shellToolCall" in call:
        found.commands.append((event["call_id"], call["shellToolCall"]["args"]["command"]))
    return found


def cursor_patch(event: dict[str, Any], outputs: dict[str, tuple[str, int]]) -> None:
    if (
        event.get("type") == "tool_call"
        and event.get("subtype") == "completed"
        and event.get("call_id") in outputs
    ):
        shell = event.get("tool_call", {}).get("shellToolCall")
        if shell is not None:
            output, code = outputs[event["call_id"]]
            shell["result"] = {
                "success": {
                    "command": shell["args"]["command"],
                    "exitCode": code,
                    "stdout": output,
                    "stderr": "",
                }
            }


def gemini_actions(event: dict[str, Any], run: Run) -> Actions:
    found = Actions()
    if event.get("type") != "tool_use":
        return found
    args = event.get("parameters", {})
    if event.get("tool_name") == "write_file":
        found.writes.append((args["file_path"], args["content"]))
    elif event.get("tool_name") == "replace":
        found.edits.append((args["file_path"], args["old_string"], args["new_string"]))
    elif event.get("tool_name") == "run_shell_command":
        found.commands.append((event["tool_id"], args["command"]))
    return found


def gemini_patch(event: dict[str, Any], outputs: dict[str, tuple[str, int]]) -> None:
    if event.get("type") == "tool_result" and event.get("tool_id") in outputs:
        output, code = outputs[event["tool_id"]]
        event["output"], event["status"] = output, "success" if code == 0 else "error"


@dataclass(frozen=True)
class Tool:
    transcript: str
    args: Callable[[list[str]], Run]
    actions: Callable[[dict[str, Any], Run], Actions]
    patch: Callable[[dict[str, Any], dict[str, tuple[str, int]]], None]


TOOLS = {
    "claude": Tool("claude.jsonl", claude_args, claude_actions, claude_patch),
    "codex": Tool("codex.jsonl", codex_args, codex_actions, codex_patch),
    "cursor-agent": Tool("cursor.jsonl", cursor_args, cursor_actions, cursor_patch),
    "gemini": Tool("gemini.jsonl", gemini_args, gemini_actions, gemini_patch),
}


# --- replay -------------------------------------------------------------------------------


def local_path(recorded: str) -> Path | None:
    """The recorded path mapped into the current directory; None for one that would leave it."""
    path = PurePosixPath(recorded)
    if path.is_absolute():
        try:
            path = path.relative_to(RECORDED_CWD)
        except ValueError:
            path = PurePosixPath(path.name)
    if ".." in path.parts or not path.parts:
        return None
    return Path.cwd() / path


def perform(name: str, found: Actions, run: Run, outputs: dict[str, tuple[str, int]]) -> None:
    for recorded, content in found.writes:
        target = local_path(recorded)
        if target is None or not run.may_write:
            print(
                f"fake {name}: write to {recorded} refused (no permission to edit files)",
                file=sys.stderr,
            )
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content)
    for recorded, old, new in found.edits:
        target = local_path(recorded)
        if target is None or not run.may_write or not target.is_file():
            print(f"fake {name}: edit of {recorded} refused", file=sys.stderr)
            continue
        target.write_text(target.read_text().replace(old, new, 1))
    if os.environ.get("FAKE_AGENT_EXEC") != "1":
        return
    for call_id, command in found.commands:
        if not run.may_exec:
            print(
                f"fake {name}: command {command!r} refused (no permission to run commands)",
                file=sys.stderr,
            )
            continue
        done = subprocess.run(
            command,
            shell=True,
            cwd=Path.cwd(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=600,
            check=False,
        )
        outputs[call_id] = (done.stdout, done.returncode)


def emit(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def main(name: str, argv: list[str]) -> int:
    try:
        return _main(name, argv)
    except BrokenPipeError:  # the reader went away (killed runner, `| head`): end quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


def _main(name: str, argv: list[str]) -> int:
    tool = TOOLS[name]
    if argv == ["--version"]:  # what the arena's preflight asks
        print(f"{name} 0.0.0 (fake)")
        return 0
    try:
        run = tool.args(argv)
    except UsageError as exc:
        print(exc, file=sys.stderr)
        return 2
    if os.environ.get("FAKE_AGENT_ARGV_FILE"):
        Path(os.environ["FAKE_AGENT_ARGV_FILE"]).write_text(
            json.dumps({"argv": [name, *argv], "cwd": os.getcwd(), "stdin": run.stdin})
        )
    transcript = Path(os.environ.get("FAKE_AGENT_TRANSCRIPT") or TRANSCRIPTS / tool.transcript)
    lines = [line for line in transcript.read_text().splitlines() if line.strip()]
    delay = float(os.environ.get("FAKE_AGENT_DELAY") or 0)
    outputs: dict[str, tuple[str, int]] = {}
    for number, line in enumerate(lines):
        event = json.loads(line)
        found = tool.actions(event, run)
        perform(name, found, run, outputs)
        tool.patch(event, outputs)
        emit(json.dumps(event, separators=(",", ":")) if outputs else line)
        if number == 0:
            _after_first_line()
        if delay:
            time.sleep(delay)
    return int(os.environ.get("FAKE_AGENT_EXIT") or 0)


def _after_first_line() -> None:
    if os.environ.get("FAKE_AGENT_GARBAGE") == "1":
        for line in GARBAGE:
            emit(line)
    hang = os.environ.get("FAKE_AGENT_HANG")
    if hang in ("1", "stubborn"):
        if hang == "stubborn":
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        while True:
            time.sleep(3600)
