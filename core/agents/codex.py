"""OpenAI Codex: `codex exec --json --sandbox workspace-write --skip-git-repo-check … -- PROMPT`
with stdin from /dev/null (otherwise it waits on "Reading additional input from stdin").

Two generations of `--json` output are understood (docs/agents.md; openai/codex PR #4525 and
the exec docs):
- current (JSONL, one event per line): `thread.started`, `turn.started`,
  `item.started | item.updated | item.completed {item: {id, type, …}}` with item types
  agent_message, reasoning, command_execution (command, aggregated_output, exit_code, status),
  file_change (changes [{path, kind}], status), mcp_tool_call (server, tool, arguments, result,
  error, status), web_search (query), todo_list (items), error (message); `turn.completed
  {usage}`, `turn.failed {error}`, `error {message}`. The item's type was `item_type` (and the
  message `assistant_message`) when the format first shipped, and is `type` / `agent_message`
  since;
- older (`{"id", "msg": {"type", …}}`): agent_message, agent_reasoning, exec_command_begin/end,
  patch_apply_begin/end, mcp_tool_call_begin/end, token_count, task_complete, error.

Usage: `turn.completed.usage` is the session's running total (openai/codex#17539), so it is
reported `cumulative`; input_tokens already includes the cached part. Codex reports no cost.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.agents.base import AgentConfig, Launch, Step
from core.agents.jsonl import (
    UnknownShape,
    arguments,
    as_dict,
    as_int,
    as_text,
    cli_launch,
    option_str,
    parse_line,
    total,
)

KEY_VARIABLES = ("OPENAI_API_KEY", "CODEX_API_KEY", "OPENAI_BASE_URL")
SANDBOXES = ("read-only", "workspace-write", "danger-full-access")


@dataclass
class CodexAgent:
    kind: str = "codex"
    _started: set[str] = field(default_factory=set, repr=False)  # items whose tool_call was emitted
    _last_message: str | None = field(default=None, repr=False)  # the answer `final` repeats

    def launch(self, config: AgentConfig, workspace: Path, prompt: str) -> Launch:
        # workspace-write: the default sandbox is read-only, which cannot edit solution.py.
        # --skip-git-repo-check: a workspace is not a git repository, and exec refuses those.
        sandbox = option_str(config, "sandbox", "workspace-write")
        if sandbox not in SANDBOXES:
            raise ValueError(
                f"agent {config.name!r}: options.sandbox {sandbox!r} is none of {', '.join(SANDBOXES)}"
            )
        argv = ["codex", "exec", "--json", "--sandbox", sandbox, "--skip-git-repo-check"]
        # `--` ends the options (clap), so no prompt can be read as a flag.
        return cli_launch(config, argv, KEY_VARIABLES, model_flag="-m", tail=("--", prompt))

    def parse(self, line: str) -> list[Step]:
        return parse_line(line, self._event)

    def _event(self, event: dict[str, Any]) -> list[Step]:
        kind = event.get("type")
        if isinstance(event.get("msg"), dict) and kind is None:
            return self._legacy(event["msg"])
        if kind in ("thread.started", "turn.started"):
            return []
        if kind in ("item.started", "item.updated", "item.completed"):
            return self._item(kind.split(".")[1], _item(event))
        if kind == "turn.completed":
            steps = [_usage(as_dict(event.get("usage")))] if event.get("usage") else []
            return [*steps, Step("final", text=self._last_message)]
        if kind == "turn.failed":
            message = as_text(as_dict(event.get("error")).get("message") or event.get("error"))
            return [
                Step("error", text=message, is_error=True),
                Step("final", text=message, is_error=True),
            ]
        if kind == "error":
            # also sent for transient trouble ("Reconnecting… 1/5"); turn.failed ends the run
            return [Step("error", text=as_text(event.get("message")), is_error=True)]
        if kind is None and set(event) <= {"prompt"}:
            return []  # older releases echo the prompt first ...
        if kind is None and "msg" not in event and {"model", "sandbox"} & set(event):
            return []  # ... after a summary of their configuration: nothing the agent said
        raise UnknownShape(kind)

    # --- current item shapes -------------------------------------------------------------

    def _item(self, phase: str, item: dict[str, Any]) -> list[Step]:
        itype = item.get("type") or item.get("item_type")
        item_id = item.get("id")
        if itype in ("agent_message", "assistant_message"):
            if phase != "completed":
                return []
            self._last_message = item.get("text")
            return [Step("text", text=item.get("text"))]
        if itype == "reasoning":
            return [Step("thinking", text=item.get("text"))] if phase == "completed" else []
        if itype == "todo_list":
            if phase != "completed":
                return []
            lines = [
                f"[{'x' if as_dict(i).get('completed') else ' '}] {as_dict(i).get('text', '')}"
                for i in item.get("items") or []
            ]
            return [Step("text", text="\n".join(lines))]
        if itype == "error":
            return (
                [Step("error", text=as_text(item.get("message")), is_error=True)]
                if phase == "completed"
                else []
            )
        call = _call(itype, item)
        if call is None:
            raise UnknownShape(itype)
        steps = []
        if item_id not in self._started or item_id is None:
            if item_id is not None:
                self._started.add(item_id)
            steps.append(Step("tool_call", tool=call[0], arguments=call[1], call_id=item_id))
        if phase == "completed" and itype != "web_search":
            text, is_error = _outcome(itype, item)
            steps.append(Step("tool_result", text=text, call_id=item_id, is_error=is_error))
        return steps

    # --- older `msg` shapes --------------------------------------------------------------

    def _legacy(self, msg: dict[str, Any]) -> list[Step]:
        mtype = msg.get("type")
        call_id = msg.get("call_id")
        if mtype == "agent_message":
            self._last_message = msg.get("message")
            return [Step("text", text=msg.get("message"))]
        if mtype in ("agent_reasoning", "agent_reasoning_raw_content"):
            return [Step("thinking", text=msg.get("text"))]
        if mtype == "exec_command_begin":
            command = msg.get("command")
            command = shlex.join(command) if isinstance(command, list) else as_text(command)
            return [
                Step("tool_call", tool="shell", arguments={"command": command}, call_id=call_id)
            ]
        if mtype == "exec_command_end":
            output = msg.get("aggregated_output") or "".join(
                as_text(msg.get(k)) for k in ("stdout", "stderr")
            )
            return [
                Step(
                    "tool_result",
                    text=output,
                    call_id=call_id,
                    is_error=as_int(msg.get("exit_code")) not in (0, None),
                )
            ]
        if mtype == "patch_apply_begin":
            changes = msg.get("changes")
            paths = sorted(changes) if isinstance(changes, dict) else changes
            return [
                Step("tool_call", tool="apply_patch", arguments={"changes": paths}, call_id=call_id)
            ]
        if mtype == "patch_apply_end":
            output = "".join(as_text(msg.get(k)) for k in ("stdout", "stderr"))
            return [
                Step(
                    "tool_result",
                    text=output,
                    call_id=call_id,
                    is_error=msg.get("success") is False,
                )
            ]
        if mtype == "mcp_tool_call_begin":
            invocation = as_dict(msg.get("invocation"))
            name = ".".join(str(p) for p in (invocation.get("server"), invocation.get("tool")) if p)
            return [
                Step(
                    "tool_call",
                    tool=name or "mcp",
                    arguments=arguments(invocation.get("arguments")),
                    call_id=call_id,
                )
            ]
        if mtype == "mcp_tool_call_end":
            result = msg.get("result")
            failed = isinstance(result, dict) and (
                "Err" in result or result.get("is_error") is True
            )
            return [Step("tool_result", text=as_text(result), call_id=call_id, is_error=failed)]
        if mtype == "token_count":
            info = as_dict(msg.get("info"))
            return [_usage(as_dict(info.get("total_token_usage")) or msg)]
        if mtype == "task_complete":
            return [Step("final", text=msg.get("last_agent_message") or self._last_message)]
        if mtype in ("error", "stream_error"):
            return [Step("error", text=as_text(msg.get("message")), is_error=True)]
        if mtype in (
            "task_started",
            "agent_message_delta",
            "agent_reasoning_delta",
            "exec_command_output_delta",
            "agent_reasoning_section_break",
            "turn_diff",
        ):
            return []  # deltas and markers: the complete event follows
        raise UnknownShape(mtype)


def _item(event: dict[str, Any]) -> dict[str, Any]:
    item = as_dict(event.get("item"))
    details = as_dict(item.get("details"))  # some builds nested the typed part under `details`
    return {**item, **details}


def _call(itype: Any, item: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    if itype == "command_execution":
        command = item.get("command")
        return "shell", {
            "command": shlex.join(command) if isinstance(command, list) else as_text(command)
        }
    if itype == "file_change":
        changes = [
            f"{as_dict(c).get('kind', 'update')} {as_dict(c).get('path', '?')}"
            for c in item.get("changes") or []
        ]
        return "apply_patch", {"changes": changes}
    if itype == "mcp_tool_call":
        name = ".".join(str(p) for p in (item.get("server"), item.get("tool")) if p)
        return name or "mcp", arguments(item.get("arguments"))
    if itype == "web_search":
        return "web_search", {"query": item.get("query")}
    return None


def _outcome(itype: Any, item: dict[str, Any]) -> tuple[str, bool]:
    status = item.get("status")
    failed = status in ("failed", "declined")
    if itype == "command_execution":
        code = as_int(item.get("exit_code"))
        return as_text(item.get("aggregated_output")), failed or code not in (0, None)
    if itype == "file_change":
        return "\n".join(
            f"{as_dict(c).get('kind', 'update')} {as_dict(c).get('path', '?')}"
            for c in item.get("changes") or []
        ), failed
    error = item.get("error")
    if error:
        return as_text(as_dict(error).get("message") or error), True
    return as_text(item.get("result")), failed


def _usage(usage: dict[str, Any]) -> Step:
    return Step(
        "usage",
        input_tokens=total(usage.get("input_tokens")),
        output_tokens=total(usage.get("output_tokens")),
        cumulative=True,
    )
