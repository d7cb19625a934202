"""A bar chart of speedup per workload, made of Rich text (no plotting library)."""

from __future__ import annotations

import math

from rich.text import Text

from core.model.result import WorkloadFigures


def speedup_bars(workloads: list[WorkloadFigures], width: int = 30) -> Text:
    """One bar per workload on a log scale centred on 1× (the baseline): bars right of the
    centre line are faster than the baseline, left of it slower."""
    if not workloads:
        return Text("no timed workloads", style="dim")
    label_w = min(24, max(len(w.label) for w in workloads))
    half = max(4, width // 2)
    top = max(2.0, *(max(w.speedup, 1 / w.speedup) if w.speedup > 0 else 2.0 for w in workloads))
    scale = half / math.log(top)
    out = Text()
    for w in workloads:
        out.append(f"{w.label[:label_w]:<{label_w}} ", style="bold" if not w.hidden else "italic")
        n = 0 if w.speedup <= 0 else min(half, round(abs(math.log(w.speedup)) * scale))
        if w.speedup >= 1:
            out.append(" " * half + "│")
            out.append("█" * n, style="green")
            out.append(" " * (half - n))
        else:
            out.append(" " * (half - n))
            out.append("█" * n, style="red")
            out.append("│")
            out.append(" " * half)
        out.append(f" {w.speedup:.2f}×" + (" (hidden)" if w.hidden else "") + "\n")
    out.append(f"{'':<{label_w}} {'slower':<{half}}1×{'faster':>{half}}", style="dim")
    return out
