"""Agent adapters: `adapter(kind)` gives a fresh adapter for one attempt.

CLI agents (claude, codex, cursor, gemini) and the OpenAI-compatible tool loop (openai) are
built in. The offline kinds (`reference`, `replay`) live in core/agents/offline.py, imported on
first use when it exists; it registers them with `register(kind, factory)`, or exposes
`ADAPTERS = {kind: factory}`. A fresh instance per attempt matters: the stream parsers keep a
little per-attempt state (usage already counted, the last answer, thinking deltas).

The package is the agents layer: the adapters, `runner` (one attempt: workspace, agent, final
evaluation), `workspace` (one isolated workspace per attempt) and `check_server` (the
`arena check` socket server). Above the evaluation, beside the store.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable

from core.agents.base import (
    AGENT_KINDS,
    AgentConfig,
    CliAgent,
    InProcessAgent,
    Launch,
    Step,
)
from core.agents.claude import ClaudeAgent
from core.agents.codex import CodexAgent
from core.agents.cursor import CursorAgent
from core.agents.gemini import GeminiAgent
from core.agents.openai_compat import OpenAICompatAgent

Adapter = CliAgent | InProcessAgent
Factory = Callable[[], Adapter]

__all__ = [
    "AGENT_KINDS",
    "Adapter",
    "AgentConfig",
    "CliAgent",
    "InProcessAgent",
    "Launch",
    "Step",
    "UnknownAgentKind",
    "adapter",
    "register",
]

_FACTORIES: dict[str, Factory] = {
    "claude": ClaudeAgent,
    "codex": CodexAgent,
    "cursor": CursorAgent,
    "gemini": GeminiAgent,
    "openai": OpenAICompatAgent,
}
_offline_loaded = False


class UnknownAgentKind(ValueError):
    """A run file names an agent kind that has no adapter."""


def register(kind: str, factory: Factory) -> None:
    """Add (or replace) the adapter of a kind; `factory()` makes one for an attempt."""
    if kind not in AGENT_KINDS:
        raise UnknownAgentKind(
            f"agent kind {kind!r} is none of {', '.join(AGENT_KINDS)}: add it to AGENT_KINDS first"
        )
    _FACTORIES[kind] = factory


def adapter(kind: str) -> Adapter:
    if kind not in AGENT_KINDS:
        raise UnknownAgentKind(f"agent kind {kind!r} is none of {', '.join(AGENT_KINDS)}")
    if kind not in _FACTORIES:
        _load_offline()
    factory = _FACTORIES.get(kind)
    if factory is None:
        raise UnknownAgentKind(
            f"agent kind {kind!r} has no adapter in this installation (core/agents/offline.py provides it)"
        )
    return factory()


def _load_offline() -> None:
    global _offline_loaded
    if _offline_loaded or importlib.util.find_spec("core.agents.offline") is None:
        return
    module = importlib.import_module(
        "core.agents.offline"
    )  # registers its kinds, or lists them below
    _offline_loaded = True
    for kind, factory in getattr(module, "ADAPTERS", {}).items():
        register(kind, factory)
