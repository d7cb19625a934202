"""The README's first figure: how long `arena --headless` (the default run: the offline agent's
starters of three quick bundled tasks, on this machine's GPU or else sim:h200) takes, in wall
time and in CPU seconds of its whole process tree, on the machine it runs on, with the machine
stated (CPU model, cores, load average before and after, GPU if any).

    PYTHONPATH=. python3 bench/readme_first_run.py --out DIR            # measure; DIR/first_run.json
    PYTHONPATH=. python3 bench/readme_first_run.py --table DIR/first_run.json   # the README's words

The CPU seconds are what a quiet machine would need at the least (on 2 cores the wall time is at
least half of them); the wall time is what this machine took under its load.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from core.evaluation.cpu_time import tree_cpu_seconds


def machine() -> dict[str, object]:
    model = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    gpu = (
        subprocess.run(
            ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            check=False,
        )
        if subprocess.run(["which", "nvidia-smi"], capture_output=True, check=False).returncode == 0
        else None
    )
    return {
        "cpu": model,
        "cores": os.cpu_count(),
        "gpu": gpu.stdout.strip() if gpu and gpu.returncode == 0 else None,
        "python": platform.python_version(),
    }


def measure(out: Path) -> dict[str, object]:
    out.mkdir(parents=True, exist_ok=True)
    db = Path(tempfile.mkdtemp(prefix="arena-first-run-")) / "arena.db"
    load_before = os.getloadavg()
    started = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "arena_tui.cli", "--headless", "--db", str(db)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    peak = 0.0
    while proc.poll() is None:  # the tree's CPU seconds only grow: its last reading is the total
        used = tree_cpu_seconds(proc.pid)
        peak = max(peak, used or 0.0)
        time.sleep(0.5)
    output = proc.stdout.read() if proc.stdout else ""
    report = {
        "command": "arena --headless",
        "exit_code": proc.returncode,
        "wall_s": round(time.monotonic() - started, 1),
        "cpu_s": round(peak, 1),
        "load_before": [round(x, 2) for x in load_before],
        "load_after": [round(x, 2) for x in os.getloadavg()],
        "machine": machine(),
        "output_tail": output[-3000:],
    }
    (out / "first_run.json").write_text(json.dumps(report, indent=1) + "\n")
    return report


def words(report: dict[str, object]) -> str:
    m = report["machine"]
    assert isinstance(m, dict)
    where = m["gpu"] or f"{m['cores']} cores of an {m['cpu']}"
    load = report["load_before"]
    assert isinstance(load, list)
    return (
        f"{report['wall_s']:.0f} s on {where} at load {load[0]:.1f}; "
        f"{report['cpu_s']:.0f} CPU-seconds in all"
    )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, help="measure; write first_run.json here")
    p.add_argument("--table", type=Path, help="print the README's words for a first_run.json")
    args = p.parse_args()
    if args.table:
        print(words(json.loads(args.table.read_text())))
        return 0
    if not args.out:
        p.error("give --out DIR (measure) or --table FILE")
    report = measure(args.out)
    print(words(report))
    return 0 if report["exit_code"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
