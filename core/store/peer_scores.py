"""KernelBench's own scores beside ours, for results on imported KernelBench tasks
(`kernelbench/…`, core/importers/kernelbench.py).

KernelBench scores a set of problems by fast_p (src/kernelbench/score.py, as its
scripts/benchmark_eval_analysis.py reports it): the share of all samples that are correct and
faster than p × the baseline, for p in 0, 0.5, 0.8, 1.0, 1.5 and 2.0, a wrong sample counting
as not fast; and the geometric mean of the speedup over the correct samples. Its speedup is the
baseline's time over the candidate's at the problem's own sizes. Here a sample is a result, its
speedup the one at the task's visible workload (KernelBench's sizes: the hidden ones scale them),
measured with this arena's protocol; correct means it passed every stage, hidden workloads
included, with no integrity violation. Results timed against different baselines (`eager`,
`torch_compile`) or on different devices are scored apart, as KernelBench's tables are.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from core.store.db import Store
from core.store.leaderboard import scored

FAMILY = "kernelbench"
KERNELBENCH_P = (0.0, 0.5, 0.8, 1.0, 1.5, 2.0)  # scripts/benchmark_eval_analysis.py's p_values


@dataclass(frozen=True)
class PeerScore:
    agent: str
    model: str | None
    device: str
    timing_kind: str
    baseline_impl: str | None
    samples: int
    correct: int
    fast_p: dict[str, float]  # str(p) -> share of samples, as KernelBench's JSON keys them
    geomean_correct: float  # geometric mean speedup over the correct samples (0 where none)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def sample_speedup(result: dict[str, Any]) -> float | None:
    """The speedup at the first visible workload: KernelBench's own sizes."""
    for w in result.get("workloads") or []:
        if not w.get("hidden") and isinstance(w.get("speedup"), (int, float)):
            return float(w["speedup"])
    return None


def kernelbench_scores(store: Store, run: str | None = None) -> list[PeerScore]:
    """One PeerScore per (agent, model, device, timing kind, baseline) over KernelBench tasks'
    results (infrastructure errors left out, as the leaderboard leaves them)."""
    rows = [
        r for r in scored(store, run) if r.family == FAMILY and r.status != "infrastructure_error"
    ]
    by_job = {
        (run_id, res.job_id): res.result
        for run_id in {r.run_id for r in rows}
        for res in store.results(run_id)
    }
    groups: dict[tuple[Any, ...], list[tuple[bool, float]]] = {}
    for r in rows:
        speedup = sample_speedup(by_job.get((r.run_id, r.job_id), {})) if r.correct else None
        key = (r.agent, r.model, r.device_model or r.device_id, r.timing_kind, r.baseline_impl)
        groups.setdefault(key, []).append((r.correct and speedup is not None, speedup or 0.0))
    scores = []
    for (agent, model, device, kind, impl), samples in sorted(
        groups.items(), key=lambda kv: tuple(str(x) for x in kv[0])
    ):
        n = len(samples)
        good = [s for ok, s in samples if ok and s > 0]
        scores.append(
            PeerScore(
                agent,
                model,
                device,
                kind,
                impl,
                n,
                len(good),
                {str(p): sum(1 for s in good if s > p) / n for p in KERNELBENCH_P},
                math.exp(sum(math.log(s) for s in good) / len(good)) if good else 0.0,
            )
        )
    return scores
