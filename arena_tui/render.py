"""Rich rendering for the command line: stage-by-stage progress, results, task tables."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from core import events
from core.devices import DeviceInfo
from core.result import Result
from core.tasks import Task

MARK = {"passed": "[green]✓[/]", "failed": "[red]✗[/]", "timeout": "[red]⏱[/]", "crashed": "[red]✗[/]", "error": "[yellow]![/]", "skipped": "[dim]·[/]"}


def device_line(info: DeviceInfo) -> str:
    peaks = f", peaks: {info.peaks_key} ({info.sol_peaks.source})" if info.sol_peaks else ", no peaks entry (no speed-of-light figures)"
    kind = {
        "cpu": "timing: cpu (shown, never ranked)",
        "predicted": f"timing: predicted on the CPU ({info.extra.get('calibration', 'uncalibrated')}; never mixed with measured)",
    }.get(info.timing_kind, "timing: measured")
    return escape(f"{info.id} — {info.vendor} {info.model} [{info.arch}]{peaks if info.type != 'cpu' else ''}; {kind}")


def ratio(x: float) -> str:
    return f"{x:.2f}×" if x >= 0.01 or x == 0 else f"{x:.1e}×"


def _us(x: float | None) -> str:
    if x is None:
        return "–"
    return f"{x / 1000:.2f} ms" if x >= 1000 else f"{x:.1f} µs"


class StageProgress:
    """Prints each stage and workload as the harness reports it (an `on_event` callback)."""

    def __init__(self, console: Console, task: Task, compact: bool = False):
        self.console, self.task, self.compact = console, task, compact

    def header(self, info: DeviceInfo, candidate: Path, world_size: int | None = None) -> None:
        self.console.print(f"[bold]{self.task.id}[/] ← {candidate}")
        self.console.print(f"device: {device_line(info)}" + (f"; {world_size} ranks" if world_size else ""))

    def __call__(self, event: events.Event) -> None:
        c = self.console
        prefix = f"{self.task.id:<28} " if self.compact else "  "
        if isinstance(event, events.StageFinished):
            extra = f" — {event.message.splitlines()[0]}" if event.message else ""
            c.print(f"{prefix}{MARK.get(event.status, '?')} {event.stage:<15} {event.status:<8} {event.seconds:6.2f} s{extra}", highlight=False)
            if event.status != "passed" and event.log.strip() and not self.compact:
                c.print("[dim]" + "\n".join("    " + line for line in event.log.strip().splitlines()[-20:]) + "[/]", highlight=False, markup=False)
        elif isinstance(event, events.WorkloadChecked) and not self.compact:
            err = (event.worst or {}).get("max_abs_err")
            detail = f"max abs err {err:.3g}" if isinstance(err, float) else ""
            c.print(f"      {MARK['passed' if event.passed else 'failed']} {event.stage} {event.workload} {detail}", highlight=False)
        elif isinstance(event, events.WorkloadTimed) and not self.compact and event.mode == "predicted":
            cand, base = event.candidate, event.baseline
            r = base.get("median_us", 0) / cand["median_us"] if cand.get("median_us") else 0
            c.print(
                f"      ⏱ {event.workload}: predicted candidate {_us(cand.get('median_us'))} ±{cand.get('band', 0) * 100:.0f}% "
                f"({cand.get('bound')}-bound), baseline {_us(base.get('median_us'))} ±{base.get('band', 0) * 100:.0f}% → {ratio(r)}",
                highlight=False,
            )
        elif isinstance(event, events.WorkloadTimed) and not self.compact:
            cand, base = event.candidate, event.baseline
            r = base.get("median_us", 0) / cand["median_us"] if cand.get("median_us") else 0
            c.print(
                f"      ⏱ {event.workload}: candidate {_us(cand.get('median_us'))} ±{cand.get('spread', 0) * 100:.1f}%, "
                f"baseline {_us(base.get('median_us'))} ±{base.get('spread', 0) * 100:.1f}% → {ratio(r)} ({event.mode})",
                highlight=False,
            )


def _gbps(x: float | None) -> str:
    if x is None:
        return "–"
    return f"{x:.1f} GB/s" if x >= 0.1 else f"{x * 1000:.1f} MB/s"


def result_summary(console: Console, result: Result) -> None:
    verdict = {"passed": "[green]PASSED[/]", "failed": "[red]FAILED[/]", "infrastructure_error": "[yellow]INFRASTRUCTURE ERROR[/]"}[result.status]
    line = f"{verdict} {result.task_id} on {result.device['id']}"
    if result.failed_stage:
        line += f" at {result.failed_stage}"
    console.print(line)
    predicted = result.timing_kind == "predicted"
    if result.workloads:
        table = Table(show_edge=False, header_style="bold", title="predicted times (sim): ± is the model's band, not a spread" if predicted else None)
        collective = any(w.bandwidth for w in result.workloads)
        columns = ("workload", "set", "candidate", "baseline", "speedup", "SOL") + (("busbw", "baseline busbw") if collective else ())
        for col in columns:
            head = f"{col} (predicted)" if predicted and col in ("candidate", "baseline", "speedup", "busbw", "baseline busbw") else col
            table.add_column(head, justify="right" if col not in ("workload", "set") else "left")
        spread = "band" if predicted else "spread"
        for w in result.workloads:
            row = [
                w.label, "hidden" if w.hidden else "visible",
                f"{_us(w.candidate.get('median_us'))} ±{w.candidate.get(spread, 0) * 100:.{0 if predicted else 1}f}%",
                f"{_us(w.baseline.get('median_us'))} ±{w.baseline.get(spread, 0) * 100:.{0 if predicted else 1}f}%",
                ratio(w.speedup) + (f" ±{w.band * 100:.0f}%" if predicted and w.band is not None else ""),
                f"{w.sol_fraction * 100:.1f}%" if w.sol_fraction is not None else "–",
            ]
            if collective:
                bw = w.bandwidth or {}
                row += [_gbps(bw.get("candidate_busbw_gbps")), _gbps(bw.get("baseline_busbw_gbps"))]
            table.add_row(*row)
        console.print(table)
        if collective:
            console.print("[dim]busbw: nccl-tests bus bandwidth (algbw × 2(n−1)/n for all-reduce, × (n−1)/n otherwise) of the slowest rank[/]")
    sol = f"{result.sol_fraction * 100:.1f}% of speed of light ({result.sol_source})" if result.sol_fraction is not None else "no speed-of-light figure" + (" (timing kind cpu)" if result.timing_kind == "cpu" else "")
    console.print(f"speedup {ratio(result.speedup)} (geometric mean), {sol}, points {result.points:.0f}, timing kind {result.timing_kind}")
    for flag in result.integrity_flags:
        console.print(f"[red]integrity:[/] {escape(flag)}", highlight=False)


def scores_table(console: Console, results: list[Result]) -> None:
    table = Table(title="Scores", header_style="bold")
    table.add_column("task", no_wrap=True, min_width=max((len(r.task_id) for r in results), default=4))
    table.add_column("status", no_wrap=True)
    table.add_column("stages", no_wrap=True)
    for col in ("speedup", "SOL", "points"):
        table.add_column(col, justify="right", no_wrap=True)
    table.add_column("timing", no_wrap=True)
    for r in results:
        table.add_row(
            r.task_id, r.status, " ".join(MARK.get(s.status, "?") for s in r.stages),
            ratio(r.speedup), f"{r.sol_fraction * 100:.1f}%" if r.sol_fraction is not None else "–", f"{r.points:.0f}", r.timing_kind,
        )
    console.print(table)
    console.print("[dim]stages: compile, correctness, hidden shapes, performance[/]")
    if any(r.timing_kind == "cpu" for r in results):
        console.print("[dim]cpu timings run Triton in its interpreter: shown for information, never ranked.[/]")
    if any(r.timing_kind == "predicted" for r in results):
        console.print("[dim]predicted: times from a simulated GPU (sim:), ranked only against other predicted results.[/]")


def tasks_table(console: Console, tasks: list[Task]) -> None:
    table = Table(header_style="bold")
    table.add_column("id", no_wrap=True, min_width=max((len(t.id) for t in tasks), default=2))
    for col in ("models", "inputs → outputs", "baseline", "kind"):
        table.add_column(col)
    for t in tasks:
        io = ", ".join(i.name for i in t.inputs) + " → " + ", ".join(o.name for o in t.outputs)
        table.add_row(t.id, ", ".join(t.models), io, t.baseline, t.baseline_kind)
    console.print(table)


def task_detail(console: Console, task: Task) -> None:
    """The task as an agent may see it: hidden workloads are never shown."""
    console.print(f"[bold]{task.id}[/]\n{escape(task.description)}\n")
    console.print(f"models: {escape(', '.join(task.models))}")
    console.print(f"baseline ({task.baseline_kind}): {escape(task.baseline)}")
    if len(task.baselines) > 1:  # the implementations baseline.py tries, best first; results record which ran
        console.print("baseline candidates, in order of preference (the first that imports on the device runs; results record it as baseline_impl):")
        for n, b in enumerate(task.baselines, 1):
            console.print(f"  {n}. {b.impl} ({b.kind}): {escape(b.calls)}")
    if task.baseline_note:
        console.print(f"baseline note: {escape(task.baseline_note)}")
    console.print(f"languages: {', '.join(task.languages)}")
    if task.vendor_notes:
        console.print(f"vendors: {escape(task.vendor_notes)}")
    console.print("\n[bold]signature[/]: run(" + ", ".join(f"{i.name}: {_spec(i)}" for i in task.inputs) + ") -> " + ", ".join(f"{o.name}: {_spec(o)}" for o in task.outputs))
    c = task.correctness
    console.print(f"correctness: |out − ref| ≤ {c.atol:g} + {c.rtol:g}·|ref| for {c.min_match * 100:g}% of elements, {c.seeds} seeds; NaN/Inf never pass")
    console.print(f"flops: {task.flops}   bytes: {task.bytes}   peak: {task.peak}")
    if task.world_size is not None:
        sizes = ", ".join(map(str, task.world_size.sizes))
        moved = f"; moves {task.collective.kind} of {task.collective.bytes} bytes per rank (W: the world size)" if task.collective else ""
        console.print(f"multi-rank: run on every rank of {sizes} ranks (CPU device: {task.world_size.cpu}){moved}")
    for title, ws in (("visible workloads (GPU)", task.gpu.visible), ("visible workloads (CPU device)", task.cpu.visible)):
        table = Table(title=title, header_style="bold", title_justify="left")
        for axis in task.axes:
            table.add_column(axis, justify="right")
        table.add_column("model")
        table.add_column("note")
        for w in ws:
            table.add_row(*(str(w.axes[a]) for a in task.axes), w.model or "", w.note or "")
        console.print(table)
    console.print("[dim]hidden workloads are never shown[/]")


def _spec(spec) -> str:  # type: ignore[no-untyped-def]
    if spec.is_scalar:
        return f"{spec.dtype} = {spec.value}"
    if spec.shape is None:
        return f"{spec.dtype} (in place of {spec.inplace_of})"
    return f"{spec.dtype}[{', '.join(str(d) for d in spec.shape)}]"
