"""Offline agents that need no model, so that the demo and the tests run anywhere.

- `reference` submits a known solution: `options.solution` is `starter` (the default: the
  workspace already holds it), `baseline` (the task's baseline.py), or a path (`{family}`,
  `{name}` and `{task}` filled in, relative to the run file's folder). It writes it into
  solution.py, runs `arena check` once, and says what it did in a few transcript steps.
- `replay` replays a recorded transcript and a recorded candidate: `options.transcript` is a
  .jsonl file of TranscriptEvents (`format: events`, the default; what `arena runs transcript
  ATTEMPT --jsonl` prints) or of a CLI tool's raw stream (`format: claude|codex|cursor|gemini`,
  parsed by that adapter); `options.solution` is the candidate written into solution.py at
  the end; `options.check` (default true) runs `arena check` on it; `options.delay_s` paces
  the steps (default 0).

Paths are resolved for each attempt by `resolve_options` (the adapters never see the task);
the runner then treats these agents like any in-process agent: budget, caps and all.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from core.agents.base import AgentConfig, Emit, RunCheck, Step
from core.model import events
from core.model.task import Task

BUILTIN_SOLUTIONS = ("starter", "baseline")
REPLAY_FORMATS = ("events", "claude", "codex", "cursor", "gemini")


class OfflineAgentError(ValueError):
    """An offline agent's options that cannot work; the message names the option and the fix."""


def resolve_options(config: AgentConfig, task: Task, base_dir: str | Path) -> AgentConfig:
    """The agent's config for one task: `solution` and `transcript` paths made absolute, with
    `{family}`, `{name}`, `{task}` filled in; `starter`/`baseline` turned into the task's file."""
    if config.kind not in ("reference", "replay"):
        return config
    options = dict(config.options)
    for key in ("solution", "transcript"):
        value = options.get(key)
        if value is None:
            continue
        if not isinstance(value, str) or not value:
            raise OfflineAgentError(
                f"agent {config.name!r}: options.{key} must be a path, or starter/baseline, not {value!r}"
            )
        if key == "solution" and value in BUILTIN_SOLUTIONS:
            options[f"{key}_label"] = value
            options[key] = str(task.file(f"{value}.py"))
            continue
        path = Path(
            value.format(family=task.family, name=task.name, task=task.id.replace("/", "__"))
        )
        options[key] = str(path if path.is_absolute() else Path(base_dir) / path)
    if config.kind == "reference" and "solution" not in options:
        options.update(solution=str(task.file("starter.py")), solution_label="starter")
    if config.kind == "replay":
        if "transcript" not in options and "solution" not in options:
            raise OfflineAgentError(
                f"agent {config.name!r}: a replay agent needs options.transcript and/or options.solution (paths)"
            )
        fmt = options.get("format", "events")
        if fmt not in REPLAY_FORMATS:
            raise OfflineAgentError(
                f"agent {config.name!r}: options.format {fmt!r} is none of {', '.join(REPLAY_FORMATS)}"
            )
    for key in ("solution", "transcript"):
        if key in options and not Path(options[key]).is_file():
            raise OfflineAgentError(
                f"agent {config.name!r}: options.{key} {options[key]} does not exist for task {task.id}: give an existing file"
            )
    return replace(config, options=options)


def _submit(workspace: Path, source: Path, emit: Emit) -> None:
    text = source.read_text(encoding="utf-8")
    emit(
        Step(
            "tool_call",
            tool="write_file",
            arguments={"path": "solution.py", "from": str(source)},
            call_id="write",
        )
    )
    (workspace / "solution.py").write_text(text, encoding="utf-8")
    emit(Step("tool_result", text=f"wrote solution.py ({len(text)} characters)", call_id="write"))


def _failed(report: str) -> bool:
    """Whether an `arena check` report says the candidate failed (or the check itself did)."""
    return "FAILED" in report or report.startswith("error")


async def _check(check: RunCheck, emit: Emit, call_id: str = "check") -> str:
    emit(Step("tool_call", tool="bash", arguments={"command": "arena check"}, call_id=call_id))
    report = await check()
    emit(Step("tool_result", text=report, call_id=call_id, is_error=_failed(report)))
    return report


@dataclass
class ReferenceAgent:
    kind: str = "reference"

    async def run(
        self, config: AgentConfig, workspace: Path, prompt: str, emit: Emit, check: RunCheck
    ) -> None:
        label = config.options.get("solution_label") or "a known solution"
        source = Path(config.options.get("solution") or workspace / "solution.py")
        emit(
            Step(
                "text",
                text=f"reference agent: I submit {label} ({source.name}) without a model, check it once, and stop.",
            )
        )
        if label != "starter":
            _submit(workspace, source, emit)
        report = await _check(check, emit)
        verdict = "failed the visible stages" if _failed(report) else "passed the visible stages"
        emit(Step("final", text=f"submitted {label}: it {verdict}."))


@dataclass
class ReplayAgent:
    kind: str = "replay"

    async def run(
        self, config: AgentConfig, workspace: Path, prompt: str, emit: Emit, check: RunCheck
    ) -> None:
        delay = float(config.options.get("delay_s", 0) or 0)
        transcript = config.options.get("transcript")
        if transcript:
            parse = _parser(config.options.get("format", "events"))
            for line in Path(transcript).read_text(encoding="utf-8").splitlines():  # noqa: ASYNC240 - a small recorded transcript, read once
                for step in parse(line):
                    emit(step)
                    if delay:
                        await asyncio.sleep(delay)
                    else:
                        await asyncio.sleep(0)  # let the runner act on a cap between steps
        if config.options.get("solution"):
            _submit(workspace, Path(config.options["solution"]), emit)
            if config.options.get("check", True):
                await _check(check, emit, call_id="replay-check")


_STEP_FIELDS = {f.name for f in fields(Step)}


def _parser(fmt: str):  # type: ignore[no-untyped-def]
    """A function from one recorded line to steps."""
    if fmt == "events":

        def parse(line: str) -> list[Step]:
            if not line.strip():
                return []
            try:
                data: Any = json.loads(line)
                if isinstance(data, dict) and "v" not in data:
                    data = {
                        "v": events.SCHEMA_VERSION,
                        "type": "transcript",
                        "attempt": "",
                        "seq": 0,
                        "agent": "",
                        **data,
                    }
                event = events.parse(data)
            except (ValueError, events.EventError):
                return [Step("text", text=line.strip(), raw=line.strip())]
            if not isinstance(event, events.TranscriptEvent):
                return []
            return [Step(**{k: v for k, v in event.__dict__.items() if k in _STEP_FIELDS})]

        return parse
    from core.agents import adapter

    cli = adapter(fmt)
    return cli.parse  # type: ignore[union-attr]


ADAPTERS = {"reference": ReferenceAgent, "replay": ReplayAgent}
