"""Claude Code: `claude -p PROMPT --output-format stream-json --verbose`.

The stream (docs/agents.md; code.claude.com headless docs) is NDJSON:
- `system` (subtype `init`: session_id, model, tools, cwd): carries nothing for the transcript;
- `assistant`: `message.content` blocks `text`, `thinking`, `tool_use {id, name, input}`, and
  `message.usage` for that API call. One API message may arrive as several lines (one per
  content block) that repeat the same `message.id` and usage, so usage is taken once per id;
- `user`: `message.content` blocks `tool_result {tool_use_id, content, is_error}` where content
  is a string or a list of text blocks;
- `result`: subtype success | error_max_turns | error_during_execution, `is_error`, `result`
  (the final answer), `total_cost_usd`, `usage` summed over the session.

Tokens: input counts what the model read, cache reads and writes included (the OpenAI
convention, so budgets mean the same across agents). Per-message usage steps are increments;
the `result` usage is the session total (`cumulative=True`) and supersedes them.

Traps: stream-json with -p fails without `--verbose`; without a permission mode that allows
edits and Bash, the agent can neither write solution.py nor run `arena check` headless.
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
    option_str,
    parse_line,
    safe_prompt,
    total,
)

KEY_VARIABLES = ("ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN", "ANTHROPIC_BASE_URL")
PERMISSION_MODES = ("bypassPermissions", "acceptEdits", "default", "plan")


@dataclass
class ClaudeAgent:
    kind: str = "claude"
    # ids of assistant messages whose usage was already counted (one attempt per instance)
    _counted: set[str] = field(default_factory=set, repr=False)

    def launch(self, config: AgentConfig, workspace: Path, prompt: str) -> Launch:
        # bypassPermissions: headless, there is nobody to approve an edit or `arena check`;
        # the sandbox, not Claude's prompts, is what confines the agent.
        mode = option_str(config, "permission_mode", "bypassPermissions")
        if mode not in PERMISSION_MODES:
            raise ValueError(
                f"agent {config.name!r}: options.permission_mode {mode!r} is none of {', '.join(PERMISSION_MODES)}"
            )
        argv = [
            "claude",
            "-p",
            safe_prompt(prompt),
            "--output-format",
            "stream-json",
            "--verbose",
            "--permission-mode",
            mode,
        ]
        turns = config.options.get("max_turns")
        after = ["--max-turns", str(int(turns))] if turns is not None else []
        return cli_launch(config, argv, KEY_VARIABLES, after_model=after)

    def parse(self, line: str) -> list[Step]:
        return parse_line(line, self._event)

    def _event(self, event: dict[str, Any]) -> list[Step]:
        kind = event.get("type")
        if kind == "system":
            subtype = event.get("subtype")
            # init is the session's header; other subtypes (retries, compaction) are notices
            return [] if subtype == "init" else [Step("text", text=f"[system: {subtype}]")]
        if kind == "assistant":
            return self._assistant(event)
        if kind == "user":
            return self._user(event)
        if kind == "result":
            return self._result(event)
        if kind == "stream_event":
            return []  # partial deltas, only with --include-partial-messages; the full message follows
        raise UnknownShape(kind)

    def _assistant(self, event: dict[str, Any]) -> list[Step]:
        message = as_dict(event.get("message"))
        steps: list[Step] = []
        for block in message.get("content") or []:
            block = as_dict(block)
            btype = block.get("type")
            if btype == "text" and block.get("text"):
                steps.append(Step("text", text=block["text"]))
            elif btype == "thinking":
                steps.append(Step("thinking", text=block.get("thinking") or ""))
            elif btype == "redacted_thinking":
                steps.append(Step("thinking", text="[redacted thinking]"))
            elif btype in ("tool_use", "server_tool_use"):
                steps.append(
                    Step(
                        "tool_call",
                        tool=block.get("name"),
                        arguments=as_dict(block.get("input")),
                        call_id=block.get("id"),
                    )
                )
        if event.get("error"):  # newer versions flag API failures (auth, rate limit) on the message
            steps.append(Step("error", text=as_text(event["error"]), is_error=True))
        usage = as_dict(message.get("usage"))
        message_id = message.get("id")
        if usage and not (message_id and message_id in self._counted):
            if message_id:
                self._counted.add(message_id)
            steps.append(_usage(usage, cumulative=False))
        return steps

    def _user(self, event: dict[str, Any]) -> list[Step]:
        content = as_dict(event.get("message")).get("content")
        if not isinstance(content, list):
            return []  # the prompt echoed back
        return [
            Step(
                "tool_result",
                text=as_text(block.get("content")),
                call_id=block.get("tool_use_id"),
                is_error=bool(block.get("is_error")),
            )
            for block in map(as_dict, content)
            if block.get("type") == "tool_result"
        ]

    def _result(self, event: dict[str, Any]) -> list[Step]:
        subtype = event.get("subtype") or ""
        is_error = bool(event.get("is_error")) or subtype.startswith("error")
        text = event.get("result")
        if not isinstance(text, str) or not text:
            errors = event.get("errors")
            text = as_text(errors) if errors else (subtype if is_error else None)
        steps = []
        usage = as_dict(event.get("usage"))
        cost = event.get("total_cost_usd", event.get("cost_usd"))  # cost_usd: older releases
        if usage or isinstance(cost, (int, float)):
            steps.append(_usage(usage, cumulative=True, cost=cost))
        steps.append(Step("final", text=text, is_error=is_error))
        return steps


def _usage(usage: dict[str, Any], *, cumulative: bool, cost: Any = None) -> Step:
    return Step(
        "usage",
        input_tokens=total(
            usage.get("input_tokens"),
            usage.get("cache_creation_input_tokens"),
            usage.get("cache_read_input_tokens"),
        ),
        output_tokens=total(usage.get("output_tokens")),
        cost_usd=float(cost)
        if isinstance(cost, (int, float)) and not isinstance(cost, bool)
        else None,
        cumulative=cumulative,
    )
