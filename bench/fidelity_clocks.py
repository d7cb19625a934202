"""Why compute-bound GEMMs time faster in the arena than in `do_bench`: the same study at two
lengths of sustained load, with the GPU's clocks and power logged beside it.

    PYTHONPATH=. python3 bench/fidelity_clocks.py --device cuda:0 --out $OUT --alternations 3

For each workload of the chosen tasks (default: gemm/bf16_gemm, the six outliers of
docs/fidelity.md live there), `--alternations` times:

- the arena, queued, with its default budget (100 ms per side in five 20 ms rounds);
- the arena, queued, with 100 ms rounds (a 500 ms budget in five rounds);
- `do_bench(fn, warmup=25, rep=100)`, the issue's yardstick: 100 ms of back-to-back calls;
- `do_bench(fn, warmup=5, rep=20)`: 20 ms, as long as one default arena round.

If the gap is the GPU lowering its clocks under sustained tensor-core load, the long arena
rounds move towards `do_bench rep=100`, and `do_bench rep=20` towards the default arena.
`nvidia-smi` samples the SM clock, power and temperature every 20 ms into clocks.csv; each
measurement records its start and end on the same wall clock, so the table gives the mean SM
clock during each. Writes clocks.json, clocks.csv and clocks.md under --out.
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.gpu_validate import _load
from core.evaluation.evaluator import Evaluator
from core.evaluation.job import Timing
from core.tasks.discovery import discover

SAMPLE_MS = 20


def do_bench_us(task, axes: dict[str, int], seed: int, warmup: int, rep: int) -> float:
    import torch
    import triton.testing

    from core.harness.inputs import make_inputs

    specs = [
        {
            "name": s.name,
            "dtype": s.dtype,
            "shape": list(s.shape) if s.shape else None,
            "init": s.init,
            "value": s.value,
        }
        for s in task.inputs
    ]
    gen = torch.Generator("cuda").manual_seed(seed)
    shapes = {s.name: list(s.concrete_shape(axes)) for s in task.inputs if s.shape is not None}
    args = make_inputs(specs, axes, shapes, gen)
    fn = _load(task.file("baseline.py"), f"baseline_{task.name}").run
    return (
        triton.testing.do_bench(lambda: fn(*args), warmup=warmup, rep=rep, return_mode="median")
        * 1e3
    )


def read_clocks(path: Path) -> list[tuple[float, float, float, float]]:
    """(unix time, SM MHz, watts, °C) per nvidia-smi sample."""
    rows = []
    with path.open() as f:
        for line in csv.reader(f):
            try:
                stamp = (
                    datetime.strptime(line[0].strip(), "%Y/%m/%d %H:%M:%S.%f")
                    .astimezone()
                    .timestamp()
                )  # nvidia-smi prints local time
                rows.append(
                    (
                        stamp,
                        float(line[1].split()[0]),
                        float(line[2].split()[0]),
                        float(line[3].split()[0]),
                    )
                )
            except (ValueError, IndexError):
                continue
    return rows


def mean_clock(
    samples: list[tuple[float, float, float, float]], start: float, end: float
) -> tuple[float | None, float | None]:
    inside = [s for s in samples if start <= s[0] <= end]
    if not inside:
        return None, None
    return statistics.mean(s[1] for s in inside), statistics.mean(s[2] for s in inside)


def table(raw: dict, samples: list[tuple[float, float, float, float]]) -> str:
    methods = list(raw["methods"])
    head = " | ".join(f"{m} (µs)" for m in methods)
    lines = [
        f"| workload | {head} | "
        + " | ".join(f"{m} / do_bench 100 ms" for m in methods if m != "do_bench 100 ms")
        + " |"
    ]
    lines.append("| --- |" + " ---: |" * (2 * len(methods) - 1))
    clock_rows = []
    for key, entry in raw["workloads"].items():
        med = {m: statistics.median(entry[m]["us"]) for m in methods}
        ref = med["do_bench 100 ms"]
        lines.append(
            f"| {key} | "
            + " | ".join(f"{med[m]:.2f}" for m in methods)
            + " | "
            + " | ".join(f"{med[m] / ref:.3f}" for m in methods if m != "do_bench 100 ms")
            + " |"
        )
        clocks = []
        for m in methods:
            mhz = [
                c
                for c in (mean_clock(samples, s, e)[0] for s, e in entry[m]["spans"])
                if c is not None
            ]
            watts = [
                w
                for w in (mean_clock(samples, s, e)[1] for s, e in entry[m]["spans"])
                if w is not None
            ]
            clocks.append(
                f"{statistics.mean(mhz):.0f} MHz, {statistics.mean(watts):.0f} W" if mhz else "–"
            )
        clock_rows.append(f"| {key} | " + " | ".join(clocks) + " |")
    lines += [
        "",
        "Mean SM clock and board power while each was measured (nvidia-smi, every 20 ms):",
        "",
    ]
    lines.append("| workload | " + " | ".join(methods) + " |")
    lines.append("| --- |" + " --- |" * len(methods))
    lines += clock_rows
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--out", type=Path, default=Path("."))
    parser.add_argument("--alternations", type=int, default=3)
    parser.add_argument("--tasks", nargs="*", default=["gemm/bf16_gemm"])
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    clock_log = args.out / "clocks.csv"
    smi = subprocess.Popen(
        [
            "nvidia-smi",
            "--query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu",
            "--format=csv,noheader",
            f"-lms={SAMPLE_MS}",
        ],
        stdout=clock_log.open("w"),
        stderr=subprocess.DEVNULL,
    )
    tasks = [t for t in discover() if t.id in args.tasks]
    methods = ["arena 20 ms rounds", "arena 100 ms rounds", "do_bench 100 ms", "do_bench 20 ms"]
    raw: dict = {"methods": methods, "workloads": {}}
    t0 = time.monotonic()
    long_rounds = Timing(alternations=5, budget_ms=500.0, min_calls=3, max_calls=5000)
    try:
        with (
            Evaluator(args.device, graphs=False) as short,
            Evaluator(args.device, graphs=False, timing=long_rounds) as long,
        ):
            raw["device"] = {**short.info.to_json(), "versions": short.info.versions}
            for a in range(args.alternations):
                for task in tasks:
                    for name, evaluator in (
                        ("arena 20 ms rounds", short),
                        ("arena 100 ms rounds", long),
                    ):
                        started = time.time()
                        result = evaluator.evaluate(task, task.file("baseline.py"), seed=1234)
                        ended = time.time()
                        if result.status != "passed":
                            print(
                                f"{task.id} baseline, {name}: {result.status} at {result.failed_stage}: {result.stage(result.failed_stage).message}",
                                flush=True,
                            )
                        for w in result.workloads:
                            entry = raw["workloads"].setdefault(
                                f"{task.id} {w.label}",
                                {m: {"us": [], "spans": []} for m in methods},
                            )
                            entry[name]["us"].append(w.baseline["median_us"])
                            # The evaluation's span holds correctness too; the performance stage
                            # is its larger part, so the mean clock over the span is close.
                            entry[name]["spans"].append((started, ended))
                    for w in result.workloads:
                        entry = raw["workloads"][f"{task.id} {w.label}"]
                        for name, warmup, rep in (
                            ("do_bench 100 ms", 25, 100),
                            ("do_bench 20 ms", 5, 20),
                        ):
                            started = time.time()
                            entry[name]["us"].append(
                                do_bench_us(task, w.axes, 1000 + a, warmup, rep)
                            )
                            entry[name]["spans"].append((started, time.time()))
                (args.out / "clocks.json").write_text(json.dumps(raw, indent=1))
                print(
                    f"[{time.monotonic() - t0:6.1f}s] alternation {a + 1}/{args.alternations} done",
                    flush=True,
                )
    finally:
        smi.terminate()
        smi.wait()
    text = table(raw, read_clocks(clock_log))
    (args.out / "clocks.md").write_text(text)
    print(text)
    print(f"total {time.monotonic() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
