"""Cursor: `cursor-agent -p PROMPT --output-format stream-json --force [--model M]`.

The stream (cursor.com/docs/cli/reference/output-format; docs/agents.md) is NDJSON:
- `system` (subtype `init`: session_id, model, cwd, permissionMode) and `user` (the prompt
  echoed): nothing for the transcript;
- `thinking` (subtype `delta` with `text`, then `completed`): gathered into one thinking step;
- `assistant`: `message.content` text blocks, one line per complete message between tool calls;
- `tool_call` (subtype `started` | `completed`, `call_id`, `tool_call: {<name>ToolCall: {args,
  result}}`, e.g. readToolCall, writeToolCall {path, fileText}, shellToolCall {command}, or
  `function {name, arguments}`); the result is `{success: {...}}` or `{error|rejected|failure:
  {...}}`;
- `result` (subtype success, `is_error`, `result`: the whole answer, duration_ms).

Cursor reports no token usage or cost; a run file cannot give it token or cost caps.
Without `--force`, actions that need approval are rejected in print mode.
"""

from __future__ import annotations

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
    parse_line,
    safe_prompt,
    total,
)

KEY_VARIABLES = ("CURSOR_API_KEY",)
FAILURES = ("error", "rejected", "failure", "permissionDenied")


@dataclass
class CursorAgent:
    kind: str = "cursor"
    _thinking: list[str] = field(default_factory=list, repr=False)  # deltas of the current thought

    def launch(self, config: AgentConfig, workspace: Path, prompt: str) -> Launch:
        argv = [
            "cursor-agent",
            "-p",
            safe_prompt(prompt),
            "--output-format",
            "stream-json",
            "--force",
        ]
        return cli_launch(config, argv, KEY_VARIABLES)

    def parse(self, line: str) -> list[Step]:
        return parse_line(line, self._event)

    def _event(self, event: dict[str, Any]) -> list[Step]:
        kind = event.get("type")
        if kind in ("system", "user"):
            return []
        if kind == "thinking":
            if event.get("subtype") == "delta":
                self._thinking.append(as_text(event.get("text")))
                return []
            text, self._thinking = "".join(self._thinking), []
            return [Step("thinking", text=text)] if text else []
        if kind == "assistant":
            text = as_text(as_dict(event.get("message")).get("content"))
            return [Step("text", text=text)] if text else []
        if kind == "tool_call":
            return self._tool_call(event)
        if kind == "result":
            steps = []
            usage = as_dict(event.get("usage"))  # not documented today; kept should it appear
            if usage:
                steps.append(
                    Step(
                        "usage",
                        input_tokens=total(usage.get("inputTokens"), usage.get("input_tokens")),
                        output_tokens=total(usage.get("outputTokens"), usage.get("output_tokens")),
                        cumulative=True,
                    )
                )
            is_error = bool(event.get("is_error")) or event.get("subtype") not in ("success", None)
            steps.append(
                Step(
                    "final",
                    text=event.get("result") if isinstance(event.get("result"), str) else None,
                    is_error=is_error,
                )
            )
            return steps
        if kind == "error":
            return [
                Step(
                    "error", text=as_text(event.get("message") or event.get("error")), is_error=True
                )
            ]
        raise UnknownShape(kind)

    def _tool_call(self, event: dict[str, Any]) -> list[Step]:
        call = as_dict(event.get("tool_call"))
        if not call:
            raise UnknownShape("tool_call without tool_call")
        key, body = next(iter(call.items()))
        body = as_dict(body)
        if key == "function":
            name, args = body.get("name") or "function", arguments(body.get("arguments"))
        else:
            name = key.removesuffix("ToolCall")
            args = {k: v for k, v in as_dict(body.get("args")).items() if k != "toolCallId"}
        call_id = event.get("call_id")
        if event.get("subtype") == "started":
            return [Step("tool_call", tool=name, arguments=args, call_id=call_id)]
        if event.get("subtype") == "completed":
            text, is_error = _outcome(name, body.get("result"))
            return [Step("tool_result", text=text, call_id=call_id, is_error=is_error)]
        raise UnknownShape(event.get("subtype"))


def _outcome(name: str, result: Any) -> tuple[str, bool]:
    result = as_dict(result)
    for failure in FAILURES:
        if failure in result:
            detail = result[failure]
            detail_d = as_dict(detail)
            message = (
                detail_d.get("errorMessage")
                or detail_d.get("error")
                or detail_d.get("reason")
                or detail_d.get("message")
            )
            return as_text(message or detail), True
    success = result.get("success", result)
    if not isinstance(success, dict):
        return as_text(success), False
    if name == "shell":
        code = as_int(success.get("exitCode"))
        output = "".join(as_text(success.get(k)) for k in ("stdout", "stderr"))
        return output, code not in (0, None)
    if name == "read" and isinstance(success.get("content"), str):
        return success["content"], False
    if name in ("write", "edit") and success.get("path"):
        lines = success.get("linesCreated", success.get("linesAdded"))
        return f"wrote {success['path']}" + (
            f" ({lines} lines)" if lines is not None else ""
        ), False
    return as_text(success), False
