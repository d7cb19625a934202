"""Trainer datasets from the task catalogue: one prompt row per task, for TRL or verl.

`arena dataset export --format trl|verl` writes them (JSON lines, or parquet where the file name
ends in .parquet and pyarrow is installed). A row holds the agent prompt for a single completion
(core/rl/env.py: `task_prompt(..., max_turns=0)`: the semantics, signature, tolerance, baseline and
visible shapes; hidden workloads are said to exist and never described), the task id and the
visible shapes, in the columns each framework reads:

- TRL: `prompt` (chat messages), `task_id`, `visible_workloads`: `GRPOTrainer` passes the extra
  columns to the reward function (core/rl/adapters/trl.py).
- verl: `data_source`, `prompt`, `ability`, `reward_model: {style: rule, ground_truth: task_id}`,
  `extra_info: {task_id, index, device, visible_workloads}` (core/rl/adapters/verl.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from core.model.task import Task
from core.rl.env import task_prompt, visible_workloads

FORMATS = ("trl", "verl")
DATA_SOURCE = "kernel_arena"


def rows(
    tasks: Iterable[Task], fmt: str, device: str = "cuda:0", repeat: int = 1
) -> list[dict[str, Any]]:
    """`repeat` copies of each task's row (a GRPO group is drawn from one row; more rows per
    task weight it in an epoch)."""
    if fmt not in FORMATS:
        raise ValueError(f"format `{fmt}` is unknown: use one of {', '.join(FORMATS)}")
    out: list[dict[str, Any]] = []
    for task in tasks:
        prompt = [{"role": "user", "content": task_prompt(task, device, 0)}]
        shapes = [w["label"] for w in visible_workloads(task, device)]
        for _ in range(repeat):
            if fmt == "trl":
                out.append({"prompt": prompt, "task_id": task.id, "visible_workloads": shapes})
            else:
                out.append(
                    {
                        "data_source": DATA_SOURCE,
                        "prompt": prompt,
                        "ability": "kernel",
                        "reward_model": {"style": "rule", "ground_truth": task.id},
                        "extra_info": {
                            "task_id": task.id,
                            "index": len(out),
                            "device": device,
                            "visible_workloads": shapes,
                        },
                    }
                )
    return out


def write(records: list[dict[str, Any]], path: Path) -> None:
    """JSON lines, or parquet for a `.parquet` path (needs pyarrow)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".parquet":
        try:
            import pyarrow as pa
            import pyarrow.parquet as pq
        except ImportError:
            raise ImportError(
                "parquet needs pyarrow: pip install pyarrow (or write .jsonl)"
            ) from None
        pq.write_table(pa.Table.from_pylist(records), path)
        return
    with path.open("w") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")
