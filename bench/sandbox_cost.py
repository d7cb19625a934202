"""What the sandbox costs on this machine: the one-time probe, bwrap and the shim around an empty
`python -I -S -c pass`, and a warm harness start to `harness_ready` with the sandbox on and off.

    PYTHONPATH=$PWD python3 bench/sandbox_cost.py

(docs/sandbox.md, "Cost")."""

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from core.devices.device import parse_device
from core.evaluation import sandbox
from core.evaluation.executors import Harness, harness_policy

t = time.monotonic()
sandbox._probe()
probe_s = time.monotonic() - t
pol = sandbox.SandboxPolicy(read_only=sandbox.python_paths(), masked=sandbox.private_masks())
argv, env, _ = sandbox.wrap([sys.executable, "-I", "-S", "-c", "pass"], pol)


def med(f, n):
    ts = []
    for _ in range(n):
        t = time.monotonic()
        f()
        ts.append(time.monotonic() - t)
    return statistics.median(ts), min(ts)


w = med(lambda: subprocess.run(argv, env=env, check=True), 10)
d = med(lambda: subprocess.run([sys.executable, "-I", "-S", "-c", "pass"], check=True), 10)


def start(off):
    if off:
        os.environ["ARENA_SANDBOX"] = "off"
    else:
        os.environ.pop("ARENA_SANDBOX", None)
    root = Path(tempfile.mkdtemp())
    dev = parse_device("cpu")
    with Harness(dev, root, harness_policy(dev, (root,))):
        pass


on = med(lambda: start(False), 5)
off = med(lambda: start(True), 5)
print(
    f"probe {probe_s:.2f} s; wrapped python -c pass median {w[0] * 1e3:.0f} ms (min {w[1] * 1e3:.0f}) vs direct {d[0] * 1e3:.0f} ms (min {d[1] * 1e3:.0f})"
)
print(
    f"harness start: on median {on[0]:.2f} s (min {on[1]:.2f}); off median {off[0]:.2f} s (min {off[1]:.2f})"
)
