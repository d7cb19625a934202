"""The harness parent never initialises a GPU driver: a CUDA context does not survive fork,
so a parent that touched CUDA would leave every forked worker unable to use the GPU."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from tests.conftest import FIXTURES, ROOT


def test_parent_runs_a_whole_evaluation_without_touching_cuda(tmp_path):
    script = textwrap.dedent(f"""
        import os, json
        import torch
        parent = os.getpid()

        def forbidden(*args, **kwargs):
            if os.getpid() == parent:
                raise AssertionError("the harness parent touched CUDA")
            return 0

        torch._C._cuda_getDeviceCount = forbidden
        torch.cuda._lazy_init = forbidden
        torch.cuda.is_available = forbidden
        torch.cuda.device_count = forbidden

        from core.devices.device import probe, parse_device
        from core.evaluation.evaluator import build_job
        from core.tasks.spec import load_task
        from core.harness.runner import run_job

        task = load_task({str(FIXTURES / "tasks" / "elementwise" / "axpy")!r})
        job = build_job(task, task.file("starter.py"), probe("cpu"), "cpu", 5, {str(tmp_path)!r})
        seen = []
        run_job(job, seen.append)
        print(json.dumps(seen[-1]))
    """)
    proc = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    last = proc.stdout.strip().splitlines()[-1]
    assert '"status": "passed"' in last, last
