"""The words and number formats every front end shares (the CLI's tables, the app, the docs).

One place, so that a stage, a timing kind or a figure reads the same wherever a person sees it:
the stage names are the result's own keys (`core.model.result.STAGES`, also the JSON and the RL API's
words), and a time measured on the `cpu` device, where Triton runs in its interpreter, is never
shown as a speedup (it says `INTERPRETED` instead; `--json` keeps the number).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from core.evaluation import paired
from core.model.result import STAGES

if TYPE_CHECKING:
    from core.model.result import Result, WorkloadFigures
    from core.store.standings import Entry

# The stage legend under every table that shows stage marks. `generalization` is the stored
# key (results, JSON, the RL API): the CLI, the app and the docs use that word, defined once here.
STAGE_LEGEND = "stages: " + ", ".join(STAGES) + " (generalization: correctness on hidden shapes)"

# A cpu timing is Triton's interpreter against PyTorch on the CPU: no ratio of the two means
# anything about a kernel, so tables print this word where a speedup or SOL would be.
INTERPRETED_CELL = "interp."
INTERPRETED = "interpreted: not a performance figure"
INTERPRETED_NOTE = f"{INTERPRETED_CELL} = {INTERPRETED} (the cpu device runs Triton in its interpreter; times are shown, never ranked)"


def ratio(x: float) -> str:
    return f"{x:.2f}×" if x >= 0.01 or x == 0 else f"{x:.1e}×"


def us(x: object) -> str:
    """A time in microseconds, as µs, ms or s; `–` when there is none."""
    if not isinstance(x, (int, float)) or isinstance(x, bool):
        return "–"
    if x >= 1e6:
        return f"{x / 1e6:.2f} s"
    return f"{x / 1000:.2f} ms" if x >= 1000 else f"{x:.1f} µs"


def percent(x: float | None) -> str:
    return "–" if x is None else f"{x * 100:.1f}%"


def band(side: dict[str, Any] | None, timing_kind: str) -> str:
    """What stands beside a time: the interquartile spread of a measured (or cpu) time, the ±
    band of a predicted one, or `measured` for a time a `sim:` result takes from a measurement on
    the GPU itself (its task's baseline): never `±0%`, which would say it was predicted exactly."""
    if not side:
        return ""
    if timing_kind == "predicted":
        if side.get("source") == "measured":
            return "measured"
        b = side.get("band")
        return f"±{b * 100:.0f}%" if isinstance(b, (int, float)) else "predicted"
    spread = side.get("spread")
    return f"±{spread * 100:.1f}%" if isinstance(spread, (int, float)) else ""


def time_cell(side: dict[str, Any] | None, timing_kind: str) -> str:
    """A time with its band (`12.3 µs ±1.2%`, `40.0 µs ±15%`, `38.1 µs measured`); `–` for none."""
    if not side or side.get("median_us") is None:
        return "–"
    text = us(side.get("median_us"))
    extra = band(side, timing_kind)
    return f"{text} {extra}" if extra else text


def workload_band(w: WorkloadFigures, timing_kind: str) -> float | None:
    """The relative ± band of one workload's speedup (core/evaluation/paired.py says how)."""
    return paired.speedup_band(w, timing_kind)


def result_band(result: Result) -> float | None:
    """The relative ± band of a result's speedup: its interval's, else its widest workload's
    (core/evaluation/paired.py)."""
    return paired.result_band(result)


def with_band(text: str, b: float | None, timing_kind: str) -> str:
    """A speedup with its band: `1.23× ±4%` (predicted: `±15%`), as it is where there is none."""
    if b is None or text in ("–", INTERPRETED_CELL):
        return text
    return f"{text} ±{b * 100:.0f}%" if timing_kind == "predicted" else f"{text} ±{b * 100:.1f}%"


def result_speedup(result: Result) -> str:
    """A result's speedup as every summary shows it: its band beside it; `–` where it failed (the
    failure rule); never a ratio of interpreted times."""
    if not result.passed:
        return "–"
    cell = speedup_cell(result.timing_kind, result.speedup)
    return with_band(cell, result_band(result), result.timing_kind)


def workload_speedup(w: WorkloadFigures, timing_kind: str) -> str:
    return with_band(
        speedup_cell(timing_kind, w.speedup), workload_band(w, timing_kind), timing_kind
    )


def speedup_cell(timing_kind: str, speedup: float | None) -> str:
    """What a table shows for a speedup: never a ratio of interpreted times; `–` where there is
    none (a failed result: the failure rule, docs/leaderboard.md)."""
    if speedup is None:
        return "–"
    return INTERPRETED_CELL if timing_kind == "cpu" else ratio(speedup)


def sol_cell(timing_kind: str, sol_fraction: float | None) -> str:
    return INTERPRETED_CELL if timing_kind == "cpu" else percent(sol_fraction)


def entry_cells(timing_kind: str, e: Entry) -> tuple[str, str, str, str]:
    """A board entry's speedup, fast_p, SOL and correct cells, the same in the CLI and the app.
    An entry with no correct result has no speedup or SOL of its own (`–`: it is not ranked,
    docs/leaderboard.md); with no result at all it has no figure."""
    if e.results == 0:
        return ("–",) * 4  # type: ignore[return-value]
    scored = e.correct > 0
    return (
        speedup_cell(timing_kind, e.speedup) if scored else "–",
        "–" if e.fast_p is None else f"{e.fast_p * 100:.0f}%",
        sol_cell(timing_kind, e.sol_fraction) if scored else "–",
        f"{e.correct * 100:.0f}%",
    )


def gap_cell(timing_kind: str, e: Entry) -> str:
    """The share of the baseline-to-speed-of-light gap the entry closed (docs/leaderboard.md):
    `–` where it has no correct result or its times are interpreted (cpu)."""
    if e.correct == 0 or timing_kind == "cpu" or e.gap_closed is None:
        return "–"
    return f"{e.gap_closed * 100:.0f}%"


def rank_cell(e: Entry) -> str:
    return "–" if e.rank is None else str(e.rank)
