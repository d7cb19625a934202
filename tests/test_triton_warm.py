"""Triton's once-a-process costs (core/harness/triton_warm.py): the harness parent of a device
whose workers compile computes Triton's key and imports its lazily imported modules once, so
that every process it forks afterwards finds both done instead of paying 0.4-0.9 s at its first
kernel. Nothing of it may touch a GPU or start a thread: the parent forks after it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from core.devices.device import parse_device
from core.harness import triton_warm

ROOT = Path(__file__).resolve().parent.parent

pytest.importorskip("triton")

# In a fresh interpreter, as the harness parent does it: torch and triton imported, then the
# warm-up; then a fork, whose first call of `triton_key()` must be answered from the cache.
PROBE = """
import json, os, sys, threading
import torch, triton
from triton.runtime.cache import triton_key
from core.harness import triton_warm
threads = threading.active_count()
done = triton_warm.warm()
report = {
    "done": done,
    "threads_started": threading.active_count() - threads,
    "cuda_initialised": torch.cuda.is_initialized(),
    "modules": [m for m in triton_warm.LAZY_MODULES if m in sys.modules],
    "parent_misses": triton_key.cache_info().misses,
}
read, write = os.pipe()
pid = os.fork()
if pid == 0:
    key = triton_key()
    os.write(write, json.dumps({"misses": triton_key.cache_info().misses, "key": key[:40]}).encode())
    os._exit(0)
os.waitpid(pid, 0)
child = json.loads(os.read(read, 1 << 16))
report["child_misses"] = child["misses"]
report["same_key"] = child["key"] == triton_key()[:40]
print(json.dumps(report))
"""


def test_a_forked_worker_inherits_the_key_and_the_modules_without_a_gpu_or_a_thread():
    out = subprocess.run(
        [sys.executable, "-c", PROBE],
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "CUDA_VISIBLE_DEVICES": ""},
    )
    assert out.returncode == 0, out.stderr[-2000:]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert "triton_key" in report["done"]
    # the child computed nothing: the parent's one miss is the only one it knows of
    assert report["parent_misses"] == 1 and report["child_misses"] == 1 and report["same_key"]
    assert report["threads_started"] == 0 and not report["cuda_initialised"]
    assert report["modules"] == [m for m in triton_warm.LAZY_MODULES if m in report["done"]]


def test_only_devices_whose_workers_compile_ask_for_it():
    assert parse_device("cuda:0").harness_env().get(triton_warm.ENV) == "1"
    assert parse_device("sim:h200").harness_env().get(triton_warm.ENV) == "1"
    assert triton_warm.ENV not in parse_device("cpu").harness_env()


def test_a_remote_hosts_harness_is_asked_the_same_way():
    from remotes.connection import HostFacts
    from remotes.executor import job_script
    from remotes.hosts import Host

    def script(device: str) -> str:
        facts = HostFacts(python="3.11", home="/home/u")
        return job_script(Host("box", "h"), facts, "/home/u/jobs/j1", device, 60.0, 10)

    assert f"{triton_warm.ENV}=1" in script("cuda:0")
    assert triton_warm.ENV not in script("cpu")


def test_the_parent_warms_only_when_asked(monkeypatch):
    monkeypatch.delenv(triton_warm.ENV, raising=False)
    assert not triton_warm.wanted()
    monkeypatch.setenv(triton_warm.ENV, "1")
    assert triton_warm.wanted()
