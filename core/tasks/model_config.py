"""`arena tasks add-model CONFIG.json`: a new model's workloads in every task it uses.

A Hugging Face style config.json is mapped onto the normalized keys of core.tasks.vocabulary.MODEL_KEYS;
each task whose `model_workloads.requires` keys the model has gets the cross product of its
axis rules as new visible workloads. They are inserted into task.yaml **as text**, after the
last visible entry and in the same flow style, so comments and formatting survive (PyYAML
would drop the comments); the task is then loaded again and the file rolled back if it no
longer validates.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from core.model.task import Task
from core.tasks import manifest
from core.tasks.fields import TaskError
from core.tasks.spec import load_task
from core.tasks.vocabulary import MODEL_KEYS

# Hugging Face names per normalized key, first found wins. Families: Llama (dense), Qwen3-MoE,
# DeepSeek-V3 (MLA + grouped routing), gpt-oss and Mixtral (num_local_experts).
HF_NAMES: dict[str, tuple[str, ...]] = {
    "hidden_size": ("hidden_size", "d_model", "n_embd"),
    "num_heads": ("num_attention_heads", "n_head"),
    "num_kv_heads": ("num_key_value_heads", "num_kv_heads"),
    "head_dim": ("head_dim",),
    "intermediate_size": ("intermediate_size", "ffn_dim"),
    "num_experts": ("num_experts", "n_routed_experts", "num_local_experts"),
    "top_k": ("num_experts_per_tok", "experts_per_token", "moe_topk"),
    "expert_intermediate_size": ("moe_intermediate_size", "expert_intermediate_size"),
    "n_group": ("n_group",),
    "topk_group": ("topk_group",),
    "kv_lora_rank": ("kv_lora_rank",),
    "qk_rope_head_dim": ("qk_rope_head_dim",),
    "v_head_dim": ("v_head_dim",),
    "sliding_window": ("sliding_window",),
    "vocab_size": ("vocab_size",),
}
NOTE = "add-model"


class ModelConfigError(ValueError):
    """A config file that cannot be read; the message names the file, the key and the fix."""


@dataclass(frozen=True)
class ModelConfig:
    name: str
    path: Path
    keys: dict[str, int]  # normalized key -> value


@dataclass
class TaskChange:
    """What add-model did (or, with --dry-run, would do) to one task."""

    task_id: str
    added: list[dict[str, int]] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # workloads not added, with why
    reason: str | None = None  # why the whole task was left alone
    error: str | None = None  # the edit broke the task: rolled back


def _positive_int(value: Any) -> int | None:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or value != int(value)
        or value <= 0
    ):
        return None
    return int(value)


def normalize(raw: dict[str, Any]) -> dict[str, int]:
    """Normalized keys of a config dict (its `text_config` first, for multimodal configs)."""
    cfg = {**raw, **raw["text_config"]} if isinstance(raw.get("text_config"), dict) else dict(raw)
    keys: dict[str, int] = {}
    for key, names in HF_NAMES.items():
        for hf in names:
            value = _positive_int(cfg.get(hf))
            if value is not None:
                keys[key] = value
                break
    if cfg.get("use_sliding_window") is False:
        keys.pop("sliding_window", None)  # Qwen configs carry a window they do not use
    if "num_heads" in keys:
        keys.setdefault("num_kv_heads", keys["num_heads"])  # no GQA key: multi-head attention
    # MLA models (DeepSeek-V3, Kimi-K2) get no head_dim: their heads are kv_lora_rank,
    # qk_rope_head_dim and v_head_dim, and hidden_size // num_heads (56) would put them into
    # GQA attention and RoPE tasks with a head size they never use.
    if "head_dim" not in keys and "kv_lora_rank" not in keys:
        if (
            "num_heads" in keys
            and "hidden_size" in keys
            and keys["hidden_size"] % keys["num_heads"] == 0
        ):
            keys["head_dim"] = keys["hidden_size"] // keys["num_heads"]
    if (
        "num_experts" in keys
        and "expert_intermediate_size" not in keys
        and "intermediate_size" in keys
    ):
        # gpt-oss and Mixtral give the expert's width as intermediate_size.
        keys["expert_intermediate_size"] = keys["intermediate_size"]
    assert set(keys) <= set(MODEL_KEYS)
    return keys


def read_config(path: Path, name: str | None = None) -> ModelConfig:
    path = Path(path)
    try:
        raw = json.loads(path.read_text())
    except FileNotFoundError:
        raise ModelConfigError(f"{path}: no such file: pass a Hugging Face config.json") from None
    except json.JSONDecodeError as exc:
        raise ModelConfigError(
            f"{path}: line {exc.lineno}: not valid JSON ({exc.msg}): pass a Hugging Face config.json"
        ) from None
    if not isinstance(raw, dict):
        raise ModelConfigError(
            f"{path}: (top level): is not a JSON object: pass a Hugging Face config.json"
        )
    keys = normalize(raw)
    if "hidden_size" not in keys:
        raise ModelConfigError(
            f"{path}: `hidden_size`: missing (also under text_config): is this a transformer's config.json?"
        )
    if name is None:
        given = raw.get("_name_or_path") or ""
        # A bare `config.json` is named after its folder (a Hugging Face download is a folder per model).
        name = (
            given.rstrip("/").split("/")[-1]
            if given
            else (path.resolve().parent.name if path.stem == "config" else path.stem)
        )
    if not name or any(c in name for c in "\n{}[],#&*!|>'\"%@`"):
        raise ModelConfigError(
            f"{path}: model name {name!r} cannot be written into task.yaml: pass --name NAME (letters, digits, . - _)"
        )
    return ModelConfig(name=name, path=path, keys=keys)


# --- the text edit ---------------------------------------------------------------------------


def _scalar(value: Any) -> str:
    """A YAML flow scalar that reads back as `value`: bare where safe, else double-quoted."""
    text = str(value)
    if isinstance(value, int) or (
        re.fullmatch(r"[A-Za-z][A-Za-z0-9_.\-]*", text) and yaml.safe_load(text) == text
    ):
        return text
    return json.dumps(text)  # a JSON string is a YAML double-quoted scalar


def workload_line(axes: dict[str, int], model: str) -> str:
    items = [f"{k}: {v}" for k, v in axes.items()] + [f"model: {_scalar(model)}", f"note: {NOTE}"]
    return "{" + ", ".join(items) + "}"


def _child(node: yaml.Node, key: str) -> yaml.Node | None:
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            if isinstance(k, yaml.ScalarNode) and k.value == key:
                return v
    return None


def insert_workloads(text: str, lines: list[str], model: str | None = None) -> str:
    """task.yaml's text with `lines` (flow mappings) appended to `workloads.visible`, after its
    last entry, with that entry's indentation; and `model` appended to a flow `models:` list
    that lacks it. Everything else is left byte for byte."""
    root = yaml.compose(text)
    visible = _child(_child(root, "workloads"), "visible") if root is not None else None  # type: ignore[arg-type]
    if not isinstance(visible, yaml.SequenceNode) or not visible.value:
        raise ValueError("`workloads.visible` is not a list with entries")
    if visible.flow_style:
        raise ValueError(
            "`workloads.visible` is a flow list ([...]): write it as `- {...}` lines to let add-model extend it"
        )
    last = visible.value[-1]
    line_start = text.rfind("\n", 0, last.start_mark.index) + 1
    prefix = text[line_start : last.start_mark.index]  # e.g. "    - "
    if not prefix.strip().startswith("-"):
        raise ValueError("the last visible workload does not start its line with `- `")
    indent = prefix[: len(prefix) - len(prefix.lstrip())] + "- "
    end = last.end_mark.index
    eol = text.find("\n", end)
    insert_at = len(text) if eol < 0 else eol + 1
    block = "".join(indent + line + "\n" for line in lines)
    if eol < 0:
        block = "\n" + block
    edits = [(insert_at, block)]
    models = _child(root, "models")  # type: ignore[arg-type]
    if (
        model is not None
        and isinstance(models, yaml.SequenceNode)
        and models.flow_style
        and model not in [n.value for n in models.value if isinstance(n, yaml.ScalarNode)]
    ):
        close = text.rfind("]", 0, models.end_mark.index)
        edits.append((close, (", " if models.value else "") + _scalar(model)))
    for at, piece in sorted(edits, reverse=True):
        text = text[:at] + piece + text[at:]
    return text


# --- the command's work ----------------------------------------------------------------------


def plan(task: Task, config: ModelConfig) -> TaskChange:
    """The workloads `config` adds to `task` (nothing is written)."""
    change = TaskChange(task.id)
    mw = task.model_workloads
    if mw is None:
        change.reason = "no model_workloads section"
        return change
    missing = [k for k in mw.requires if k not in config.keys]
    if missing:
        change.reason = f"the model has no {', '.join(missing)}"
        return change
    excluded = [k for k in mw.excludes if k in config.keys]
    if excluded:
        change.reason = f"the task excludes models with {', '.join(excluded)}"
        return change
    try:
        rows = mw.workloads(config.keys)
    except KeyError as exc:
        change.reason = f"the model has no {exc.args[0]} (used in model_workloads.axes)"
        return change
    except ValueError as exc:
        change.reason = str(exc)
        return change
    visible = {tuple(w.axes.items()) for w in task.gpu.visible}
    hidden = {tuple(w.axes.items()) for w in task.gpu.hidden.fixed}
    seen: set[tuple[tuple[str, int], ...]] = set()
    for row in rows:
        key = tuple(row.items())
        label = ",".join(f"{k}={v}" for k, v in row.items())
        if key in visible:
            change.skipped.append(f"{label}: already visible")
        elif key in hidden:
            change.skipped.append(f"{label}: a hidden workload (a visible copy would reveal it)")
        elif key not in seen:
            seen.add(key)
            change.added.append(row)
    return change


def add_model(config: ModelConfig, tasks: list[Task], dry_run: bool = False) -> list[TaskChange]:
    """Add the model's workloads to every task that applies; roll a task back if the edited
    file does not load."""
    changes = []
    for task in tasks:
        change = plan(task, config)
        changes.append(change)
        if not change.added or dry_run:
            continue
        spec = task.file("task.yaml")
        before = spec.read_text()
        try:
            after = insert_workloads(
                before, [workload_line(row, config.name) for row in change.added], config.name
            )
        except (ValueError, yaml.YAMLError) as exc:
            change.error = f"task.yaml left unchanged: {exc}"
            change.added = []
            continue
        spec.write_text(after)
        try:
            load_task(task.path)
        except TaskError as exc:
            spec.write_text(before)
            change.error = f"rolled back: the edited task.yaml did not load ({exc})"
            change.added = []
            continue
        # The user's own edit of a bundled task: its manifest entry follows (core/tasks/manifest.py),
        # else the next evaluation would refuse the task as changed.
        manifest.record([spec])
    return changes
