"""Any model behind an OpenAI-compatible `/v1/chat/completions` endpoint (OpenAI, vLLM, SGLang,
llama.cpp, Ollama, OpenRouter…), driven by our own tool loop.

Options of the run file: `base_url` (default https://api.openai.com/v1), `api_key_env` (the
name of the variable holding the key; default OPENAI_API_KEY for the default URL, none
otherwise, as local servers need none), `temperature`, `max_turns` (default 30),
`request_timeout_s` (default 600), `retries` (default 2, on 429 / 5xx / connection errors).

The model gets four functions: read_file, write_file and list_files, confined to the workspace
(absolute paths, `..` and symlinks that lead out are refused with an error the model reads),
and run_check, which runs `arena check` on solution.py. The loop ends with a `final` step when
the model answers without calling a tool, or with an `error` step at max_turns.

Standard library only (urllib in a worker thread); cancelling the coroutine abandons the
request in flight, which finishes or times out in its thread.
"""

from __future__ import annotations

import asyncio
import json
import os
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from core.agents.base import AgentConfig, Emit, RunCheck, Step
from core.agents.jsonl import arguments, as_dict, total

DEFAULT_BASE_URL = "https://api.openai.com/v1"
MAX_READ_CHARS = 200_000  # what one read_file returns; the rest is cut with a note
MAX_WRITE_CHARS = 2_000_000
MAX_LISTED = 1000

SYSTEM_PROMPT = """You are optimizing a GPU kernel in a workspace directory. The task is described in the user's message.
Use the functions to work: list_files and read_file to look around, write_file to change files (solution.py is what gets scored),
run_check to compile and test solution.py on the visible shapes. Paths are relative to the workspace.
When you are finished, answer with a short summary and call no function."""

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a text file of the workspace.",
            "parameters": {
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "relative to the workspace"}
                },
                "required": ["path"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "write_file",
            "description": "Create or overwrite a text file of the workspace with the given content.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
                "required": ["path", "content"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "list_files",
            "description": "List the files under a directory of the workspace (default: all of it).",
            "parameters": {
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "relative directory, default '.'"}
                },
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "run_check",
            "description": "Run `arena check`: compile solution.py and check it on the visible shapes; returns the report.",
            "parameters": {"type": "object", "properties": {}},
        },
    },
]


class ChatError(Exception):
    """The endpoint did not give a usable answer."""

    def __init__(self, message: str, retryable: bool = False) -> None:
        super().__init__(message)
        self.retryable = retryable


class ToolError(Exception):
    """A tool call the model got wrong: its message goes back to the model."""


@dataclass(frozen=True)
class Settings:
    url: str
    model: str
    api_key: str | None
    temperature: float | None
    max_turns: int
    timeout_s: float
    retries: int
    retry_delay_s: float

    @classmethod
    def from_config(cls, config: AgentConfig) -> Settings:
        options = config.options
        if not config.model:
            raise ValueError(
                f"agent {config.name!r} (openai): set `model`, the name the endpoint serves"
            )
        base_url = str(options.get("base_url") or DEFAULT_BASE_URL).rstrip("/")
        if urllib.parse.urlsplit(base_url).scheme not in ("http", "https"):
            raise ValueError(
                f"agent {config.name!r}: options.base_url {base_url!r} is not an http(s) URL"
            )
        key_env = options.get(
            "api_key_env", "OPENAI_API_KEY" if base_url == DEFAULT_BASE_URL else None
        )
        api_key = None
        if key_env:
            api_key = os.environ.get(str(key_env))
            if not api_key:
                raise ValueError(
                    f"agent {config.name!r}: options.api_key_env names {key_env}, which is not set in the environment"
                )
        temperature = options.get("temperature")
        return cls(
            url=base_url + "/chat/completions",
            model=config.model,
            api_key=api_key,
            temperature=float(temperature) if temperature is not None else None,
            max_turns=int(options.get("max_turns", 30)),
            timeout_s=float(options.get("request_timeout_s", 600)),
            retries=int(options.get("retries", 2)),
            retry_delay_s=float(options.get("retry_delay_s", 2.0)),
        )


@dataclass
class ChatClient:
    settings: Settings

    async def complete(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.settings.model,
            "messages": messages,
            "tools": TOOLS,
            "tool_choice": "auto",
        }
        if self.settings.temperature is not None:
            body["temperature"] = self.settings.temperature
        for attempt in range(self.settings.retries + 1):
            try:
                return await asyncio.to_thread(self._post, body)
            except ChatError as exc:
                if not exc.retryable or attempt == self.settings.retries:
                    raise
            await asyncio.sleep(self.settings.retry_delay_s * 2**attempt)
        raise AssertionError("unreachable")

    def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.settings.api_key:
            headers["Authorization"] = f"Bearer {self.settings.api_key}"
        request = urllib.request.Request(
            self.settings.url, data=json.dumps(body).encode(), headers=headers, method="POST"
        )
        host = urllib.parse.urlsplit(self.settings.url).hostname or ""
        # a proxy from the environment must not swallow a server on this machine
        opener = (
            urllib.request.build_opener(urllib.request.ProxyHandler({}))
            if host in ("localhost", "127.0.0.1", "::1")
            else urllib.request.build_opener()
        )
        try:
            with opener.open(request, timeout=self.settings.timeout_s) as response:
                payload = response.read()
        except urllib.error.HTTPError as exc:
            detail = exc.read()[:1000].decode("utf-8", errors="replace")
            raise ChatError(
                f"{self.settings.url}: HTTP {exc.code}: {detail}",
                retryable=exc.code in (408, 409, 429) or exc.code >= 500,
            ) from None
        except (urllib.error.URLError, OSError) as exc:
            raise ChatError(
                f"{self.settings.url}: {getattr(exc, 'reason', exc)}", retryable=True
            ) from None
        try:
            data = json.loads(payload)
        except json.JSONDecodeError:
            raise ChatError(
                f"{self.settings.url}: the answer is not JSON: {payload[:200]!r}"
            ) from None
        if (
            not isinstance(data, dict)
            or not isinstance(data.get("choices"), list)
            or not data["choices"]
        ):
            raise ChatError(f"{self.settings.url}: no choices in the answer: {str(data)[:500]}")
        return data


@dataclass
class WorkspaceFiles:
    """The model's file functions, confined to one directory."""

    root: Path
    check: RunCheck
    _real: Path = field(init=False)

    def __post_init__(self) -> None:
        self._real = self.root.resolve()

    def resolve(self, path: Any) -> Path:
        if not isinstance(path, str) or not path.strip():
            raise ToolError("path must be a non-empty path relative to the workspace")
        pure = PurePosixPath(path)
        if pure.is_absolute() or Path(path).is_absolute() or path.startswith("~"):
            raise ToolError(f"{path!r} is absolute: give a path relative to the workspace")
        if ".." in pure.parts:
            raise ToolError(f"{path!r} contains '..': paths stay inside the workspace")
        try:
            real = (self._real / pure).resolve()
        except (OSError, ValueError, RuntimeError) as exc:  # symlink loops, NUL bytes
            raise ToolError(f"{path!r}: {exc}") from None
        if real != self._real and not real.is_relative_to(self._real):
            raise ToolError(f"{path!r} leads outside the workspace (through a symbolic link)")
        return real

    async def call(self, name: str | None, args: dict[str, Any]) -> str:
        if name == "read_file":
            return self.read_file(args.get("path"))
        if name == "write_file":
            return self.write_file(args.get("path"), args.get("content"))
        if name == "list_files":
            return self.list_files(args.get("path") or ".")
        if name == "run_check":
            return await self.check()
        raise ToolError(
            f"no function {name!r}; the functions are read_file, write_file, list_files, run_check"
        )

    def read_file(self, path: Any) -> str:
        target = self.resolve(path)
        if not target.is_file():
            raise ToolError(f"{path!r} is not a file of the workspace")
        text = target.read_text(encoding="utf-8", errors="replace")
        if len(text) > MAX_READ_CHARS:
            return (
                text[:MAX_READ_CHARS] + f"\n[… cut: {len(text) - MAX_READ_CHARS} more characters]"
            )
        return text

    def write_file(self, path: Any, content: Any) -> str:
        if not isinstance(content, str):
            raise ToolError("content must be a string")
        if len(content) > MAX_WRITE_CHARS:
            raise ToolError(f"content is {len(content)} characters; the limit is {MAX_WRITE_CHARS}")
        target = self.resolve(path)
        if target.is_dir():
            raise ToolError(f"{path!r} is a directory")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8")
        return f"wrote {target.relative_to(self._real).as_posix()} ({len(content)} characters)"

    def list_files(self, path: Any) -> str:
        top = self.resolve(path)
        if not top.is_dir():
            raise ToolError(f"{path!r} is not a directory of the workspace")
        listed: list[str] = []
        for directory, dirs, files in os.walk(top):  # links to directories are listed, not followed
            dirs.sort()
            here = Path(directory)
            for name in sorted(files) + [d + "/" for d in dirs]:
                listed.append(
                    (here / name).relative_to(self._real).as_posix()
                    + ("/" if name.endswith("/") else "")
                )
                if len(listed) >= MAX_LISTED:
                    return "\n".join(sorted(listed)) + f"\n[… stopped at {MAX_LISTED} entries]"
        return "\n".join(sorted(listed)) or "(empty)"


@dataclass
class OpenAICompatAgent:
    kind: str = "openai"

    async def run(
        self, config: AgentConfig, workspace: Path, prompt: str, emit: Emit, check: RunCheck
    ) -> None:
        try:
            settings = Settings.from_config(config)
        except ValueError as exc:
            emit(Step("error", text=str(exc), is_error=True))
            return
        client = ChatClient(settings)
        tools = WorkspaceFiles(workspace, check)
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": prompt},
        ]
        for _ in range(settings.max_turns):
            try:
                reply = await client.complete(messages)
            except ChatError as exc:
                emit(Step("error", text=str(exc), is_error=True))
                return
            message = as_dict(as_dict(reply["choices"][0]).get("message"))
            usage = as_dict(reply.get("usage"))
            if usage:
                emit(
                    Step(
                        "usage",
                        input_tokens=total(usage.get("prompt_tokens")),
                        output_tokens=total(usage.get("completion_tokens")),
                    )
                )
            reasoning = message.get("reasoning_content") or message.get(
                "reasoning"
            )  # vLLM, DeepSeek, OpenRouter
            if isinstance(reasoning, str) and reasoning:
                emit(Step("thinking", text=reasoning))
            content = message.get("content") if isinstance(message.get("content"), str) else None
            calls = [as_dict(c) for c in message.get("tool_calls") or []]
            if not calls:
                emit(Step("final", text=content))
                return
            if content:
                emit(Step("text", text=content))
            messages.append({"role": "assistant", "content": content, "tool_calls": calls})
            for call in calls:
                messages.append(await self._call(call, tools, emit))
        emit(
            Step(
                "error",
                text=f"stopped after max_turns={settings.max_turns} turns without a final answer",
                is_error=True,
            )
        )

    async def _call(
        self, call: dict[str, Any], tools: WorkspaceFiles, emit: Emit
    ) -> dict[str, Any]:
        function = as_dict(call.get("function"))
        name, call_id = function.get("name"), call.get("id")
        args = arguments(function.get("arguments") or "{}")
        emit(Step("tool_call", tool=name, arguments=args, call_id=call_id))
        try:
            if "_raw" in args or "_value" in args:
                raise ToolError("the arguments are not a JSON object")
            text, is_error = await tools.call(name, args), False
        except ToolError as exc:
            text, is_error = f"error: {exc}", True
        except OSError as exc:
            text, is_error = f"error: {exc.strerror or exc}", True
        except Exception as exc:  # noqa: BLE001 - a failing check is reported to the model, not raised
            text, is_error = f"error: {type(exc).__name__}: {exc}", True
        emit(Step("tool_result", text=text, call_id=call_id, is_error=is_error))
        return {"role": "tool", "tool_call_id": call_id, "content": text}
