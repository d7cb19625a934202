"""`python -m core.harness run JOB --events-fd N` evaluates one resolved job;
`serve --events-fd N` stays warm and evaluates the job files named on stdin, one per line;
`probe DEVICE` prints what a device is."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from .channel import EventWriter


def _load(path: str) -> dict:
    return json.loads(Path(path).read_text())


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
    sub.add_parser("devices")
    args = parser.parse_args(argv)

    if args.command == "devices":
        from .probe import local_device_ids

        print(json.dumps(local_device_ids()))
        return 0

    if args.command == "probe":
        from .probe import probe as probe_device

        try:
            print(json.dumps(probe_device(args.device)))
        except Exception as exc:  # noqa: BLE001 - reported to the engine as one line
            print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}))
            return 3
        return 0

    # The warm parent: torch and triton are imported once here; no GPU context is created.
    # NVML answers torch's own availability checks, so that nothing initialises the driver
    # before the workers are forked.
    os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")
    import torch  # noqa: F401

    try:
        import triton  # noqa: F401
    except ImportError:
        pass
    from .runner import run_job

    emit = EventWriter(args.events_fd)
    close = (args.events_fd,)
    if args.command == "run":
        run_job(_load(args.job), emit, close)
        return 0
    emit({"type": "harness_ready", "pid": os.getpid()})
    for line in sys.stdin:
        path = line.strip()
        if not path:
            continue
        try:
            run_job(_load(path), emit, close)
        except Exception as exc:  # noqa: BLE001 - one bad job must not end the warm parent
            emit({"type": "evaluation_finished", "status": "failed", "fault": "infrastructure", "error": f"{type(exc).__name__}: {exc}"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
