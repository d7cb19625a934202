"""The calibration corpus the sim: model asks for: about 150 Triton variants across the task
families, timed on a real GPU the arena's way, in one device call of at most 10 minutes.

    PYTHONPATH=. python3 bench/sim_collect_gpu.py --device cuda:0 --out $OUT [--budget-s 540]

Variants are the bundled starters with their tuning knobs rewritten (tile sizes, warps, stages,
block sizes; gemm/bf16_gemm, activation/silu_mul, norm/add_rmsnorm, elementwise/rope,
attention/prefill_gqa where the starter exposes them), each a candidate file written under
--out/variants. Each runs on three of its task's GPU workloads, timed with the harness's own
timer (core.harness.timing.time_calls: fresh inputs per call, device events, L2 flushed; CUDA
graphs below 50 µs as the arena does), median kept. Writes --out/sim_collect.json, whose
`records` bench/sim_fit.py reads with `--extra` (after `features --extra` counts them on the CPU).
It stops starting new variants when --budget-s is spent, keeping what it measured.

NOT RUN YET: written when no GPU was available (docs/simulation.md).
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import json
import re
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Iterator

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from core.evaluate import GRAPH_BELOW_US, _spec_json  # noqa: E402
from core.harness import inputs, timing  # noqa: E402
from core.tasks import find_task  # noqa: E402

WORKLOADS_PER_VARIANT = 3


def gemm_variants(source: str) -> Iterator[tuple[str, str]]:
    for (bm, bn, bk), warps, stages in itertools.product(
        [(32, 32, 32), (64, 64, 32), (64, 64, 64), (128, 64, 32), (64, 128, 32), (128, 128, 32), (128, 128, 64), (128, 256, 64)], (4, 8), (2, 3, 4)
    ):
        if bm * bn >= 128 * 128 and warps == 4 and stages == 2:
            continue
        src = source.replace("BLOCK_M, BLOCK_N, BLOCK_K = 32, 32, 32", f"BLOCK_M, BLOCK_N, BLOCK_K = {bm}, {bn}, {bk}")
        src = src.replace("BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K,", f"BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, num_warps={warps}, num_stages={stages},")
        yield f"bm{bm}_bn{bn}_bk{bk}_w{warps}_s{stages}", src


def block_variants(source: str, pattern: str, blocks: list[int], warps: list[int]) -> Iterator[tuple[str, str]]:
    for block, w in itertools.product(blocks, warps):
        src = re.sub(pattern, f"BLOCK = {block}", source, count=1)
        src = re.sub(r"(BLOCK=BLOCK)(\))", rf"\1, num_warps={w}\2", src, count=1)
        yield f"block{block}_w{w}", src


def rmsnorm_variants(source: str) -> Iterator[tuple[str, str]]:
    for w in (1, 2, 4, 8, 16, 32):
        yield f"w{w}", source.replace("num_warps=8 if BLOCK >= 4096 else 4", f"num_warps={w}")


FAMILIES = {
    "gemm/bf16_gemm": gemm_variants,
    "activation/silu_mul": lambda s: block_variants(s, r"BLOCK = \d+", [256, 512, 1024, 2048, 4096], [1, 2, 4, 8, 16]),
    "norm/add_rmsnorm": rmsnorm_variants,
}


def load(path: Path, name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def time_variant(run: Any, task: Any, axes: dict[str, int], device: torch.device) -> dict[str, Any]:
    specs = [_spec_json(s) for s in task.inputs]
    shapes = {s.name: list(s.concrete_shape(axes)) for s in task.inputs + task.outputs if s.shape is not None}
    fresh = inputs.FreshInputs(specs, {"axes": axes, "shapes": shapes}, 1234, device, None)
    first = timing.time_calls(run, fresh, device, 20.0, 3, 1000, 0, graph=False)
    graph = statistics.median(first["times_us"]) < GRAPH_BELOW_US
    times: list[float] = []
    mode = first["mode"]
    for r in range(3):  # three rounds of about 20 ms, as the arena's alternations
        out = timing.time_calls(run, fresh, device, 20.0, 3, 1000, (r + 1) * 100_000, graph=graph)
        times += out["times_us"]
        mode = out["mode"]
    return {**timing.summarize(times), "mode": mode}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--budget-s", type=float, default=540.0)
    args = parser.parse_args()
    device = torch.device(args.device)
    torch.cuda.set_device(device)
    started = time.monotonic()
    (args.out / "variants").mkdir(parents=True, exist_ok=True)
    records: list[dict[str, Any]] = []
    out_json = args.out / "sim_collect.json"
    for task_id, make in FAMILIES.items():
        task = find_task(task_id)
        source = task.file("starter.py").read_text()
        workloads = list(task.gpu.visible)[:: max(1, len(task.gpu.visible) // WORKLOADS_PER_VARIANT)][:WORKLOADS_PER_VARIANT]
        for name, src in make(source):
            if time.monotonic() - started > args.budget_s:
                break
            path = args.out / "variants" / f"{task_id.replace('/', '__')}__{name}.py"
            path.write_text(src)
            try:
                run = load(path, f"variant_{len(records)}").run
                for w in workloads:
                    fig = time_variant(run, task, w.axes, device)
                    records.append({"task": task_id, "variant": name, "candidate": str(path.relative_to(args.out)), "label": ",".join(f"{k}={v}" for k, v in w.axes.items()),
                                    "axes": w.axes, "median_us": fig["median_us"], "spread": fig["spread"], "mode": fig["mode"]})
            except Exception as exc:  # noqa: BLE001 - a variant that does not compile or run is recorded and skipped
                records.append({"task": task_id, "variant": name, "error": f"{type(exc).__name__}: {exc}"[:300]})
            out_json.write_text(json.dumps({"device": torch.cuda.get_device_name(device), "torch": torch.__version__, "records": records}, indent=1))
            print(f"{time.monotonic() - started:6.1f} s {task_id} {name}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
