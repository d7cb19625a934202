"""Rich rendering for the command line: stage-by-stage progress, results, task tables."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from arena_tui import figures
from arena_tui.tables import Col, fitted, number_column, plain_table
from core.devices.device import DeviceInfo
from core.model import events
from core.model.result import Result
from core.model.task import Task

MARK = {
    "passed": "[green]✓[/]",
    "failed": "[red]✗[/]",
    "timeout": "[red]⏱[/]",
    "crashed": "[red]✗[/]",
    "error": "[yellow]![/]",
    "skipped": "[dim]·[/]",
}
BASELINE_KIND_SHORT = {
    "vendor_library": "library",
    "vendor_kernel_library": "kernels",
    "torch_composition": "torch",
}
WIDE = 120  # from this many columns up, tables add their optional columns


def device_line(info: DeviceInfo) -> str:
    peaks = (
        f", peaks: {info.peaks_key} ({info.sol_peaks.source})"
        if info.sol_peaks
        else ", no peaks entry (no speed-of-light figures)"
    )
    kind = {
        "cpu": "timing: cpu (Triton interpreted: times shown, never ranked)",
        "predicted": f"timing: predicted on the CPU ({info.extra.get('calibration', 'uncalibrated')}; never mixed with measured)",
    }.get(info.timing_kind, "timing: measured")
    return escape(
        f"{info.id} — {info.vendor} {info.model} [{info.arch}]{peaks if info.type != 'cpu' else ''}; {kind}"
    )


def ratio(x: float) -> str:
    return figures.ratio(x)


def _us(x: float | None) -> str:
    return figures.us(x)


class StageProgress:
    """Prints each stage and workload as the harness reports it (an `on_event` callback)."""

    def __init__(self, console: Console, task: Task, compact: bool = False):
        self.console, self.task, self.compact = console, task, compact
        self.timing_kind: str | None = None  # from `header`: a cpu timing prints no ratio

    def header(self, info: DeviceInfo, candidate: Path, world_size: int | None = None) -> None:
        self.timing_kind = info.timing_kind
        self.console.print(f"[bold]{self.task.id}[/] ← {candidate}")
        self.console.print(
            f"device: {device_line(info)}" + (f"; {world_size} ranks" if world_size else "")
        )

    def __call__(self, event: events.Event) -> None:
        c = self.console
        prefix = f"{self.task.id:<28} " if self.compact else "  "
        if isinstance(event, events.Heartbeat):  # the engine's, while a stage runs (≤ 10 s apart)
            c.print(f"{prefix}[dim]… {escape(event.text())}[/]", highlight=False)
        elif isinstance(event, events.StageFinished):
            extra = f" — {event.message.splitlines()[0]}" if event.message else ""
            c.print(
                f"{prefix}{MARK.get(event.status, '?')} {event.stage:<15} {event.status:<8} {event.seconds:6.2f} s{extra}",
                highlight=False,
            )
            if event.status != "passed" and event.log.strip() and not self.compact:
                c.print(
                    "[dim]"
                    + "\n".join("    " + line for line in event.log.strip().splitlines()[-20:])
                    + "[/]",
                    highlight=False,
                    markup=False,
                )
        elif isinstance(event, events.WorkloadChecked) and not self.compact:
            err = (event.worst or {}).get("max_abs_err")
            detail = f"max abs err {err:.3g}" if isinstance(err, float) else ""
            c.print(
                f"      {MARK['passed' if event.passed else 'failed']} {event.stage} {event.workload} {detail}",
                highlight=False,
            )
        elif (
            isinstance(event, events.WorkloadTimed)
            and not self.compact
            and event.mode == "predicted"
        ):
            cand, base = event.candidate, event.baseline
            r = base.get("median_us", 0) / cand["median_us"] if cand.get("median_us") else 0
            c.print(
                f"      ⏱ {event.workload}: predicted candidate {figures.time_cell(cand, 'predicted')} "
                f"({cand.get('bound')}-bound), baseline {figures.time_cell(base, 'predicted')} → {ratio(r)}",
                highlight=False,
            )
        elif isinstance(event, events.WorkloadTimed) and not self.compact:
            cand, base = event.candidate, event.baseline
            r = base.get("median_us", 0) / cand["median_us"] if cand.get("median_us") else 0
            kind = self.timing_kind or "measured"
            outcome = figures.INTERPRETED if kind == "cpu" else f"→ {ratio(r)} ({event.mode})"
            c.print(
                f"      ⏱ {event.workload}: candidate {figures.time_cell(cand, kind)}, "
                f"baseline {figures.time_cell(base, kind)} {outcome}",
                highlight=False,
            )


def _gbps(x: float | None) -> str:
    if x is None:
        return "–"
    return f"{x:.1f} GB/s" if x >= 0.1 else f"{x * 1000:.1f} MB/s"


def result_summary(console: Console, result: Result) -> None:
    verdict = {
        "passed": "[green]PASSED[/]",
        "failed": "[red]FAILED[/]",
        "infrastructure_error": "[yellow]INFRASTRUCTURE ERROR[/]",
    }[result.status]
    line = f"{verdict} {result.task_id} on {result.device['id']}"
    if result.failed_stage:
        line += f" at {result.failed_stage}"
    console.print(line)
    predicted, interpreted = result.timing_kind == "predicted", result.timing_kind == "cpu"
    if (
        result.timing_kind == "external" and result.failed_stage
    ):  # no stage events: its own commands ran
        console.print(
            f"  {result.failed_stage}: {result.stage(result.failed_stage).message}",
            highlight=False,
            soft_wrap=True,
            markup=False,
        )
    if result.workloads:
        title = (
            "predicted times (sim): ± is the model's band, not a spread; `measured`: measured on the GPU"
            if predicted
            else (
                f"cpu times ({figures.INTERPRETED}), ± half the interquartile spread"
                if interpreted
                else "measured times, ± the interquartile spread"
            )
        )
        if result.timing_kind == "external":
            title = "external task: its own commands' times and rules (arithmetic mean of per-case ratios), not this arena's protocol"
        table = plain_table(title=title)
        table.add_column("workload", overflow="fold")
        collective = any(w.bandwidth for w in result.workloads)
        # A cpu timing has no speedup or SOL to show; a wide terminal gets the bus bandwidths.
        numbers = ("candidate", "baseline") + (() if interpreted else ("speedup", "SOL"))
        numbers += (
            ("busbw", "base busbw") if collective and (console.width >= WIDE or interpreted) else ()
        )
        for col in numbers:
            number_column(table, col)
        for w in result.workloads:
            row = [
                w.label + (" (hidden)" if w.hidden else ""),
                figures.time_cell(w.candidate, result.timing_kind),
                figures.time_cell(w.baseline, result.timing_kind),
            ]
            if not interpreted:
                row += [
                    figures.workload_speedup(w, result.timing_kind),
                    figures.percent(w.sol_fraction),
                ]
            if "busbw" in numbers:
                bw = w.bandwidth or {}
                row += [_gbps(bw.get("candidate_busbw_gbps")), _gbps(bw.get("baseline_busbw_gbps"))]
            table.add_row(*row)
        console.print(table)
        if "busbw" in numbers:
            console.print(
                "[dim]busbw: nccl-tests bus bandwidth (algbw × 2(n−1)/n for all-reduce, × (n−1)/n otherwise) of the slowest rank[/]"
            )
    if interpreted:
        console.print(
            f"{figures.INTERPRETED}: no speedup or speed-of-light figure on the cpu device (`--json` keeps the numbers); "
            f"points {result.points:.0f}, timing kind cpu",
            highlight=False,
        )
    else:
        sol = (
            f"{result.sol_fraction * 100:.1f}% of speed of light ({result.sol_source} peaks)"
            if result.sol_fraction is not None
            else "no speed-of-light figure"
        )
        # the failure rule (docs/leaderboard.md): a failed result has no speedup of its own; aggregates count it 1.00×
        mean = (
            "arithmetic mean, the task's own rule"
            if result.timing_kind == "external"
            else "geometric mean"
        )
        speed = (
            f"speedup {figures.result_speedup(result)} ({mean}, {result.timing_kind})"
            if result.passed
            else "speedup – (failed: counted 1.00×, the baseline, in every aggregate)"
        )
        console.print(
            f"{speed}, {sol}, points {result.points:.0f}, timing kind {result.timing_kind}"
        )
    for flag in result.integrity_flags:
        console.print(f"[red]integrity:[/] {escape(flag)}", highlight=False)


def stage_marks(result: Result) -> str:
    return "".join(MARK.get(s.status, "?") for s in result.stages)


def timing_notes(console: Console, kinds: set[str]) -> None:
    """What the timing kinds in a table mean, under it."""
    if "cpu" in kinds:
        console.print(f"[dim]{escape(figures.INTERPRETED_NOTE)}[/]", highlight=False)
    if "predicted" in kinds:
        console.print(
            "[dim]predicted: times from a simulated GPU (sim:), ranked only against other predicted results.[/]"
        )


def scores_table(console: Console, results: list[Result]) -> None:
    cols = [
        Col("task", whole=True),
        Col("status"),
        Col("stages", whole=True, drop=1),
        Col("speedup", number=True),
        Col("SOL", number=True),
        Col("points", number=True),
        Col("timing"),
    ]
    rows = [
        [
            r.task_id,
            r.status,
            stage_marks(r),
            figures.result_speedup(r),  # failed: –; with its band
            figures.sol_cell(r.timing_kind, r.sol_fraction) if r.passed else "–",
            f"{r.points:.0f}",
            r.timing_kind,
        ]
        for r in results
    ]
    table = fitted(console.width, cols, rows, title="Scores")
    console.print(table)
    console.print(f"[dim]{figures.STAGE_LEGEND}[/]")
    timing_notes(console, {r.timing_kind for r in results})


def tasks_table(console: Console, tasks: list[Task]) -> None:
    """One line per task at any width: the baseline's description is `arena tasks show`'s."""
    wide = console.width >= WIDE
    rows = []
    for t in tasks:
        models = (
            ", ".join(t.models)
            if wide or len(t.models) < 2
            else f"{t.models[0]} +{len(t.models) - 1}"
        )
        io = ", ".join(i.name for i in t.inputs) + " → " + ", ".join(o.name for o in t.outputs)
        rows.append([t.id, BASELINE_KIND_SHORT.get(t.baseline_kind, t.baseline_kind), io, models])
    # One line per task at every width: the first model and how many more below WIDE columns,
    # every model above, and the signature's names from 200 columns up.
    table = plain_table()
    # The id and the baseline keep their width: the models list (every model from WIDE
    # columns, up to the whole zoo) is what gives way.
    widths = [
        max([len(r[i]) for r in rows] + [len(col)]) for i, col in enumerate(("id", "baseline"))
    ]
    for width, col in zip(widths, ("id", "baseline")):
        table.add_column(col, no_wrap=True, min_width=width)
    signature = console.width >= 200
    if signature:
        table.add_column("inputs → outputs", no_wrap=True, overflow="ellipsis", max_width=60)
    room = console.width - sum(widths) - (62 if signature else 0) - 3 * (3 if signature else 2)
    table.add_column("models", no_wrap=True, overflow="ellipsis", max_width=max(12, room))
    for r in rows:
        table.add_row(r[0], r[1], *([r[2]] if signature else []), r[3])
    console.print(table)
    console.print(
        f"[dim]{len(tasks)} tasks; baseline: library (a vendor library op), kernels (a vendor kernel library), "
        "torch (the best torch composition). `arena tasks show ID` for the rest.[/]"
    )


def task_detail(console: Console, task: Task) -> None:
    """The task as an agent may see it: hidden workloads are never shown."""
    console.print(f"[bold]{task.id}[/]\n{escape(task.description)}\n")
    console.print(f"models: {escape(', '.join(task.models))}")
    console.print(f"baseline ({task.baseline_kind}): {escape(task.baseline)}")
    if (
        len(task.baselines) > 1
    ):  # the implementations baseline.py tries, best first; results record which ran
        console.print(
            "baseline candidates, in order of preference (the first that imports on the device runs; results record it as baseline_impl):"
        )
        for n, b in enumerate(task.baselines, 1):
            console.print(f"  {n}. {b.impl} ({b.kind}): {escape(b.calls)}")
    if task.baseline_note:
        console.print(f"baseline note: {escape(task.baseline_note)}")
    console.print(f"languages: {', '.join(task.languages)}")
    if task.vendor_notes:
        console.print(f"vendors: {escape(task.vendor_notes)}")
    spec = lambda s: f"{s.name}: {s.describe(task.inputs)}"
    console.print(
        "\n[bold]signature[/]: "
        + escape(
            "run("
            + ", ".join(spec(i) for i in task.inputs)
            + ") -> "
            + ", ".join(spec(o) for o in task.outputs)
        )
    )
    c = task.correctness
    console.print(
        f"correctness: |out − ref| ≤ {c.atol:g} + {c.rtol:g}·|ref| for {c.min_match * 100:g}% of elements, {c.seeds} seeds; NaN/Inf never pass"
    )
    console.print(f"flops: {task.flops}   bytes: {task.bytes}   peak: {task.peak}", highlight=False)
    if task.world_size is not None:
        sizes = ", ".join(map(str, task.world_size.sizes))
        moved = (
            f"; moves {task.collective.kind} of {task.collective.bytes} bytes per rank (W: the world size)"
            if task.collective
            else ""
        )
        console.print(
            f"multi-rank: run on every rank of {sizes} ranks (CPU device: {task.world_size.cpu}){moved}"
        )
    for title, ws in (
        ("visible workloads (GPU)", task.gpu.visible),
        ("visible workloads (CPU device)", task.cpu.visible),
    ):
        table = plain_table(title=title, title_justify="left")
        for axis in task.axes:
            number_column(table, axis)
        table.add_column("model", overflow="fold")
        table.add_column("note", overflow="fold")
        for w in ws:
            table.add_row(*(str(w.axes[a]) for a in task.axes), w.model or "", w.note or "")
        console.print(table)
    if task.model_rows:
        models = sorted({w.model or "" for w in task.model_rows})
        console.print(
            f"model rows (workloads.models, not timed): {len(task.model_rows)} from {len(models)} model(s); "
            "`--json` lists them"
        )
    console.print("[dim]hidden workloads are never shown[/]")


def task_json(task: Task) -> dict[str, Any]:
    """`arena tasks show --json`: what `task_detail` prints, for scripts (never a hidden workload)."""

    def spec(s: Any) -> dict[str, Any]:
        return {
            "name": s.name,
            "kind": s.kind.value,
            "dtype": s.dtype,
            "shape": list(s.shape) if s.shape else None,
            "value": s.value,
            "inplace_of": s.inplace_of,
            "text": s.describe(task.inputs),
        }

    return {
        "id": task.id,
        "family": task.family,
        "description": task.description,
        "models": list(task.models),
        "baseline": task.baseline,
        "baseline_kind": task.baseline_kind,
        "languages": list(task.languages),
        "inputs": [spec(i) for i in task.inputs],
        "outputs": [spec(o) for o in task.outputs],
        "axes": dict(task.axes),
        "flops": task.flops,
        "bytes": task.bytes,
        "peak": task.peak,
        "visible": {
            "gpu": [w.to_json() for w in task.gpu.visible],
            "cpu": [w.to_json() for w in task.cpu.visible],
        },
        "model_rows": [w.to_json() for w in task.model_rows],
    }
