"""Does the CUDA driver lock a process inside the sandbox when the host locker asks?

The question behind core/evaluation/locker.py, asked directly (the batch in bench/h200_i20s.sh
only shows the end result). A sandboxed process (the harness's policy, GPU nodes bound, uid
65534, non-dumpable, a CUDA context, idle) is asked about from the host, as the locker asks:
its pid as the sandbox sees it, mapped by `locker.host_pid`, then GetState, Lock, GetState,
Unlock, GetState through `cuda_checkpoint`, each bounded. Two callers:

- `host`: this process, in the host's namespaces (what the locker does);
- `netns`: a fresh process that first enters the sandbox's network namespace (setns), in
  case the driver's channel to its target is a socket bound to the target's network.

    python3 bench/locker_probe.py --out DIR      # DIR/locker_probe.json; each step printed
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET = r"""
import ctypes, os, sys, time
ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # non-dumpable, as the harness's workers are
import torch
x = torch.ones(1 << 20, device="cuda"); torch.cuda.synchronize()
print(os.getpid(), os.getuid(), flush=True)
time.sleep(300)
"""

CALLER = r"""
import json, os, sys
from core.evaluation import locker
from core.harness import cuda_checkpoint
box, pid, mode = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
host, pidfd = locker.host_pid(box, pid)
if mode == "netns":
    import ctypes
    fd = os.open(f"/proc/{host}/ns/net", os.O_RDONLY)
    if ctypes.CDLL(None, use_errno=True).setns(fd, 0x40000000) != 0:  # CLONE_NEWNET
        sys.exit("setns: " + os.strerror(ctypes.get_errno()))
out = {"host_pid": host}
try:
    call = cuda_checkpoint.load_driver()
except OSError as exc:
    print(json.dumps({**out, "load": str(exc)}), flush=True)
    sys.exit(0)
for op, ms in (("state", 0), ("lock", 5000), ("state", 0), ("unlock", 0), ("state", 0)):
    reply = cuda_checkpoint.bounded(call, op, host, ms)
    out[f"{len(out)}:{op}"] = reply
    print(json.dumps({op: reply}), flush=True)
    if reply["rc"] == "hung":
        break
print(json.dumps(out), flush=True)
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    from core.devices.device import parse_device
    from core.evaluation import sandbox

    device = parse_device("cuda:0")
    work = Path(tempfile.mkdtemp(prefix="locker-probe-"))
    policy = sandbox.for_harness((work,), (), device.harness_env(), gpu=True)
    argv, env, status = sandbox.wrap([sys.executable, "-c", TARGET], policy)
    report: dict = {"sandbox": status, "runs": {}}
    print(status, flush=True)
    target = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert target.stdout is not None
        line = target.stdout.readline().split()
        report["target"] = line
        print("target (pid, uid inside):", line, flush=True)
        if len(line) != 2:
            raise SystemExit("the sandboxed target did not start")
        for mode in ("host", "netns"):
            t0 = time.monotonic()
            try:
                run = subprocess.run(
                    [sys.executable, "-c", CALLER, str(target.pid), line[0], mode],
                    capture_output=True,
                    text=True,
                    timeout=70,
                    check=False,
                )
                out, err = run.stdout, run.stderr
            except subprocess.TimeoutExpired as exc:
                out, err = str(exc.stdout or "") + "\n(timed out)", str(exc.stderr or "")
            took = time.monotonic() - t0
            print(f"== {mode} ({took:.1f} s)", out.strip()[-1500:], err.strip()[-800:], flush=True)
            report["runs"][mode] = {"stdout": out[-4000:], "stderr": err[-2000:], "s": took}
    finally:
        target.kill()
        target.wait()
        (args.out / "locker_probe.json").write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
