"""An attempt's or job's scores, stage by stage: what the scores screen shows.

Built from the recorded `Result` when there is one, else from the live stage statuses."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from arena_tui.app.model import Row
from arena_tui.app.widgets.speedup_chart import speedup_bars
from arena_tui.figures import INTERPRETED, result_speedup, time_cell, workload_speedup
from arena_tui.tables import Col, fitted
from core.model.result import STAGES, Result

MARK = {
    "passed": ("✓", "green"),
    "failed": ("✗", "red"),
    "timeout": ("⏱", "red"),
    "crashed": ("✗", "red"),
    "error": ("!", "yellow"),
    "skipped": ("·", "dim"),
}
LOG_TAIL = 20


def _mark(status: str) -> Text:
    symbol, style = MARK.get(status, ("?", ""))
    return Text(f"{symbol} {status}", style=style)


def header(row: Row) -> Text:
    text = Text(f"{row.task}", style="bold")
    text.append(f"  {row.agent} on {row.device}")
    if row.variant:
        text.append(f" ({row.variant})", style="dim")
    text.append(f"  [{row.key}]", style="dim")
    return text


def stage_table(row: Row, width: int = 200) -> Table:
    stages = {s.name: s for s in row.result.stages} if row.result else {}
    rows: list[list[str] | None] = []
    for name in STAGES:
        s = stages.get(name)
        status = (
            s.status if s else row.stages.get(name, "running" if row.stage == name else "skipped")
        )
        seconds = f"{s.seconds:.2f}" if s and s.seconds is not None else ""
        message = (s.message or "").splitlines()[0] if s and s.message else ""
        if not s and row.stage == name and row.heartbeat:  # the stage running now: how far it is
            message = row.heartbeat
        # the result's own stage names (figures.STAGE_LEGEND)
        rows.append([name, _mark(status).markup, seconds, escape(message)])
    cols = [
        Col("stage", whole=True),
        Col("status", whole=True),
        Col("seconds", number=True),
        Col("message"),
    ]
    return fitted(width, cols, rows, title="stages", title_justify="left")


def correctness_table(result: Result, width: int = 200) -> Table | None:
    found = [
        (stage.name, w)
        for stage in result.stages
        if stage.name in ("correctness", "generalization")
        for w in stage.workloads
    ]
    if not found:
        return None
    rows: list[list[str] | None] = []
    for name, w in found:
        worst = w.get("worst") or {}
        err = worst.get("max_abs_err")
        detail = (
            f"max abs err {err:.3g}"
            if isinstance(err, (int, float))
            else (w.get("message") or worst.get("error") or "")
        )
        rows.append(
            [
                escape(str(w.get("label"))),
                "hidden" if name == "generalization" else "visible",
                _mark("passed" if w.get("passed") else "failed").markup,
                escape(str(detail).splitlines()[0] if detail else ""),
            ]
        )
    cols = [Col("workload"), Col("set", whole=True), Col("ok", whole=True), Col("worst error")]
    return fitted(width, cols, rows, title="correctness per workload", title_justify="left")


def untimed_reason(result: Result, stage: str) -> str:
    """Why a checked workload has no times: every checked one is listed, none silently absent."""
    perf = next((x for x in result.stages if x.name == "performance"), None)
    if perf is None or perf.status != "passed":
        return f"not timed: performance {perf.status if perf else 'skipped'}"
    if result.timing_kind == "predicted":
        return "checked at a CPU size; times are predicted at the GPU sizes"
    if stage == "generalization":
        return "drawn hidden shape: checked, not timed"
    return "not timed"


def timing_table(result: Result, width: int = 200) -> Table | None:
    """Each timed workload's times, each with its band, and its speedup (never an interpreted
    one); every checked workload that has no times, with the reason. Numbers are never cut: on a
    narrow screen the labels and notes fold."""
    checked = [
        (stage.name, w)
        for stage in result.stages
        if stage.name in ("correctness", "generalization")
        for w in stage.workloads
    ]
    timed = {(w.label, w.hidden) for w in result.workloads}
    untimed = [
        (name, w)
        for name, w in checked
        if (str(w.get("label")), name == "generalization") not in timed
    ]
    if not result.workloads and not untimed:
        return None
    kind = result.timing_kind
    interpreted = kind == "cpu"
    what = {
        "cpu": INTERPRETED,
        "predicted": "± the model's band; measured: on the GPU",
    }.get(kind, "± the interquartile spread")
    cols = [Col("workload"), Col("candidate", number=True), Col("baseline", number=True)]
    if not interpreted:
        cols += [Col("speedup", number=True), Col("SOL", number=True)]
    if untimed:
        cols.append(Col("note"))  # why a checked workload has no times; it folds, numbers never do
    rows: list[list[str] | None] = []
    for w in result.workloads:
        row = [
            escape(w.label + (" (hidden)" if w.hidden else "")),
            time_cell(w.candidate, kind),
            time_cell(w.baseline, kind),
        ]
        if not interpreted:
            row += [
                workload_speedup(w, kind),
                f"{w.sol_fraction * 100:.1f}%" if w.sol_fraction is not None else "–",
            ]
        rows.append(row + ([""] if untimed else []))
    seen: set[tuple[str, str]] = set()
    for name, w in untimed:
        label = str(w.get("label"))
        if (name, label) in seen:
            continue
        seen.add((name, label))
        reason = f"[dim]{escape(untimed_reason(result, name))}[/]"
        rows.append(
            [escape(label + (" (hidden)" if name == "generalization" else ""))]
            + ["–"] * (len(cols) - 2)
            + [reason]
        )
    return fitted(width, cols, rows, title=f"times ({kind}: {what})", title_justify="left")


def summary_line(result: Result) -> Text:
    text = Text()
    text.append(result.status, style="green" if result.passed else "red")
    if result.failed_stage:
        text.append(f" at {result.failed_stage}")
    if result.timing_kind == "cpu":
        text.append(f"   {INTERPRETED}")
    else:
        text.append(f"   speedup {result_speedup(result)}   SOL ")
        text.append(f"{result.sol_fraction * 100:.1f}%" if result.sol_fraction is not None else "–")
    text.append(f"   points {result.points:.0f}   timing {result.timing_kind}")
    return text


def flags(result: Result) -> Text | None:
    if not result.integrity_flags and not result.review_notes:
        return None
    text = Text()
    for flag in result.integrity_flags:
        text.append(f"integrity: {flag}\n", style="bold red")
    for note in result.review_notes:
        text.append(f"review: {note}\n", style="yellow")
    return text


def compile_log(result: Result) -> Text | None:
    compile_stage = next((s for s in result.stages if s.name == "compile"), None)
    if compile_stage is None or not compile_stage.log.strip():
        return None
    lines = compile_stage.log.strip().splitlines()[-LOG_TAIL:]
    return Text("compile log (last lines)\n", style="bold") + Text("\n".join(lines), style="dim")


def score_card(row: Row | None, width: int = 200) -> RenderableType:
    """The row's scores for a pane `width` columns wide: the tables fit it, numbers whole."""
    if row is None:
        return Text("Pick a row in the queue (1) and press enter.", style="dim")
    parts: list[RenderableType] = [header(row)]
    if row.result is not None:
        parts.append(summary_line(row.result))
    elif row.error:
        parts.append(Text(row.error, style="red"))
    parts += [Text(""), stage_table(row, width)]
    if row.result is not None:
        for part in (correctness_table(row.result, width), timing_table(row.result, width)):
            if part is not None:
                parts += [Text(""), part]
        if (
            row.result.workloads and row.result.timing_kind != "cpu"
        ):  # no chart of interpreted ratios
            parts += [
                Text(""),
                Text("speedup per workload", style="bold"),
                speedup_bars(row.result.workloads, width=max(10, min(30, width - 40))),
            ]
        for part in (flags(row.result), compile_log(row.result)):
            if part is not None:
                parts += [Text(""), part]
    return Group(*parts)
