"""What an evaluation records of where it ran and what it ran with: the versions of Python,
torch, Triton and the driver, and the sha256 of the harness's files and of the task's files (a
change during an evaluation is a finding: runner.Evaluation._after)."""

from __future__ import annotations

import hashlib
import platform
from pathlib import Path
from typing import Any

HARNESS_DIR = Path(__file__).resolve().parent


def versions() -> dict[str, Any]:
    import numpy
    import torch

    found: dict[str, Any] = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "numpy": numpy.__version__,
    }
    try:
        import triton

        found["triton"] = triton.__version__
    except ImportError:
        found["triton"] = None
    found["cuda"] = torch.version.cuda
    found["hip"] = getattr(torch.version, "hip", None)
    driver = Path("/proc/driver/nvidia/version")
    if driver.is_file():
        first = driver.read_text().splitlines()[0]
        found["driver"] = next((w for w in first.split() if w[:1].isdigit() and "." in w), first)
    return found


def harness_hashes() -> dict[str, str]:
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(HARNESS_DIR.glob("*.py"))
    }


def task_hashes(task_dir: Path, names: list[str]) -> dict[str, str | None]:
    """sha256 of the task files this process can see (None: absent or hidden)."""
    found: dict[str, str | None] = {}
    for name in names:
        try:
            found[name] = hashlib.sha256((task_dir / name).read_bytes()).hexdigest()
        except OSError:
            found[name] = None
    return found
