"""An attempt's or job's scores, stage by stage: what the scores screen shows.

Built from the recorded `Result` when there is one, else from the live stage statuses."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from arena_tui.app.model import Row
from arena_tui.app.queue_rows import ratio_text
from arena_tui.app.widgets.speedup_chart import speedup_bars
from arena_tui.figures import INTERPRETED
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


def _us(x: object) -> str:
    if not isinstance(x, (int, float)):
        return "–"
    return f"{x / 1000:.2f} ms" if x >= 1000 else f"{x:.1f} µs"


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


def stage_table(row: Row) -> Table:
    table = Table(title="stages", title_justify="left", show_edge=False, header_style="bold")
    for col in ("stage", "status", "seconds", "message"):
        table.add_column(col, no_wrap=col != "message")
    stages = {s.name: s for s in row.result.stages} if row.result else {}
    for name in STAGES:
        s = stages.get(name)
        status = (
            s.status if s else row.stages.get(name, "running" if row.stage == name else "skipped")
        )
        seconds = f"{s.seconds:.2f}" if s and s.seconds is not None else ""
        message = (s.message or "").splitlines()[0] if s and s.message else ""
        table.add_row(
            name, _mark(status), seconds, message
        )  # the result's own stage names (figures.STAGE_LEGEND)
    return table


def correctness_table(result: Result) -> Table | None:
    rows = [
        (stage.name, w)
        for stage in result.stages
        if stage.name in ("correctness", "generalization")
        for w in stage.workloads
    ]
    if not rows:
        return None
    table = Table(
        title="correctness per workload", title_justify="left", show_edge=False, header_style="bold"
    )
    for col in ("workload", "set", "ok", "worst error"):
        table.add_column(col, no_wrap=col != "worst error")
    for name, w in rows:
        worst = w.get("worst") or {}
        err = worst.get("max_abs_err")
        detail = (
            f"max abs err {err:.3g}"
            if isinstance(err, (int, float))
            else (w.get("message") or worst.get("error") or "")
        )
        table.add_row(
            str(w.get("label")),
            "hidden" if name == "generalization" else "visible",
            _mark("passed" if w.get("passed") else "failed"),
            str(detail).splitlines()[0] if detail else "",
        )
    return table


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


def timing_table(result: Result) -> Table | None:
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
    interpreted = result.timing_kind == "cpu"
    title = f"times ({result.timing_kind}{': ' + INTERPRETED if interpreted else ''})"
    table = Table(title=title, title_justify="left", show_edge=False, header_style="bold")
    columns = ("workload", "candidate", "± IQR", "baseline", "± IQR") + (
        () if interpreted else ("speedup", "SOL")
    )
    for col in columns:
        table.add_column(col, justify="left" if col == "workload" else "right", no_wrap=True)
    if untimed:
        table.add_column(
            "note", ratio=1
        )  # why a checked workload has no times; wraps, the numbers never do
    for w in result.workloads:
        row = [
            w.label + (" (hidden)" if w.hidden else ""),
            _us(w.candidate.get("median_us")),
            _us(w.candidate.get("iqr_us")),
            _us(w.baseline.get("median_us")),
            _us(w.baseline.get("iqr_us")),
        ]
        if not interpreted:
            row += [
                ratio_text(w.speedup),
                f"{w.sol_fraction * 100:.1f}%" if w.sol_fraction is not None else "–",
            ]
        table.add_row(*row, *([""] if untimed else []))
    seen: set[tuple[str, str]] = set()
    for name, w in untimed:
        label = str(w.get("label"))
        if (name, label) in seen:
            continue
        seen.add((name, label))
        reason = Text(untimed_reason(result, name), style="dim")
        table.add_row(
            label + (" (hidden)" if name == "generalization" else ""),
            *(["–"] * (len(columns) - 1)),
            reason,
        )
    return table


def summary_line(result: Result) -> Text:
    text = Text()
    text.append(result.status, style="green" if result.passed else "red")
    if result.failed_stage:
        text.append(f" at {result.failed_stage}")
    if result.timing_kind == "cpu":
        text.append(f"   {INTERPRETED}")
    else:
        text.append(f"   speedup {ratio_text(result.speedup)}   SOL ")
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


def score_card(row: Row | None) -> RenderableType:
    if row is None:
        return Text("Pick a row in the queue (1) and press enter.", style="dim")
    parts: list[RenderableType] = [header(row)]
    if row.result is not None:
        parts.append(summary_line(row.result))
    elif row.error:
        parts.append(Text(row.error, style="red"))
    parts += [Text(""), stage_table(row)]
    if row.result is not None:
        for part in (correctness_table(row.result), timing_table(row.result)):
            if part is not None:
                parts += [Text(""), part]
        if (
            row.result.workloads and row.result.timing_kind != "cpu"
        ):  # no chart of interpreted ratios
            parts += [
                Text(""),
                Text("speedup per workload", style="bold"),
                speedup_bars(row.result.workloads),
            ]
        for part in (flags(row.result), compile_log(row.result)):
            if part is not None:
                parts += [Text(""), part]
    return Group(*parts)
