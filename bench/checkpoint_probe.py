"""Does the CUDA driver's checkpoint API prove that a process has no GPU work queued or running?

The question behind core/harness/quiesce.py: a concurrent batch keeps each candidate's own
worker for its timing only if the device can prove that no other candidate process has GPU
work queued or running meanwhile. `cuCheckpointProcessLock(pid)` is documented to block the
target's further CUDA calls and to complete its already-submitted work. This probe checks that
on the machine, from Python through ctypes (no cuda-python needed):

- does lock wait for a kernel the target queued (a `torch.cuda._sleep` of about 1.5 s)?
- while locked, does the target's CUDA work stop (a thread launching small kernels)?
- lock of a SIGSTOPped process; unlock while stopped; SIGCONT then unlock;
- lock with a kernel longer than the timeout (the process stays RUNNING?);
- the state of a process without CUDA, of a pid that does not exist;
- the same as uid 65534 with a non-dumpable target (the harness's workers are), inside a PID
  namespace (bubblewrap `--unshare-pid`), and inside a user namespace.

    python3 bench/checkpoint_probe.py [--bwrap PATH] --out DIR     # every mode, JSON in DIR
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Any

STATES = {0: "running", 1: "locked", 2: "checkpointed", 3: "failed"}


class LockArgs(ctypes.Structure):
    _fields_ = [
        ("timeoutMs", ctypes.c_uint),
        ("reserved0", ctypes.c_uint),
        ("reserved1", ctypes.c_uint64 * 7),
    ]


def bounded(fn: Any, limit: float = 8.0) -> tuple[Any, float]:
    """Run one driver call in a thread (ctypes drops the GIL): a hung call is reported, not waited on."""
    box: list[Any] = []
    t0 = time.monotonic()
    th = threading.Thread(target=lambda: box.append(fn()), daemon=True)
    th.start()
    th.join(limit)
    return (box[0] if box else "hung"), round(time.monotonic() - t0, 4)


class Driver:
    def __init__(self) -> None:
        self.lib = ctypes.CDLL("libcuda.so.1")
        self.init = self.lib.cuInit(0)
        version = ctypes.c_int()
        self.lib.cuDriverGetVersion(ctypes.byref(version))
        self.version = version.value
        self.has_api = hasattr(self.lib, "cuCheckpointProcessLock")

    def state(self, pid: int) -> Any:
        s = ctypes.c_int(-1)
        rc, took = bounded(
            lambda: self.lib.cuCheckpointProcessGetState(int(pid), ctypes.byref(s)), 4
        )
        return {"rc": rc, "state": STATES.get(s.value, s.value) if rc == 0 else None, "s": took}

    def lock(self, pid: int, timeout_ms: int) -> Any:
        args = LockArgs(timeoutMs=timeout_ms)
        return self.lib.cuCheckpointProcessLock(int(pid), ctypes.byref(args))

    def unlock(self, pid: int) -> Any:
        return self.lib.cuCheckpointProcessUnlock(int(pid), None)


TARGET = r"""
import os, sys, threading, time, ctypes
uid = int(sys.argv[1]); nondumpable = sys.argv[2] == "1"
if nondumpable:
    ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)
import torch
x = torch.zeros(1 << 20, device="cuda"); torch.cuda.synchronize()
t = time.monotonic(); torch.cuda._sleep(100_000_000); torch.cuda.synchronize()
rate = 1e8 / (time.monotonic() - t)  # cycles per second of _sleep
count = [0]
def spin():
    while True:
        x.add_(1); torch.cuda.synchronize(); count[0] += 1
print(f"ready {os.getpid()} {rate:.0f}", flush=True)
for line in sys.stdin:
    cmd = line.split()
    if cmd[0] == "sleep":
        t = time.monotonic(); torch.cuda._sleep(int(float(cmd[1]) * rate))
        print("queued", flush=True)
        torch.cuda.synchronize(); print(f"done {time.monotonic() - t:.3f}", flush=True)
    elif cmd[0] == "spin":
        threading.Thread(target=spin, daemon=True).start(); print("spinning", flush=True)
    elif cmd[0] == "n":
        print(f"n {count[0]}", flush=True)
"""


class Target:
    def __init__(self, nondumpable: bool):
        self.p = subprocess.Popen(
            [sys.executable, "-c", TARGET, "0", "1" if nondumpable else "0"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        ready = self.read().split()
        self.pid, self.rate = int(ready[1]), float(ready[2])

    def read(self, timeout: float = 60.0) -> str:
        box: list[str] = []
        th = threading.Thread(target=lambda: box.append(self.p.stdout.readline()), daemon=True)  # type: ignore[union-attr]
        th.start()
        th.join(timeout)
        return box[0].strip() if box else "no answer"

    def say(self, cmd: str) -> None:
        self.p.stdin.write(cmd + "\n")  # type: ignore[union-attr]
        self.p.stdin.flush()  # type: ignore[union-attr]

    def count(self) -> int:
        self.say("n")
        line = self.read(5)
        return int(line.split()[1]) if line.startswith("n ") else -1

    def close(self) -> None:
        self.p.kill()
        self.p.wait()


class Noted(dict):
    """Each step printed as it happens: a later step that hangs leaves the earlier ones seen."""

    def __setitem__(self, key: str, value: Any) -> None:
        print(json.dumps({"step": key, "value": value}), flush=True)
        super().__setitem__(key, value)

    def update(self, *args: Any, **kw: Any) -> None:  # type: ignore[override]
        for k, v in dict(*args, **kw).items():
            self[k] = v


def scenario(full: bool, uid: int, nondumpable: bool, userns: bool) -> dict[str, Any]:
    out: dict[str, Any] = Noted(
        {
            "uid": uid,
            "nondumpable": nondumpable,
            "userns": userns,
            "pid_seen": os.getpid(),
        }
    )
    if uid:  # the controller drops first (the target inherits it), as the sandbox's shim does
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
    if userns:
        out["unshare_user"] = ctypes.CDLL(None, use_errno=True).unshare(0x10000000)
    target = Target(nondumpable)
    d = Driver()
    out.update(init=d.init, driver_version=d.version, has_api=d.has_api, target_pid=target.pid)
    if not d.has_api:
        target.close()
        return out
    out["state_idle"] = d.state(target.pid)
    # 1. lock while a ~1.5 s kernel is queued: does it wait for it?
    target.say("sleep 1.5")
    out["queued"] = target.read()
    time.sleep(0.1)
    out["lock_busy"] = bounded(lambda: d.lock(target.pid, 10000), 15)
    out["state_locked"] = d.state(target.pid)
    out["target_after_lock"] = target.read(3)  # "done 1.5xx" if the kernel had finished
    out["unlock"] = bounded(lambda: d.unlock(target.pid))
    # 2. a thread launching small kernels: does locking stop it?
    target.say("spin")
    out["spin"] = target.read()
    time.sleep(0.3)
    out["lock_spin"] = bounded(lambda: d.lock(target.pid, 5000))
    a = target.count()
    time.sleep(0.5)
    b = target.count()
    out["count_while_locked"] = [a, b]
    # 3. the harness's order: lock, SIGSTOP, ..., SIGCONT, unlock
    os.kill(target.pid, signal.SIGSTOP)
    out["state_stopped_locked"] = d.state(target.pid)
    if full:
        out["unlock_while_stopped"] = bounded(lambda: d.unlock(target.pid), 4)
        out["state_after_unlock_stopped"] = d.state(target.pid)
        out["lock_while_stopped"] = bounded(lambda: d.lock(target.pid, 2000), 5)
        out["state_after_lock_stopped"] = d.state(target.pid)
    os.kill(target.pid, signal.SIGCONT)
    if full and out["state_after_lock_stopped"].get("state") != "locked":
        out["relock_after_cont"] = bounded(lambda: d.lock(target.pid, 5000))
    out["unlock_after_cont"] = bounded(lambda: d.unlock(target.pid))
    out["state_resumed"] = d.state(target.pid)
    c = target.count()
    time.sleep(0.3)
    out["count_after_unlock"] = [c, target.count()]
    if full:
        # 4. a kernel longer than the lock's timeout
        time.sleep(0.1)
        target.say("sleep 4")
        out["queued_long"] = target.read()
        out["lock_timeout"] = bounded(lambda: d.lock(target.pid, 1000), 6)
        out["state_after_timeout"] = d.state(target.pid)
        if out["state_after_timeout"].get("state") == "locked":
            d.unlock(target.pid)
        # 5. processes without CUDA, and none
        plain = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
        time.sleep(0.3)
        out["state_no_cuda"] = d.state(plain.pid)
        out["lock_no_cuda"] = bounded(lambda: d.lock(plain.pid, 1000))
        plain.kill()
        out["state_no_process"] = d.state(4_000_000)
        # 6. the cost of a lock/unlock of an idle process, 20 times
        time.sleep(3.5)
        t0 = time.monotonic()
        for _ in range(20):
            d.lock(target.pid, 5000)
            d.unlock(target.pid)
        out["lock_unlock_idle_ms"] = round((time.monotonic() - t0) / 20 * 1000, 3)
    target.close()
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", nargs="?", default="all")
    ap.add_argument("--uid", type=int, default=0)
    ap.add_argument("--nondumpable", action="store_true")
    ap.add_argument("--userns", action="store_true")
    ap.add_argument("--full", action="store_true")
    ap.add_argument("--bwrap", default="")
    ap.add_argument("--out", default=".")
    ap.add_argument("--modes", default="", help="comma-separated names (default: every mode)")
    args = ap.parse_args()
    if args.mode == "pair":  # one scenario, printed as JSON (run directly or inside bwrap)
        try:
            print(
                json.dumps(scenario(args.full, args.uid, args.nondumpable, args.userns)), flush=True
            )
        except Exception as exc:  # noqa: BLE001 - the probe reports, it does not stop
            print(json.dumps({"error": repr(exc)}), flush=True)
        os._exit(0)
    me = [sys.executable, os.path.abspath(__file__), "pair"]
    ns = [
        args.bwrap,
        "--unshare-pid",
        "--dev-bind",
        "/",
        "/",
        "--proc",
        "/proc",
        "--die-with-parent",
        "--",
    ]
    modes = {
        "root": me + ["--full"],
        "uid65534_nondumpable": me + ["--uid", "65534", "--nondumpable", "--full"],
        "uid65534_dumpable": me + ["--uid", "65534"],
    }
    if args.bwrap:
        modes["pidns_root"] = ns + me
        modes["pidns_uid65534_nondumpable"] = ns + me + ["--uid", "65534", "--nondumpable"]
        modes["pidns_userns_uid65534_nondumpable"] = (
            ns + me + ["--uid", "65534", "--nondumpable", "--userns"]
        )
    if args.modes:
        modes = {k: v for k, v in modes.items() if k in args.modes.split(",")}
    results: dict[str, Any] = {}
    for name, argv in modes.items():
        t0 = time.monotonic()
        try:
            run = subprocess.run(argv, check=False, capture_output=True, text=True, timeout=40)
            lines = [
                ln
                for ln in run.stdout.splitlines()
                if ln.startswith('{"uid"') or ln.startswith('{"error')
            ]
            results[name] = (
                json.loads(lines[-1])
                if lines
                else {"stdout": run.stdout[-500:], "stderr": run.stderr[-1500:]}
            )
        except subprocess.TimeoutExpired as exc:
            seen = (
                (exc.stdout or b"").decode(errors="replace")
                if isinstance(exc.stdout, bytes)
                else (exc.stdout or "")
            )
            results[name] = {"error": "timed out (40 s)", "steps_seen": seen.splitlines()[-12:]}
        results[name]["seconds"] = round(time.monotonic() - t0, 2)
        print(name, json.dumps(results[name]), flush=True)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "checkpoint_probe.json"), "w") as fh:
        json.dump(results, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
