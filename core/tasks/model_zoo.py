"""The model zoo (`tasks/models.yaml`): the models the catalogue follows, each with its config.json
as published, and the serving point at which the coverage table (core/tasks/model_coverage.py)
estimates each operation's share of time. `arena tasks add-model --zoo` reads it; a folder of
config.json files (`arena tasks add-model DIR`) gives the same list without a serving point."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from core.tasks.discovery import bundled_tasks_root
from core.tasks.model_config import ModelConfig, ModelConfigError, config_from_dict, read_config


def zoo_path() -> Path:
    return bundled_tasks_root() / "models.yaml"


@dataclass(frozen=True)
class Serving:
    """One GPU's share of a serving point: a decode step of `batch` sequences with `context`
    tokens each, and a prefill of `prompt` tokens; experts spread over `expert_parallel` GPUs."""

    gpu: str = "h200"
    batch: int = 64
    context: int = 4096
    prompt: int = 4096
    expert_parallel: int = 8

    def to_json(self) -> dict[str, Any]:
        return {
            "gpu": self.gpu,
            "decode": {"batch": self.batch, "context": self.context},
            "prefill": {"tokens": self.prompt},
            "expert_parallel": self.expert_parallel,
        }


@dataclass(frozen=True)
class Zoo:
    models: list[ModelConfig]
    serving: Serving = field(default_factory=Serving)
    path: Path | None = None


def _int(where: str, data: dict[str, Any], key: str, default: int) -> int:
    v = data.get(key, default)
    if not isinstance(v, int) or isinstance(v, bool) or v < 1:
        raise ModelConfigError(f"{where}: `{key}`: {v!r} is not a positive integer")
    return v


def read_zoo(path: Path | None = None) -> Zoo:
    """The zoo file's models (named as it names them) and serving point."""
    path = Path(path) if path is not None else zoo_path()
    try:
        data = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise ModelConfigError(
            f"{path}: no such file: pass the model zoo (tasks/models.yaml)"
        ) from None
    except yaml.YAMLError as exc:
        raise ModelConfigError(f"{path}: not valid YAML ({str(exc).splitlines()[0]})") from None
    if not isinstance(data, dict) or not isinstance(data.get("models"), list):
        raise ModelConfigError(
            f"{path}: `models`: missing: list the models as `- {{name, repo, config}}`"
        )
    s = data.get("serving") or {}
    decode, prefill = s.get("decode") or {}, s.get("prefill") or {}
    serving = Serving(
        gpu=str(s.get("gpu", "h200")),
        batch=_int(f"{path}: serving.decode", decode, "batch", 64),
        context=_int(f"{path}: serving.decode", decode, "context", 4096),
        prompt=_int(f"{path}: serving.prefill", prefill, "tokens", 4096),
    )
    models, names = [], set()
    for i, entry in enumerate(data["models"]):
        where = f"{path}: models[{i}]"
        if not isinstance(entry, dict) or not isinstance(entry.get("config"), dict):
            raise ModelConfigError(
                f"{where}: `config`: missing: give the model's config.json as a mapping"
            )
        name = entry.get("name")
        if not isinstance(name, str) or not name:
            raise ModelConfigError(f"{where}: `name`: missing: name the model as its rows will")
        if name in names:
            raise ModelConfigError(f"{where}: `name`: {name} is listed twice")
        names.add(name)
        repo = entry.get("repo")
        try:
            models.append(
                config_from_dict(
                    entry["config"], name, None, repo if isinstance(repo, str) else None
                )
            )
        except ModelConfigError as exc:
            raise ModelConfigError(f"{where} ({name}): {exc}") from None
    return Zoo(models, serving, path)


def configs_in(paths: list[Path], name: str | None = None) -> list[ModelConfig]:
    """The configs named on the command line: a config.json each, or a folder holding them
    (its *.json files and its subfolders' config.json), in name order."""
    found: list[Path] = []
    for p in paths:
        p = Path(p)
        if p.is_dir():
            inner = sorted(p.glob("*.json")) + sorted(p.glob("*/config.json"))
            if not inner:
                raise ModelConfigError(
                    f"{p}: holds no *.json and no */config.json: pass config files"
                )
            found.extend(inner)
        else:
            found.append(p)
    if name is not None and len(found) != 1:
        raise ModelConfigError(
            f"--name {name}: names one model, but {len(found)} configs were given"
        )
    return [read_config(p, name) for p in found]
