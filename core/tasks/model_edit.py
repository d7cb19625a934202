"""task.yaml edited as text, so that comments and layout survive (PyYAML would drop comments):
add-model's rows appended to `workloads.models` (created after the workloads' last set if
absent) or to `workloads.visible`, a model's earlier rows in `workloads.models` removed, and the
flow-style `models:` list kept in step. Every edit works from the node positions of
`yaml.compose`, one line per row (`- {T: 1, H: 4096, model: NAME, note: ...}`)."""

from __future__ import annotations

import json
import re
from typing import Any

import yaml

MODELS_COMMENT = (
    "# Written by `arena tasks add-model` (tasks/models.yaml): the shapes the models run, each\n"
    "# checked at a small size by this task's reference and baseline; not timed by evaluations.\n"
)


def scalar(value: Any) -> str:
    """A YAML flow scalar that reads back as `value`: bare where safe, else double-quoted."""
    text = str(value)
    if isinstance(value, int) or (
        re.fullmatch(r"[A-Za-z][A-Za-z0-9_.\-]*( [A-Za-z0-9_.\-+/()]+)*", text)
        and yaml.safe_load(text) == text
    ):
        return text
    return json.dumps(text)  # a JSON string is a YAML double-quoted scalar


def workload_line(axes: dict[str, int], model: str, note: str) -> str:
    items = [f"{k}: {v}" for k, v in axes.items()] + [f"model: {scalar(model)}"]
    if note:
        items.append(f"note: {scalar(note)}")
    return "{" + ", ".join(items) + "}"


def _child(node: yaml.Node | None, key: str) -> yaml.Node | None:
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            if isinstance(k, yaml.ScalarNode) and k.value == key:
                return v
    return None


def _line_start(text: str, index: int) -> int:
    return text.rfind("\n", 0, index) + 1


def _line_end(text: str, index: int) -> int:
    eol = text.find("\n", index)
    return len(text) if eol < 0 else eol + 1


def _append_to(text: str, seq: yaml.SequenceNode, lines: list[str]) -> tuple[int, str]:
    """(where, what) to insert `lines` after the last entry of block sequence `seq`."""
    if seq.flow_style:
        raise ValueError(
            "the list is a flow list ([...]): write it as `- {...}` lines to let add-model extend it"
        )
    last = seq.value[-1]
    start = _line_start(text, last.start_mark.index)
    prefix = text[start : last.start_mark.index]
    if not prefix.strip().startswith("-"):
        raise ValueError("its last entry does not start its line with `- `")
    indent = prefix[: len(prefix) - len(prefix.lstrip())] + "- "
    at = _line_end(text, last.end_mark.index)
    block = "".join(indent + line + "\n" for line in lines)
    return at, ("\n" + block if at == len(text) and not text.endswith("\n") else block)


def insert_rows(text: str, lines: list[str], into: str = "models") -> str:
    """task.yaml's text with `lines` appended to `workloads.<into>` (visible or models)."""
    if not lines:
        return text
    root = yaml.compose(text)
    workloads = _child(root, "workloads")
    if not isinstance(workloads, yaml.MappingNode):
        raise ValueError("task.yaml has no `workloads:` mapping")
    seq = _child(workloads, into)
    if isinstance(seq, yaml.SequenceNode) and seq.value:
        at, block = _append_to(text, seq, lines)
        return text[:at] + block + text[at:]
    if into == "visible":
        raise ValueError("`workloads.visible` is not a list with entries")
    if seq is not None:
        raise ValueError("`workloads.models` is there but not a list with entries: remove it")
    key = workloads.value[0][0]
    indent = " " * key.start_mark.column
    at = _line_end(text, _last_leaf(workloads).end_mark.index)
    comment = "".join(indent + c + "\n" for c in MODELS_COMMENT.splitlines())
    block = comment + f"{indent}models:\n" + "".join(f"{indent}  - {line}\n" for line in lines)
    sep = "" if at == 0 or text[at - 1] == "\n" else "\n"
    return text[:at] + sep + block + text[at:]


def remove_rows(text: str, model: str) -> tuple[str, int]:
    """The text without `model`'s rows in `workloads.models` (the key and its comment go too
    when no row is left), and how many rows went."""
    root = yaml.compose(text)
    seq = _child(_child(root, "workloads"), "models")
    if not isinstance(seq, yaml.SequenceNode):
        return text, 0
    gone = [n for n in seq.value if _model_of(n) == model]
    if not gone:
        return text, 0
    if len(gone) == len(seq.value):  # the whole set: its key, its comment and its rows
        workloads = _child(root, "workloads")
        assert isinstance(workloads, yaml.MappingNode)
        key = next(k for k, v in workloads.value if v is seq)
        start = _line_start(text, key.start_mark.index)
        comment = text.rfind(MODELS_COMMENT.splitlines()[0], 0, start)
        if (
            comment >= 0
            and text[comment:start].strip().startswith("#")
            and all(line.strip().startswith("#") for line in text[comment:start].splitlines())
        ):
            start = _line_start(text, comment)
        end = _line_end(text, seq.value[-1].end_mark.index)
        return text[:start] + text[end:], len(gone)
    for node in sorted(gone, key=lambda n: n.start_mark.index, reverse=True):
        start = _line_start(text, node.start_mark.index)
        text = text[:start] + text[_line_end(text, node.end_mark.index) :]
    return text, len(gone)


def _last_leaf(node: yaml.Node) -> yaml.Node:
    """The last node written inside `node` (block collections end where the next key starts,
    after any comments between: their leaf ends where their text does)."""
    while (
        isinstance(node, (yaml.MappingNode, yaml.SequenceNode))
        and not node.flow_style
        and node.value
    ):
        last = node.value[-1]
        node = last[1] if isinstance(node, yaml.MappingNode) else last
    return node


def _model_of(node: yaml.Node) -> str | None:
    m = _child(node, "model")
    return m.value if isinstance(m, yaml.ScalarNode) else None


def set_model_listed(text: str, model: str, listed: bool) -> str:
    """The flow `models: [...]` list with `model` added (listed) or removed; a block list or a
    missing one is left alone."""
    node = _child(yaml.compose(text), "models")
    if not isinstance(node, yaml.SequenceNode) or not node.flow_style:
        return text
    names = [n.value for n in node.value if isinstance(n, yaml.ScalarNode)]
    if listed and model not in names:
        close = text.rfind("]", 0, node.end_mark.index)
        return text[:close] + (", " if names else "") + scalar(model) + text[close:]
    if not listed and model in names:
        kept = [n for n in names if n != model]
        start, end = node.start_mark.index, node.end_mark.index
        return text[:start] + "[" + ", ".join(scalar(n) for n in kept) + "]" + text[end:]
    return text
