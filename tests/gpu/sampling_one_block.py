"""The sampling starter's one-block path on a GPU: rows that fit one block (V <= BLOCK) are
loaded once and kept in registers (`ONE_BLOCK`). The task's GPU workloads are all vocabulary
sized and stream their rows, so `bench/tasks_gpu.py` never compiles this branch for a GPU; the
CPU workloads run it only in Triton's interpreter. This compiles and runs it on the GPU at the
task's CPU shapes and judges the draws with the task's own check.py (support and distribution).

    PYTHONPATH=. python3 tests/gpu/sampling_one_block.py [--device cuda:0]

Prints one line per shape and exits 1 if any draw is judged wrong.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import torch

ROOT = Path(__file__).resolve().parents[2]
TASK = ROOT / "tasks" / "sampling" / "top_k_top_p_sampling"
SHAPES = [
    (128, 512),
    (96, 1000),
    (100, 777),
    (200, 4096),
]  # the CPU workloads, and one block of 4096


def _module(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"sampling_{name}", TASK / f"{name}.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cuda:0")
    args = parser.parse_args()
    starter, reference, check, inputs = (
        _module(n) for n in ("starter", "reference", "check", "inputs")
    )
    wrong = 0
    for seed, (B, V) in enumerate(SHAPES):
        gen = torch.Generator(args.device).manual_seed(seed)
        logits, top_k, top_p = inputs.make_inputs({"B": B, "V": V}, gen)
        expected = list(reference.run(logits, top_k, top_p))
        verdicts = [
            check.check([starter.run(logits, top_k, top_p)], expected, [logits, top_k, top_p])[
                "token_ids"
            ]
            for _ in range(3)
        ]
        bad = [v.get("message") for v in verdicts if not v["passed"]]
        wrong += bool(bad)
        print(f"B={B} V={V}: {'wrong: ' + str(bad[0]) if bad else 'passed'} (3 draws)", flush=True)
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
