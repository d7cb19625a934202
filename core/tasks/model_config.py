"""A model for `arena tasks add-model`: its config.json read (`read_config`), named, and turned
into the operations it runs (core/tasks/model_arch.py reads the architecture,
core/tasks/model_ops.py lists the operations).

The name: `--name`, else the repo id of a Hugging Face cache path
(`.../models--ORG--NAME/snapshots/HASH/config.json` is NAME), else `_name_or_path`'s last part,
else the folder of a `config.json`, else the file's stem.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.tasks.model_arch import Arch, ModelConfigError, read_arch
from core.tasks.model_ops import Keys, Op, legacy_keys, operations

__all__ = ["ModelConfig", "ModelConfigError", "config_from_dict", "read_config"]

_CACHE_REPO = re.compile(r"models--([^/\\]+?)--([^/\\]+)$")


@dataclass(frozen=True)
class ModelConfig:
    name: str
    path: Path | None
    arch: Arch
    keys: Keys  # the model-wide keys (and window and chunk): what a section without `op` reads
    ops: tuple[Op, ...]
    repo: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "repo": self.repo,
            "path": str(self.path) if self.path else None,
            "model_type": self.arch.model_type,
            "keys": self.keys,
            "layers": {
                "attention": dict(self.arch.attention),
                "dense_mlp": self.arch.dense_layers,
                "moe": self.arch.moe_layers,
            },
            "read": list(self.arch.read),
            "refused": dict(self.arch.refused),
            "operations": [
                {"kind": o.kind, "note": o.note, "layers": o.layers, "keys": o.own}
                for o in self.ops
            ],
        }


def _cache_repo(path: Path) -> str | None:
    """`ORG/NAME` of a config inside a Hugging Face cache snapshot, else None."""
    for parent in path.resolve().parents:
        m = _CACHE_REPO.search(parent.name)
        if m:
            return f"{m.group(1)}/{m.group(2)}"
    return None


def _name_for(raw: dict[str, Any], path: Path | None) -> tuple[str, str | None]:
    repo = _cache_repo(path) if path is not None else None
    given = raw.get("_name_or_path")
    if repo is None and isinstance(given, str) and given.strip():
        repo = given.strip().rstrip("/")
    if repo:
        return repo.replace("\\", "/").split("/")[-1], repo
    if path is None:
        return "", None
    return (path.resolve().parent.name if path.stem == "config" else path.stem), None


def config_from_dict(
    raw: dict[str, Any],
    name: str | None = None,
    path: Path | None = None,
    repo: str | None = None,
) -> ModelConfig:
    where = str(path) if path else (name or "config")
    if not isinstance(raw, dict):
        raise ModelConfigError(
            f"{where}: (top level): is not a JSON object: pass a Hugging Face config.json"
        )
    arch = read_arch(raw, where)
    found, found_repo = _name_for(raw, path)
    name = name or found
    if not name or any(c in name for c in "\n{}[],#&*!|>'\"%@`:"):
        raise ModelConfigError(
            f"{where}: model name {name!r} cannot be written into task.yaml: pass --name NAME (letters, digits, . - _)"
        )
    return ModelConfig(
        name=name,
        path=path,
        arch=arch,
        keys=legacy_keys(arch),
        ops=tuple(operations(arch)),
        repo=repo or found_repo,
    )


def read_config(path: Path, name: str | None = None) -> ModelConfig:
    path = Path(path)
    try:
        raw = json.loads(path.read_text())
    except FileNotFoundError:
        raise ModelConfigError(f"{path}: no such file: pass a Hugging Face config.json") from None
    except IsADirectoryError:
        raise ModelConfigError(
            f"{path}: is a folder: pass its config.json, or the folder with --zoo-dir"
        ) from None
    except json.JSONDecodeError as exc:
        raise ModelConfigError(
            f"{path}: line {exc.lineno}: not valid JSON ({exc.msg}): pass a Hugging Face config.json"
        ) from None
    return config_from_dict(raw, name, path)
