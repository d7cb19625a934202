"""The queue's view of rows: filtering, sorting and the cells of a table line.

Pure functions over `Row`s so that tests can check them without an app.
A filter is typed as words: `state:failed agent:ref family:gemm device:cpu` narrow by field
(a prefix matches), any other word must appear in the task, agent or device.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rich.text import Text

from arena_tui.app.model import Row
from arena_tui.figures import INTERPRETED_CELL, ratio, result_speedup

# Where a row stands (state, stage) and its outcome (correct, speedup) first: at 80 columns the
# table scrolls sideways, and what a person scans for must be on screen; who and where after.
COLUMNS = ("#", "task", "state", "stage", "ok", "speedup", "SOL", "elapsed", "agent", "device")
FILTER_FIELDS = ("state", "agent", "family", "device", "task")
# Sort orders the `s` key cycles through: (name, key function).
SORTS: tuple[tuple[str, object], ...] = (
    ("plan", lambda r: (0,)),
    ("state", lambda r: (r.status, r.state)),
    ("task", lambda r: (r.task, r.agent)),
    ("agent", lambda r: (r.agent, r.task)),
    ("device", lambda r: (r.device, r.task)),
    ("speedup", lambda r: (-(r.speedup or 0.0),)),
)
STATE_STYLE = {
    "queued": "dim",
    "running": "cyan",
    "checking": "cyan",
    "evaluating": "blue",
    "retrying": "yellow",
    "done": "green",
    "failed": "red",
    "cancelled": "dim italic",
}


@dataclass(frozen=True)
class Filter:
    fields: dict[str, str] = field(default_factory=dict)
    words: tuple[str, ...] = ()

    @classmethod
    def parse(cls, text: str) -> Filter:
        fields: dict[str, str] = {}
        words: list[str] = []
        for part in text.lower().split():
            name, sep, value = part.partition(":")
            if sep and name in FILTER_FIELDS and value:
                fields[name] = value
            else:
                words.append(part)
        return cls(fields, tuple(words))

    def matches(self, row: Row) -> bool:
        # `state:` matches the state or the verdict: an attempt is `done` whether it passed or failed.
        values = {
            "state": (row.state, row.status),
            "agent": (row.agent,),
            "family": (row.family,),
            "device": (row.device,),
            "task": (row.task,),
        }
        if any(not any(x.lower().startswith(v) for x in values[k]) for k, v in self.fields.items()):
            return False
        hay = f"{row.task} {row.agent} {row.device} {row.variant}".lower()
        return all(w in hay for w in self.words)

    def __bool__(self) -> bool:
        return bool(self.fields or self.words)


def visible(rows: list[Row], flt: Filter, sort: int, reverse: bool) -> list[Row]:
    """The rows to show, in order (a stable sort keeps the plan's order among equals)."""
    kept = [r for r in rows if flt.matches(r)]
    _, key = SORTS[sort % len(SORTS)]
    return sorted(kept, key=key, reverse=reverse)  # type: ignore[arg-type]


def elide(text: str, width: int) -> str:
    """`text` in at most `width` cells, its middle left out (`elementwi…/axpy`): both ends tell
    rows apart, the start (the family) and the end (the name)."""
    if len(text) <= width or width < 5:
        return text
    head = (width - 1) // 2
    return f"{text[:head]}…{text[len(text) - (width - 1 - head) :]}"


def elide_path(text: str, width: int) -> str:
    """A candidate's name in at most `width` cells. A path keeps its file name (`…/tuned.py`):
    two files in one folder differ at the end, never at a shared folder prefix; a name that is no
    path keeps both ends (`elide`)."""
    if len(text) <= width or width < 5:
        return text
    if "/" not in text:
        return elide(text, width)
    name = text.rsplit("/", 1)[1]
    return f"…/{name}" if len(name) + 2 <= width else "…" + name[len(name) - (width - 1) :]


AGENT_WIDTH = 40  # after the numbers (the table scrolls there): a long path keeps its file name
DEVICE_WIDTH = 20
MIN_TASK = 12


def fit_task_width(rows: list[tuple[Text | str, ...]], width: int) -> int:
    """How wide the task column may be so that every column up to `elapsed` fits `width` cells
    (DataTable pads each column by one cell a side): at 80 columns the numbers stay on screen
    whole, and the task id gives way (middle elided), never a number."""
    last = COLUMNS.index("elapsed")
    others = [
        max([len(COLUMNS[i])] + [len(str(r[i])) for r in rows])
        for i in range(last + 1)
        if COLUMNS[i] != "task"
    ]
    return max(MIN_TASK, width - sum(others) - 2 * (last + 1) - 1)


def elapsed_text(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:4.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}m{secs:02d}s" if minutes < 60 else f"{minutes // 60}h{minutes % 60:02d}m"


def ratio_text(x: float | None) -> str:
    return "–" if x is None else ratio(x)


def interpreted(row: Row) -> bool:
    """A cpu-device row: Triton interpreted, so its speedup is no performance figure."""
    kind = (
        row.result.timing_kind
        if row.result is not None
        else ("cpu" if row.device.rsplit("/", 1)[-1] == "cpu" else "")
    )
    return kind == "cpu"


def cells(row: Row, now: float) -> tuple[Text | str, ...]:
    """One table line; the order is COLUMNS."""
    state = Text(row.state, style=STATE_STYLE.get(row.state, ""))
    stage = row.stage or ""
    if row.result is not None and row.result.status != "passed":
        # A failed row's stage is where it failed: the state column stays narrow.
        state = Text(
            row.result.status.replace("infrastructure_error", "infra error"),
            style="yellow" if row.result.status == "infrastructure_error" else "red",
        )
        stage = row.result.failed_stage or stage
    if row.marked_infrastructure:
        state = Text(f"{row.state} (infra)", style="yellow")
    if row.outcome in ("agent_error", "no_submission"):  # nothing of the agent's was scored
        state = Text(row.outcome, style="red")
    elif row.outcome == "starter":
        state.append(" (starter)", style="yellow")
    correct = {
        True: Text("✓", style="green"),
        False: Text("✗", style="red"),
        None: Text("–", style="dim"),
    }[row.correct]
    sol = f"{row.sol * 100:.1f}%" if row.sol is not None else "–"
    speedup = ratio_text(row.speedup)
    if row.result is not None and row.result.workloads:  # a verdict: its speedup with its band
        speedup = result_speedup(row.result)
    if interpreted(row):
        speedup = sol = INTERPRETED_CELL if row.speedup is not None else "–"
    return (
        row.label,
        row.task,
        state,
        stage,
        correct,
        speedup,
        sol,
        elapsed_text(row.elapsed(now)),
        elide_path(row.agent, AGENT_WIDTH),
        elide(row.device, DEVICE_WIDTH),
    )


def fitted_cells(rows: list[Row], now: float, width: int) -> list[tuple[Text | str, ...]]:
    """Every row's cells for a table `width` cells wide (`fit_task_width`)."""
    found = [cells(r, now) for r in rows]
    task_width = fit_task_width(found, width)
    return [(c[0], elide(str(c[1]), task_width), *c[2:]) for c in found]
