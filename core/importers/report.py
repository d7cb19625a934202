"""What an import did: the tasks it wrote and the problems it could not convert, with reasons."""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class Converted:
    """A problem written as a task folder; `notes` say what was derived or approximated."""

    source: str  # the problem's path inside the checkout
    task_id: str
    path: str
    notes: tuple[str, ...] = ()
    mode: str = "native"  # `external`: it runs its own commands, scored by its own rules (core/tasks/external.py)


@dataclass(frozen=True)
class Skipped:
    """A problem that was not converted; `reason` is one line a person can act on, `kind` a
    short category for the summary."""

    source: str
    kind: str
    reason: str


@dataclass
class ImportReport:
    benchmark: str
    root: str
    out: str
    converted: list[Converted] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)

    @property
    def total(self) -> int:
        return len(self.converted) + len(self.skipped)

    def by_group(self, group_of: Any) -> dict[str, tuple[int, int]]:
        """(converted, total) per group, `group_of(source)` naming the group (a level, a category)."""
        done = Counter(group_of(c.source) for c in self.converted)
        seen = Counter(group_of(s.source) for s in self.skipped) + done
        return {g: (done.get(g, 0), n) for g, n in sorted(seen.items())}

    def reasons(self) -> dict[str, int]:
        return dict(Counter(s.kind for s in self.skipped).most_common())

    def to_json(self) -> dict[str, Any]:
        return {
            "benchmark": self.benchmark,
            "root": self.root,
            "out": self.out,
            "converted": [asdict(c) for c in self.converted],
            "skipped": [asdict(s) for s in self.skipped],
        }
