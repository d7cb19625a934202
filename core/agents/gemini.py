"""Gemini CLI: `gemini -p PROMPT --output-format stream-json --yolo [-m MODEL]`.

The stream (geminicli.com/docs/cli/headless; docs/agents.md) is JSONL:
- `init` (session_id, model): nothing for the transcript;
- `message` (role user | assistant, content, `delta: true` for streamed chunks): assistant
  chunks become text steps as they come (nothing is held back, so a killed run loses nothing);
- `tool_use` (tool_name, tool_id, parameters) and `tool_result` (tool_id, status success |
  error, output, error {type, message});
- `error` (severity warning | error, message): non-fatal warnings and system errors;
- `result` (status success | error, error, stats {input_tokens, output_tokens, total_tokens,
  cached, duration_ms, tool_calls}): the session's totals.

`--yolo` approves every tool call: headless, nothing else could (the sandbox confines the
agent). Exit codes: 0 success, 1 error, 42 bad input, 53 turn limit. Gemini reports no cost.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.agents.base import AgentConfig, Launch, Step
from core.agents.jsonl import (
    UnknownShape,
    as_dict,
    as_text,
    cli_launch,
    parse_line,
    safe_prompt,
    total,
)

KEY_VARIABLES = (
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "GOOGLE_GENAI_USE_VERTEXAI",
    "GOOGLE_CLOUD_PROJECT",
    "GOOGLE_CLOUD_LOCATION",
)


@dataclass
class GeminiAgent:
    kind: str = "gemini"
    _answer: list[str] = field(
        default_factory=list, repr=False
    )  # assistant text since the last tool call

    def launch(self, config: AgentConfig, workspace: Path, prompt: str) -> Launch:
        argv = ["gemini", "-p", safe_prompt(prompt), "--output-format", "stream-json", "--yolo"]
        return cli_launch(config, argv, KEY_VARIABLES, model_flag="-m")

    def parse(self, line: str) -> list[Step]:
        return parse_line(line, self._event)

    def _event(self, event: dict[str, Any]) -> list[Step]:
        kind = event.get("type")
        if kind == "init":
            return []
        if kind == "message":
            if event.get("role") != "assistant":
                return []
            text = as_text(event.get("content"))
            if not event.get("delta"):
                self._answer = []
            self._answer.append(text)
            return [Step("text", text=text)] if text else []
        if kind == "tool_use":
            self._answer = []
            return [
                Step(
                    "tool_call",
                    tool=event.get("tool_name"),
                    arguments=as_dict(event.get("parameters")),
                    call_id=event.get("tool_id"),
                )
            ]
        if kind == "tool_result":
            failed = event.get("status") == "error"
            error = as_dict(event.get("error"))
            text = as_text(event.get("output")) or as_text(error.get("message"))
            return [Step("tool_result", text=text, call_id=event.get("tool_id"), is_error=failed)]
        if kind == "error":
            return [
                Step(
                    "error",
                    text=as_text(event.get("message")),
                    is_error=event.get("severity") != "warning",
                )
            ]
        if kind == "result":
            stats = as_dict(event.get("stats"))
            steps = []
            if stats:
                steps.append(
                    Step(
                        "usage",
                        input_tokens=total(stats.get("input_tokens")),
                        output_tokens=total(stats.get("output_tokens")),
                        cumulative=True,
                    )
                )
            failed = event.get("status") == "error"
            text = (
                as_text(as_dict(event.get("error")).get("message"))
                if failed
                else "".join(self._answer)
            )
            steps.append(Step("final", text=text or None, is_error=failed))
            return steps
        raise UnknownShape(kind)
