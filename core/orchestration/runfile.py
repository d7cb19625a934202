"""The run file: which candidates (or agents) to evaluate on which tasks and devices, read
and checked field by field (a bad field is one error naming the file, the field and the fix).

Run file (YAML; docs/runs.md):

    name: starters-vs-baselines
    tasks: [gemm/bf16_gemm, norm, "activation/*"]   # ids, families or globs
    candidates: [starter, baseline]                 # the task's own files, or paths
    devices: [cpu]                                  # cpu, cuda:N, xpu:N, <host>/<device>
    iterations: 1
    cpu_slots: 2                                    # evaluations at once per CPU device
    max_retries: 2                                  # infrastructure faults, on another slot
    ray: auto                                       # the Ray cluster of `ray:` devices (docs/ray.md)

A candidate path may use `{family}`, `{name}` and `{task}` (the id with `/` as `__`), so that one
line names a folder of solutions, e.g. `solutions/{family}/{name}.py`.

Agents add attempts (core.orchestration.runs runs them); `parallelism` caps the attempts
running at once:

    agents:
      - {name: ref, kind: reference, options: {solution: baseline}, budget_s: 600}
    variants: [{name: plain}, {name: sheet, cheatsheet: true, prompt: "extra text"}]
    parallelism: 2
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from core.agents.base import AGENT_KINDS, AgentConfig
from core.agents.workspace import Variant
from core.evaluation.profiles import ProfileError, parse_profile

BUILTIN_CANDIDATES = ("starter", "baseline")
AGENT_FIELDS = ("name", "kind", "model", "options", "budget_s", "max_cost_usd", "max_tokens")
VARIANT_FIELDS = ("name", "cheatsheet", "prompt", "options")


class RunFileError(ValueError):
    """A run file that cannot be used; the message names the file, the field and the fix."""

    def __init__(self, path: Path | str, field_name: str, problem: str, fix: str):
        super().__init__(f"{path}: `{field_name}`: {problem}. Fix: {fix}")


@dataclass(frozen=True)
class RunSpec:
    name: str
    tasks: tuple[str, ...]
    candidates: tuple[str, ...] = ("starter",)
    devices: tuple[str, ...] = ("cpu",)
    iterations: int = 1
    cpu_slots: int | None = None
    max_retries: int = 2
    tasks_dir: str | None = None
    base_dir: str = "."  # where relative candidate paths are read from: the run file's folder
    agents: tuple[AgentConfig, ...] = ()
    variants: tuple[Variant, ...] = (Variant(),)
    parallelism: int | None = None  # agent attempts at once (default: one per agent)
    ray: str | None = (
        None  # the Ray cluster's address, for `ray:` devices (core/orchestration/ray_executor.py)
    )
    profile: str = (
        "full"  # the evaluation profile of the run's jobs: full or train (docs/evaluation.md)
    )
    # which of each task's `baselines:` to time against where a task declares it (an imported
    # KernelBench task's `eager` or `torch_compile`); None: each task's own order
    baseline_impl: str | None = None

    def to_json(self) -> dict[str, Any]:
        data = {k: list(v) if isinstance(v, tuple) else v for k, v in self.__dict__.items()}
        data["agents"] = [{k: getattr(a, k) for k in AGENT_FIELDS} for a in self.agents]
        data["variants"] = [v.to_json() for v in self.variants]
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunSpec:
        values = {
            k: tuple(v) if isinstance(v, list) else v
            for k, v in data.items()
            if k in cls.__dataclass_fields__
        }
        values["agents"] = tuple(
            AgentConfig(**a) for a in data.get("agents", [])
        )  # a run stored before agents has none
        values["variants"] = tuple(Variant(**v) for v in data.get("variants", [])) or (Variant(),)
        return cls(**values)


# What a newcomer sees first: three small, quick tasks of three families (every bundled task
# takes ten minutes on two CPU cores, where Triton runs in its interpreter).
DEMO_TASKS = ("activation/silu_mul", "norm/add_rmsnorm", "gemm/bf16_gemm")

# `arena run` alone: the offline reference agent submits the demo tasks' starters on the CPU.
DEFAULT_RUN = RunSpec(
    name="default",
    tasks=DEMO_TASKS,
    candidates=(),
    devices=("cpu",),
    agents=(
        AgentConfig(
            name="reference", kind="reference", options={"solution": "starter"}, budget_s=600.0
        ),
    ),
)


def load_run_file(path: Path | str, tasks_dir: Path | None = None) -> RunSpec:
    path = Path(path)
    if not path.is_file():
        raise RunFileError(
            path, "(file)", "does not exist", "pass the path of a run file (docs/runs.md)"
        )
    try:
        raw = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise RunFileError(
            path, "(syntax)", f"is not valid YAML ({exc})", "fix the YAML syntax"
        ) from None
    if not isinstance(raw, dict):
        raise RunFileError(
            path, "(top level)", "must be a mapping", "start with `name:` and `tasks:`"
        )
    allowed = (
        "name",
        "tasks",
        "candidates",
        "devices",
        "iterations",
        "cpu_slots",
        "max_retries",
        "agents",
        "variants",
        "parallelism",
        "ray",
        "profile",
        "baseline_impl",
    )
    unknown = sorted(set(raw) - set(allowed))
    if unknown:
        raise RunFileError(
            path, unknown[0], "is not a run-file key", f"use only {', '.join(allowed)}"
        )

    def strings(key: str, default: tuple[str, ...] | None) -> tuple[str, ...]:
        value = raw.get(key, default)
        if value is None:
            raise RunFileError(
                path, key, "is missing", f"list the {key}, e.g. `{key}: [gemm/bf16_gemm]`"
            )
        if isinstance(value, str):
            value = [value]
        if (
            not isinstance(value, (list, tuple))
            or not value
            or not all(isinstance(v, str) for v in value)
        ):
            raise RunFileError(
                path,
                key,
                f"must be a non-empty list of strings, got {value!r}",
                f"write e.g. `{key}: [a, b]`",
            )
        return tuple(value)

    def positive(key: str, default: int | None) -> int | None:
        value = raw.get(key, default)
        if value is not None and (
            not isinstance(value, int)
            or isinstance(value, bool)
            or value < (0 if key == "max_retries" else 1)
        ):
            raise RunFileError(
                path, key, f"must be a positive integer, got {value!r}", f"write e.g. `{key}: 2`"
            )
        return value

    agents = _agents(path, raw.get("agents"))
    spec = RunSpec(
        name=str(raw.get("name") or path.stem),
        tasks=strings("tasks", None),
        candidates=strings("candidates", ("starter",)) if "candidates" in raw or not agents else (),
        devices=strings("devices", ("cpu",)),
        iterations=positive("iterations", 1) or 1,
        cpu_slots=positive("cpu_slots", None),
        max_retries=positive("max_retries", 2) or 0,
        tasks_dir=str(tasks_dir) if tasks_dir else None,
        base_dir=str(path.resolve().parent),
        agents=agents,
        variants=_variants(path, raw.get("variants")),
        parallelism=positive("parallelism", None),
        ray=_ray_address(path, raw.get("ray")),
        profile=_profile(path, raw.get("profile", "full")),
        baseline_impl=_baseline_impl(path, raw.get("baseline_impl")),
    )
    from core.orchestration.planning import plan, plan_attempts  # planning reads RunSpec from here

    try:
        plan(spec)
    except (LookupError, ValueError) as exc:
        raise RunFileError(
            path,
            "tasks" if "task" in str(exc) else "candidates",
            str(exc),
            "see `arena tasks list` and docs/runs.md",
        ) from None
    try:
        plan_attempts(spec)
    except (LookupError, ValueError) as exc:
        raise RunFileError(
            path, "agents", str(exc), "fix the agent's options (docs/runs.md)"
        ) from None
    return spec


def _ray_address(path: Path, raw: Any) -> str | None:
    if raw is not None and (not isinstance(raw, str) or not raw.strip()):
        raise RunFileError(
            path,
            "ray",
            f"must be a Ray address, got {raw!r}",
            "write e.g. `ray: auto`, `ray: ray://head:10001` or `ray: local` (docs/ray.md)",
        )
    return raw.strip() if raw else None


def _baseline_impl(path: Path, raw: Any) -> str | None:
    if raw is None:
        return None
    if not isinstance(raw, str) or not raw.strip():
        raise RunFileError(
            path,
            "baseline_impl",
            f"must be a baseline's name, got {raw!r}",
            "write e.g. `baseline_impl: torch_compile` (an imported KernelBench task's compile baseline)",
        )
    return raw.strip()


def _profile(path: Path, raw: Any) -> str:
    try:
        return parse_profile(raw).value
    except ProfileError as exc:
        raise RunFileError(
            path, "profile", str(exc), "write `profile: full` (leaderboards) or `profile: train`"
        ) from None


def _known_keys(path: Path, where: str, entry: dict, fields: Sequence[str], noun: str) -> None:
    """Refuse the first key of a run file's list entry that is not one of `fields` (`noun`: what
    an entry is, with its article)."""
    unknown = sorted(set(entry) - set(fields))
    if unknown:
        raise RunFileError(
            path, f"{where}.{unknown[0]}", f"is not {noun} key", f"use only {', '.join(fields)}"
        )


def _agents(path: Path, raw: Any) -> tuple[AgentConfig, ...]:
    if raw is None:
        return ()
    example = "write e.g. `agents: [{name: ref, kind: reference}]`"
    if not isinstance(raw, list) or not raw:
        raise RunFileError(
            path, "agents", f"must be a non-empty list of agents, got {raw!r}", example
        )
    agents: list[AgentConfig] = []
    for i, entry in enumerate(raw):
        where = f"agents[{i}]"
        if not isinstance(entry, dict):
            raise RunFileError(
                path, where, f"must be a mapping with name and kind, got {entry!r}", example
            )
        _known_keys(path, where, entry, AGENT_FIELDS, "an agent")
        kind = entry.get("kind")
        if kind not in AGENT_KINDS:
            raise RunFileError(
                path, f"{where}.kind", f"is {kind!r}", f"use one of {', '.join(AGENT_KINDS)}"
            )
        name = entry.get("name", kind)
        if not isinstance(name, str) or not name or "|" in name or "/" in name:
            raise RunFileError(
                path,
                f"{where}.name",
                f"must be a non-empty name without | or /, got {name!r}",
                "name the agent, e.g. `name: claude-sonnet`",
            )
        if any(a.name == name for a in agents):
            raise RunFileError(
                path, f"{where}.name", f"`{name}` is used twice", "give each agent its own name"
            )
        model = entry.get("model")
        if model is not None and not isinstance(model, str):
            raise RunFileError(
                path,
                f"{where}.model",
                f"must be a string, got {model!r}",
                "write e.g. `model: gpt-5`",
            )
        options = entry.get("options") or {}
        if not isinstance(options, dict):
            raise RunFileError(
                path,
                f"{where}.options",
                f"must be a mapping, got {options!r}",
                "write e.g. `options: {solution: baseline}`",
            )
        numbers: dict[str, Any] = {}
        for key, kind_of in (("budget_s", float), ("max_cost_usd", float), ("max_tokens", int)):
            value = entry.get(key)
            if value is None:
                continue
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or value <= 0
                or (kind_of is int and not isinstance(value, int))
            ):
                raise RunFileError(
                    path,
                    f"{where}.{key}",
                    f"must be a positive {'integer' if kind_of is int else 'number'}, got {value!r}",
                    f"write e.g. `{key}: {600 if key == 'budget_s' else 5 if key == 'max_cost_usd' else 1000000}`",
                )
            numbers[key] = kind_of(value)
        agents.append(
            AgentConfig(name=name, kind=kind, model=model, options=dict(options), **numbers)
        )
    return tuple(agents)


def _variants(path: Path, raw: Any) -> tuple[Variant, ...]:
    if raw is None:
        return (Variant(),)
    example = "write e.g. `variants: [{name: plain}, {name: sheet, cheatsheet: true}]`"
    if not isinstance(raw, list) or not raw:
        raise RunFileError(path, "variants", f"must be a non-empty list, got {raw!r}", example)
    variants: list[Variant] = []
    for i, entry in enumerate(raw):
        where = f"variants[{i}]"
        if isinstance(entry, str):
            entry = {"name": entry}
        if not isinstance(entry, dict):
            raise RunFileError(
                path, where, f"must be a mapping with a name, got {entry!r}", example
            )
        _known_keys(path, where, entry, VARIANT_FIELDS, "a variant")
        name = entry.get("name")
        if (
            not isinstance(name, str)
            or not name
            or "|" in name
            or "/" in name
            or any(v.name == name for v in variants)
        ):
            raise RunFileError(
                path,
                f"{where}.name",
                f"must be a unique non-empty name without | or /, got {name!r}",
                example,
            )
        if not isinstance(entry.get("cheatsheet", False), bool):
            raise RunFileError(
                path,
                f"{where}.cheatsheet",
                f"must be true or false, got {entry['cheatsheet']!r}",
                "write `cheatsheet: true`",
            )
        if not isinstance(entry.get("prompt", ""), str):
            raise RunFileError(
                path, f"{where}.prompt", "must be text", 'write `prompt: "extra instructions"`'
            )
        if not isinstance(entry.get("options", {}), dict):
            raise RunFileError(
                path,
                f"{where}.options",
                "must be a mapping",
                "write e.g. `options: {temperature: 0}`",
            )
        variants.append(
            Variant(
                name=name,
                cheatsheet=entry.get("cheatsheet", False),
                prompt=entry.get("prompt", ""),
                options=dict(entry.get("options", {})),
            )
        )
    return tuple(variants)
