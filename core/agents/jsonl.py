"""What every streaming-JSON adapter shares: decoding one stdout line without ever raising,
the step for a line we do not understand, and the pieces of a command line every CLI gets.

The CLIs change their event shapes between releases (docs/agents.md), so an adapter
treats every field as optional: a shape it does not know becomes a `text` step that keeps the
line verbatim in `raw`, never an exception that would end the transcript.
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

from core.agents.base import AgentConfig, Launch, Step

Handler = Callable[[dict[str, Any]], list[Step]]


def parse_line(line: str | bytes, handler: Handler) -> list[Step]:
    """Steps for one stdout line: [] for a blank line, the handler's steps for a JSON object,
    and a `text` step (raw kept) for anything else, including a handler that tripped over an
    unexpected shape. The raw line rides on the first step only, so it is stored once."""
    if isinstance(line, bytes):
        line = line.decode("utf-8", errors="replace")
    text = line.strip()
    if not text:
        return []
    try:
        event = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return [unparsed(text)]
    if not isinstance(event, dict):
        return [unparsed(text)]
    try:
        steps = handler(event)
    except Exception:  # noqa: BLE001 - a drifted shape must not end the transcript
        return [unparsed(text)]
    if not steps:
        return []
    first = steps[0]
    return [replace(first, raw=text), *steps[1:]]


class UnknownShape(Exception):
    """Raised by a handler for an event it does not know: the line becomes a `text` step."""


def unparsed(line: str) -> Step:
    return Step("text", text=line, raw=line)


def as_text(value: Any) -> str:
    """Tool output in whatever form a CLI gives it (a string, a list of content blocks, an
    object) as one string for the transcript."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts = []
        for item in value:
            if isinstance(item, dict) and isinstance(item.get("text"), str):
                parts.append(item["text"])
            elif isinstance(item, dict) and item.get("type") == "image":
                parts.append("[image]")
            else:
                parts.append(as_text(item))
        return "\n".join(p for p in parts if p)
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def as_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def total(*values: Any) -> int | None:
    """Sum of the counts that are present; None when none is."""
    counts = [c for c in (as_int(v) for v in values) if c is not None]
    return sum(counts) if counts else None


def as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def arguments(value: Any) -> dict[str, Any]:
    """Tool-call arguments as a dict: some CLIs give an object, some a JSON string."""
    if isinstance(value, dict):
        return value
    if isinstance(value, str):
        try:
            decoded = json.loads(value)
        except json.JSONDecodeError:
            return {"_raw": value}
        return decoded if isinstance(decoded, dict) else {"_value": decoded}
    if value is None:
        return {}
    return {"_value": value}


def extra_args(config: AgentConfig) -> list[str]:
    """`options.args` of the run file: a list of strings, or one string split like a shell."""
    args = config.options.get("args", [])
    if isinstance(args, str):
        return shlex.split(args)
    if isinstance(args, (list, tuple)) and all(isinstance(a, (str, int, float)) for a in args):
        return [str(a) for a in args]
    raise ValueError(
        f"agent {config.name!r}: options.args must be a list of strings or one string, not {args!r}"
    )


def safe_prompt(prompt: str) -> str:
    """A prompt that starts with '-' would be read as a flag by the CLIs' option parsers; a
    leading space changes nothing for the model."""
    return " " + prompt if prompt.startswith("-") else prompt


def pass_env(config: AgentConfig, defaults: Iterable[str]) -> dict[str, str]:
    """API keys passed through from the arena's environment: the CLI's usual variables plus
    any the run file names in `options.env` (a list of variable names, never values)."""
    names = list(defaults)
    named = config.options.get("env", [])
    if isinstance(named, str):
        named = [named]
    if not isinstance(named, (list, tuple)) or not all(isinstance(n, str) for n in named):
        raise ValueError(
            f"agent {config.name!r}: options.env must be a list of environment variable names"
        )
    names += list(named)
    return {name: os.environ[name] for name in names if name in os.environ}


def option_str(config: AgentConfig, key: str, default: str) -> str:
    value = config.options.get(key, default)
    if not isinstance(value, str) or not value:
        raise ValueError(
            f"agent {config.name!r}: options.{key} must be a non-empty string, not {value!r}"
        )
    return value


def cli_launch(
    config: AgentConfig,
    argv: list[str],
    keys: Iterable[str],
    model_flag: str = "--model",
    after_model: Iterable[str] = (),
    tail: Iterable[str] = (),
) -> Launch:
    """A CLI agent's launch: `argv`, then `model_flag MODEL` when the config names a model,
    `after_model`, the run file's `options.args` verbatim, and `tail` (what must stay last, such
    as `-- PROMPT`); the environment carries only the API keys `pass_env` lets through."""
    argv = [*argv, *([model_flag, config.model] if config.model else []), *after_model]
    return Launch(argv=[*argv, *extra_args(config), *tail], env=pass_env(config, keys))
