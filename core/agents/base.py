"""What an agent adapter is: how to start a coding agent on a workspace, and how to turn what
it prints into normalized transcript steps (core/model/events.py's TranscriptEvent).

Two shapes of agent:
- a CLI agent (Claude Code, Codex, Cursor, Gemini CLI) runs as a sandboxed subprocess; the
  adapter gives its command line (`launch`) and parses each line of its stdout (`parse`);
- an in-process agent (an OpenAI-compatible tool loop, the offline `reference` and `replay`)
  runs as a coroutine given the workspace, the prompt, a way to emit steps and a way to run
  `arena check`.
The attempt runner (core/agents/runner.py) owns processes, budgets, caps and the sequence
numbers; adapters stay pure translation, which is what makes them testable without keys.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from core.model.events import Step

AGENT_KINDS = ("claude", "codex", "cursor", "gemini", "openai", "reference", "replay")


@dataclass(frozen=True)
class AgentConfig:
    """One agent of a run file."""

    name: str  # unique in the run: what the queue, transcripts and leaderboard call it
    kind: str  # one of AGENT_KINDS
    model: str | None = None
    options: dict[str, Any] = field(
        default_factory=dict
    )  # per kind: extra CLI args, base_url, api_key_env, transcript…
    budget_s: float = 1800.0  # wall-clock limit of one attempt
    max_cost_usd: float | None = None  # stop the agent once its reported cost exceeds this
    max_tokens: int | None = None  # … or its input + output tokens


@dataclass(frozen=True)
class Launch:
    """How to start a CLI agent: argv (argv[0] looked up on PATH inside the sandbox), extra
    environment (API keys the config names, passed through from the arena's environment),
    and what to feed its stdin (None: /dev/null)."""

    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    stdin: bytes | None = None


@runtime_checkable
class CliAgent(Protocol):
    kind: str

    def launch(self, config: AgentConfig, workspace: Path, prompt: str) -> Launch: ...

    def parse(self, line: str) -> list[Step]:
        """Steps for one stdout line; [] for lines that carry nothing; never raises (an
        unparseable line becomes a `text` step with the line as raw)."""
        ...


Emit = Callable[[Step], None]
RunCheck = Callable[
    [], Awaitable[str]
]  # runs `arena check` on the workspace's solution.py; returns its printed report


@runtime_checkable
class InProcessAgent(Protocol):
    kind: str

    async def run(
        self, config: AgentConfig, workspace: Path, prompt: str, emit: Emit, check: RunCheck
    ) -> None: ...
