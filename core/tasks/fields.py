"""Reading task.yaml field by field: `Fields` reads one mapping and raises `TaskError` naming the
file, the dotted field and the fix; `UnknownTaskError` is a task id no folder has."""

from __future__ import annotations

from pathlib import Path
from typing import Any, NoReturn

from core.model.formulas import formula_names


class TaskError(ValueError):
    """A task that cannot be used; the message names the file, the field and the fix."""

    def __init__(self, path: Path | str, field_name: str, problem: str, fix: str):
        self.path, self.field, self.problem, self.fix = str(path), field_name, problem, fix
        super().__init__(f"{path}: `{field_name}`: {problem}. Fix: {fix}")


class UnknownTaskError(LookupError):
    """A task id that no bundled or given task folder has."""


class Fields:
    """Reads one mapping of task.yaml, raising TaskError with the field's dotted path."""

    def __init__(self, path: Path, data: Any, where: str):
        self.path, self.where = path, where
        if not isinstance(data, dict):
            self.fail(
                "must be a mapping",
                f"write `{where}` as `key: value` lines"
                if where
                else "start task.yaml with `schema_version: 1`",
            )
        self.data: dict[str, Any] = data

    def at(self, key: str) -> str:
        return f"{self.where}.{key}" if self.where else key

    def fail(self, problem: str, fix: str, key: str | None = None) -> NoReturn:
        raise TaskError(
            self.path, self.at(key) if key else (self.where or "(top level)"), problem, fix
        )

    def undeclared(self, expr: str, known: dict[str, str], key: str, over: str) -> set[str]:
        """The names formula `expr` (field `key`) uses that `known` lacks; one that is not
        arithmetic fails, naming what it may use `over` (the axes, the axes and W)."""
        try:
            return formula_names(expr) - set(known)
        except (SyntaxError, ValueError) as exc:
            self.fail(
                f"`{expr}` cannot be evaluated ({exc})",
                f"use + - * / // ** and min, max, ceil, floor, log2 over {over}",
                key,
            )

    def get(
        self,
        key: str,
        kind: type | tuple[type, ...],
        fix: str,
        default: Any = ...,
    ) -> Any:
        if key not in self.data:
            if default is ...:
                self.fail("is missing", fix, key)
            return default
        value = self.data[key]
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
            names = (
                kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
            )
            self.fail(f"must be a {names}, got {value!r}", fix, key)
        return value

    def no_unknown(self, allowed: tuple[str, ...]) -> None:
        unknown = sorted(set(self.data) - set(allowed))
        if unknown:
            self.fail(f"unknown key(s) {', '.join(unknown)}", f"use only {', '.join(allowed)}")


def read_list(fields: Fields, key: str) -> list[Any]:
    items = fields.get(
        key, list, f"list the {key} in call order: `- {{name: x, shape: [M, K], dtype: bfloat16}}`"
    )
    if not items:
        fields.fail("is empty", f"list at least one of the {key}", key)
    return items
