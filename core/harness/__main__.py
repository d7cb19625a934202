"""`python -m core.harness run JOB --events-fd N` evaluates one resolved job;
`serve --events-fd N` stays warm and evaluates the jobs on stdin, one per line (a job file's
path, or the job as one line of JSON);
`probe DEVICE` prints what a device is."""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
from pathlib import Path

from core.harness import locker_link, trace
from core.harness.channel import EventWriter


def _load(path: str) -> dict:
    """Read the job file and remove it: from here on the hidden workloads and the seeds exist
    only in this process's memory, never on a disk the candidate can read. `serve` also takes
    the job itself, one line of JSON on standard input (the local executor's way: no file)."""
    if path.startswith("{"):
        return json.loads(path)
    job = json.loads(Path(path).read_text())
    Path(path).unlink(missing_ok=True)
    return job


def _not_dumpable() -> None:
    """No process of the same user (a candidate's, stripped of capabilities) may attach to the
    parent or read its memory through /proc: the parent holds the job's secrets."""
    try:
        import ctypes

        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE
    except (OSError, AttributeError):
        pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m core.harness")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run")
    run.add_argument("job")
    run.add_argument("--events-fd", type=int, required=True)
    serve = sub.add_parser("serve")
    serve.add_argument("--events-fd", type=int, required=True)
    probe = sub.add_parser("probe")
    probe.add_argument("device")
    probe.add_argument(
        "--peaks",
        action="store_true",
        help="also measure copy bandwidth, bf16 rate and the launch floor (a GPU's peaks)",
    )
    sub.add_parser("devices")
    args = parser.parse_args(argv)

    if args.command == "devices":
        from core.harness.probe import local_device_ids

        print(json.dumps(local_device_ids()))
        return 0

    if args.command == "probe":
        from core.harness.probe import probe as probe_device

        try:
            info = probe_device(args.device)
            if args.peaks:
                from core.harness.probe import measure_peaks

                info["peaks"] = measure_peaks(args.device)
            print(json.dumps(info))
        except Exception as exc:  # noqa: BLE001 - reported to the engine as one line
            print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}))
            return 3
        return 0

    # The warm parent: torch and triton are imported once here; no GPU context is created.
    # NVML answers torch's own availability checks, so that nothing initialises the driver
    # before the workers are forked.
    os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")
    # Whether kernels run in Triton's interpreter is the harness's choice (the CPU and sim:
    # workers switch it on), never the caller's shell: imported with TRITON_INTERPRET=1, Triton's
    # own helpers (tl.sum, ...) become interpreted functions that no GPU compile can take.
    os.environ.pop("TRITON_INTERPRET", None)
    import torch  # noqa: F401

    try:
        import triton  # noqa: F401
    except ImportError:
        pass
    else:
        from core.harness import triton_warm

        if triton_warm.wanted():  # a device whose workers compile: each would pay it again
            triton_warm.warm()
    if os.environ.get(
        "ARENA_SIM_PRELOAD"
    ):  # a sim: device counts on fake tensors: 4 s of imports, once
        from torch._subclasses.fake_tensor import FakeTensorMode

        FakeTensorMode()  # the first one imports torch._dynamo (3 s): done here, not in every worker
    from core.harness.preload import Preloader
    from core.harness.runner import run_job
    from core.harness.zygote import Zygote

    locker_link.attach_from_env()  # sandboxed on NVIDIA: the engine's host locker (quiesce.py)
    # What is imported now lives as long as the parent: out of the collector's reach, so the
    # trusted workers forked from it collect only what they make themselves (zygote.py too).
    gc.freeze()
    emit = EventWriter(args.events_fd)
    close = (args.events_fd,)
    _not_dumpable()
    # The zygote forks every candidate worker; forked now, before any job is read, it holds
    # no job in its memory, and so neither do they.
    zygote = Zygote()
    preloader = Preloader()  # each task's libraries, imported once (preload.py)
    try:
        if args.command == "run":
            job = _load(args.job)
            zygote = preloader.prepare(job, zygote)
            run_job(job, emit, close, zygote)
            return 0
        emit({"type": "harness_ready", "pid": os.getpid()})
        while True:
            if not zygote.alive():  # a candidate killed it: start a clean one before the next job
                zygote.close()
                zygote = Zygote()
            line = sys.stdin.readline()
            if not line:
                break
            path = line.strip()
            if not path:
                continue
            try:
                with trace.span("job"):
                    job = _load(path)
                    zygote = preloader.prepare(job, zygote)
                    run_job(job, emit, close, zygote)
            except Exception as exc:  # noqa: BLE001 - one bad job must not end the warm parent
                emit(
                    {
                        "type": "evaluation_finished",
                        "status": "failed",
                        "fault": "infrastructure",
                        "error": f"{type(exc).__name__}: {exc}",
                    }
                )
        return 0
    finally:
        zygote.close()


if __name__ == "__main__":
    sys.exit(main())
