"""Is the arena's lower time for large compute-bound GEMMs a matter of the tensor cores' duty
cycle? The same GEMM timed with CUDA events four ways, alternated, 100 ms each:

    PYTHONPATH=. python3 bench/duty_cycle.py --out $OUT --alternations 5

- back to back: L2 flush (a 256 MB memset), event, GEMM, event — `do_bench`'s loop;
- refill: the inputs refilled in place with fresh normal values before the flush — the
  arena's loop (`core/harness/timing.py`);
- idle gap: a `torch.cuda._sleep` as long as the refill, instead of the refill;
- refill, same values: the refill's memory traffic, writing back the values the inputs had.

If the GEMM is faster whenever something else runs between calls (refill or idle), the GPU's
power management is the cause and both timers are right about what they measure; if only the
fresh values speed it up, the data are. Writes duty_cycle.json and duty_cycle.md.
"""

# ruff: noqa: B023 - every closure here (the GEMM, the refill, between()) runs in the iteration that makes it

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

SHAPES = ((512, 28672, 4096), (4096, 5120, 2048), (3000, 4096, 14336), (1000, 4096, 4096))


def main() -> int:
    import torch

    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=Path("."))
    parser.add_argument("--alternations", type=int, default=5)
    parser.add_argument("--budget-ms", type=float, default=100.0)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    dev = torch.device("cuda")
    cache = torch.empty(256 * 1024**2 // 4, dtype=torch.int32, device=dev)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def once(fn, *a):
        start.record()
        fn(*a)
        end.record()
        end.synchronize()
        return start.elapsed_time(end)

    raw: dict = {}
    for m, n, k in SHAPES:
        x = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
        w = torch.randn(n, k, device=dev, dtype=torch.bfloat16)
        x0, w0 = x.clone(), w.clone()
        gemm = lambda: torch.matmul(x, w.t())
        refill_ms = once(lambda: (x.normal_(), w.normal_()))
        refill_ms = once(lambda: (x.normal_(), w.normal_()))
        gemm_ms = once(gemm)
        sleep_cycles = int(refill_ms * 1.98e6)  # cycles at the H200's 1980 MHz boost clock
        calls = max(10, int(args.budget_ms / max(gemm_ms + refill_ms, 1e-3)))

        def between(kind: str) -> None:
            if kind == "refill":
                x.normal_()
                w.normal_()
            elif kind == "idle gap":
                torch.cuda._sleep(sleep_cycles)
            elif kind == "refill, same values":
                x.copy_(x0)
                w.copy_(w0)

        key = f"M={m},N={n},K={k}"
        entry = raw[key] = {"refill_ms": refill_ms, "gemm_ms": gemm_ms, "calls": calls}
        kinds = ("back to back", "refill", "idle gap", "refill, same values")
        for _ in range(args.alternations):
            for kind in kinds:
                starts = [torch.cuda.Event(enable_timing=True) for _ in range(calls)]
                ends = [torch.cuda.Event(enable_timing=True) for _ in range(calls)]
                for i in range(calls):
                    between(kind)
                    cache.zero_()
                    starts[i].record()
                    gemm()
                    ends[i].record()
                torch.cuda.synchronize()
                times = [s.elapsed_time(e) * 1e3 for s, e in zip(starts, ends)]
                entry.setdefault(kind, []).append(statistics.median(times))
        print(key, {kind: round(statistics.median(entry[kind]), 2) for kind in kinds}, flush=True)
    lines = [
        "| GEMM | back to back (µs) | refill (µs) | idle gap (µs) | refill, same values (µs) | refill / back to back | idle / back to back | spread (back to back) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for key, e in raw.items():
        med = {
            kind: statistics.median(e[kind])
            for kind in ("back to back", "refill", "idle gap", "refill, same values")
        }
        bb = e["back to back"]
        lines.append(
            f"| {key} | {med['back to back']:.1f} | {med['refill']:.1f} | {med['idle gap']:.1f} | {med['refill, same values']:.1f} | "
            f"{med['refill'] / med['back to back']:.3f} | {med['idle gap'] / med['back to back']:.3f} | {(max(bb) - min(bb)) / med['back to back'] * 100:.1f}% |"
        )
    (args.out / "duty_cycle.json").write_text(json.dumps(raw, indent=1))
    (args.out / "duty_cycle.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
