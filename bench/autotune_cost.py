"""Where one `@triton.autotune` tuning's seconds go, outside the arena (issue 42, item 3).

A warm visible-only `train` turn of the Triton tutorial's matmul spent 3.7-4.8 s of its 5-6 s
in autotune trials (docs/performance.md): 5 tunings of 4 configurations. This script runs the
published GEMM kernels (bench/published/) on gemm/bf16_gemm's shapes in one process, with the
arena's autotune budget installed as a candidate's worker installs it (core/harness/autotune.py),
and splits every trial into its first call (Triton's compile or cache load, the launcher) and
its benchmark (Triton's `do_bench` as the budget shortens it), per tuning. Since the budget caps
a trial's calls (`autotune.CappedBench`, 2026-12-03), the arena's own estimate makes the first
call before Triton's benchmark runs: with `--rep-ms` set, a compile is then in the tuning's wall
time and in neither column (compare the cold and the warm run):

    PYTHONPATH=. python3 bench/autotune_cost.py --out $OUT/autotune_cost.json

Each kernel is measured in a fresh process twice: with an empty Triton cache (what a candidate's
first evaluation pays) and again with the cache the first one left (what a copy of it pays).
`--profile` adds the top functions of a cProfile of the warm run.
"""

from __future__ import annotations

import argparse
import cProfile
import importlib.util
import io
import json
import os
import pstats
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

KERNELS = ("gemm_tutorial", "gemm_flaggems")
# gemm/bf16_gemm's visible workloads, then its hidden fixed ones (tasks/gemm/bf16_gemm/task.yaml)
SHAPES = (
    (1, 6144, 4096),
    (16, 4096, 14336),
    (128, 24576, 1536),
    (512, 28672, 4096),
    (4096, 5120, 2048),
    (3, 7168, 16384),
    (77, 2048, 4096),
    (1000, 4096, 4096),
    (3000, 4096, 14336),
)


def measure(
    kernel: str, configs: int | None, rep_ms: float | None, profile: bool
) -> dict[str, Any]:
    """One process: every shape through `kernel`, each trial split into first call and bench."""
    import torch
    import triton
    import triton.testing

    from core.harness import autotune

    autotune.install(configs, rep_ms=rep_ms)
    trials: list[dict[str, float]] = []
    original = triton.testing.do_bench

    def split_bench(fn: Any, *args: Any, **kwargs: Any) -> Any:
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()  # the config's first call: its compile (or cache load) and its launcher
        torch.cuda.synchronize()
        t1 = time.perf_counter()
        result = original(fn, *args, **kwargs)
        trials.append({"first_call_s": t1 - t0, "bench_s": time.perf_counter() - t1})
        return result

    # The autotuner reads `triton.testing.do_bench` when it builds its benchmark (autotune.py
    # wraps that getter): the split wraps the function it finds.
    triton.testing.do_bench = split_bench
    path = Path(__file__).parent / "published" / f"{kernel}.py"
    spec = importlib.util.spec_from_file_location(kernel, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    profiler = cProfile.Profile() if profile else None
    tunings = []
    for m, n, k in SHAPES:
        x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
        before = len(trials)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        if profiler:
            profiler.enable()
        module.run(x, w)
        torch.cuda.synchronize()
        if profiler:
            profiler.disable()
        mine = trials[before:]
        tunings.append(
            {
                "shape": f"M={m},N={n},K={k}",
                "wall_s": round(time.perf_counter() - t0, 4),
                "trials": len(mine),
                "first_call_s": round(sum(t["first_call_s"] for t in mine), 4),
                "bench_s": round(sum(t["bench_s"] for t in mine), 4),
            }
        )
    out: dict[str, Any] = {"kernel": kernel, "configs": configs, "rep_ms": rep_ms}
    out["tunings"] = tunings
    out["wall_s"] = round(sum(t["wall_s"] for t in tunings), 3)
    if profiler:
        text = io.StringIO()
        pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(30)
        out["profile"] = text.getvalue()[-6000:]
    return out


def child(args: argparse.Namespace) -> int:
    configs = None if args.configs == 0 else args.configs
    result = measure(args.kernel, configs, args.rep_ms or None, args.profile)
    print(json.dumps(result))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--kernel", choices=KERNELS, help="(internal: one measuring process)")
    parser.add_argument("--configs", type=int, default=4, help="the budget; 0: every one (full)")
    parser.add_argument("--rep-ms", type=float, default=4.0, help="0: Triton's 100 ms")
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    if args.kernel:
        return child(args)
    runs = []
    for kernel in KERNELS:
        cache = tempfile.mkdtemp(prefix="autotune-cost-")
        for state in ("cold", "warm"):
            command = [sys.executable, __file__, "--out", str(args.out), "--kernel", kernel]
            command += ["--configs", str(args.configs), "--rep-ms", str(args.rep_ms)]
            if args.profile and state == "warm":
                command.append("--profile")
            env = {**os.environ, "TRITON_CACHE_DIR": cache}
            t0 = time.perf_counter()
            done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                print(done.stderr[-3000:], file=sys.stderr)
                continue
            result = json.loads(done.stdout.strip().splitlines()[-1])
            result.update(cache=state, process_s=round(time.perf_counter() - t0, 2))
            runs.append(result)
            first = sum(t["first_call_s"] for t in result["tunings"])
            bench = sum(t["bench_s"] for t in result["tunings"])
            trials = sum(t["trials"] for t in result["tunings"])
            print(
                f"{kernel} {state}: {result['wall_s']:.2f} s in {len(SHAPES)} tunings, "
                f"{trials} trials: first calls {first:.2f} s, benchmarks {bench:.2f} s "
                f"(process {result['process_s']:.1f} s)",
                flush=True,
            )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"shapes": len(SHAPES), "runs": runs}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
