"""Building the bubblewrap command line for a policy: the mounts, the scrubbed environment, the
GPU device groups, and the shim that applies the limits and, as root, drops to uid 65534 in a
user namespace of its own. Imports nothing of the engine."""

from __future__ import annotations

import json
import os
import site
import sys
from pathlib import Path

from core.evaluation.sandbox_paths import holds_private_tmp
from core.evaluation.sandbox_policy import (
    PRIVATE_HOME,
    PRIVATE_TMPFS,
    SANDBOX_GID,
    SANDBOX_UID,
    Mode,
    SandboxError,
    SandboxPolicy,
    abs_path,
    system_binds,
)

# Runs first inside the sandbox (python -I -S: no site, no environment): applies the limits;
# as root, drops to the sandbox's uid and enters a user namespace of its own, so that the
# process limit counts this sandbox alone; then becomes the wrapped command.
_SHIM = r"""
import ctypes, json, os, resource, sys
cfg = json.loads(sys.argv[1])
argv = sys.argv[3:]
limits = cfg["limits"]
def limit(name):
    kind = getattr(resource, "RLIMIT_" + name)
    value = limits[name]
    hard = resource.getrlimit(kind)[1]
    if hard != resource.RLIM_INFINITY and os.geteuid() != 0:
        value = min(value, hard)
    resource.setrlimit(kind, (value, value))
for name in limits:
    if name != "NPROC":
        limit(name)
if "uid" in cfg:
    uid, gid = cfg["uid"], cfg["gid"]
    os.setgroups(cfg["groups"])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    if cfg["userns"]:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(4, 1, 0, 0, 0)  # PR_SET_DUMPABLE: the uid change made /proc/self root's
        if libc.unshare(0x10000000) != 0:
            sys.exit("sandbox: unshare(CLONE_NEWUSER) failed: " + os.strerror(ctypes.get_errno()))
        for name, text in (("setgroups", "deny"), ("uid_map", "%d %d 1" % (uid, uid)), ("gid_map", "%d %d 1" % (gid, gid))):
            with open("/proc/self/" + name, "w") as f:
                f.write(text)
        for cap in range(64):  # the new namespace's bounding set, emptied (PR_CAPBSET_DROP)
            libc.prctl(24, cap, 0, 0, 0)
if "NPROC" in limits:
    limit("NPROC")
os.execvp(argv[0], argv)
"""


def bwrap_command(argv: list[str], policy: SandboxPolicy, mode: Mode) -> list[str]:
    args = [mode.bwrap]
    if mode.kind == "user":
        args += ["--unshare-user", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_GID)]
    args += [
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--hostname",
        "arena-sandbox",
    ]
    if not policy.network:
        args.append("--unshare-net")
    # The root is bwrap's empty tmpfs: the host's folders appear only where bound below.
    args += ["--die-with-parent", "--new-session", "--dev", "/dev", "--proc", "/proc"]
    for path in system_binds():
        if os.path.islink(path) and os.path.dirname(path) == "/":
            args += ["--symlink", os.readlink(path), path]
    for tmp in PRIVATE_TMPFS:
        if os.path.isdir(tmp) or tmp.startswith("/dev/"):
            size = ["--size", str(policy.tmp_size)] if policy.tmp_size and tmp == "/tmp" else []
            args += ["--perms", "1777", *size, "--tmpfs", tmp]
    args += _mounts(policy)
    args += ["--perms", "0777", "--dir", PRIVATE_HOME, "--remount-ro", "/"]  # the root's tmpfs too
    if mode.kind == "root":
        args += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    cwd = policy.cwd or (policy.writable[0] if policy.writable else PRIVATE_HOME)
    args += ["--chdir", str(abs_path(cwd))]
    shim: dict[str, object] = {"limits": policy.limits.to_json()}
    if mode.kind == "root":
        shim.update(
            uid=SANDBOX_UID,
            gid=SANDBOX_GID,
            groups=_device_groups(policy.devices),
            userns=mode.userns,
        )
    python = os.path.realpath(sys.executable)
    return args + ["--", python, "-I", "-S", "-c", _SHIM, json.dumps(shim), "--", *argv]


def _mounts(policy: SandboxPolicy) -> list[str]:
    """The system folders, binds, device nodes and masks, shallowest first so that a deeper rule
    wins. A read-only path already visible through a read-only mount above it is not bound
    again; a mask inside the root's tmpfs has nothing to hide. The folders
    leading to a bind inside a tmpfs are made first, 0755 (bwrap would make them 0700, which
    uid 65534 could not pass)."""
    for p in (*policy.read_only, *policy.writable):
        if holds_private_tmp(p):
            raise SandboxError(
                f"{p} holds the private {', '.join(PRIVATE_TMPFS)}: binding it would expose the host's; name a folder below it"
            )
    system = [
        Path(p) for p in system_binds() if not (os.path.islink(p) and os.path.dirname(p) == "/")
    ]
    ops: list[tuple[Path, int, str]] = [
        (abs_path(p), 0, "ro") for p in (*system, *policy.read_only) if abs_path(p).exists()
    ]
    ops += [(abs_path(p), 1, "rw") for p in policy.writable]
    ops += [(Path(p), 2, "dev") for p in policy.devices if Path(p).exists()]
    ops += [
        (abs_path(m), 3, "mask") for m in policy.masked if abs_path(m).exists()
    ]  # a mask wins a tie
    ops.sort(key=lambda op: (len(op[0].parts), op[1], str(op[0])))
    mounts = {
        Path("/"): "tmpfs",
        Path("/dev"): "tmpfs",
        **{Path(t): "tmpfs" for t in PRIVATE_TMPFS},
    }
    args: list[str] = []
    for path, _, kind in ops:
        between = []
        parent = path.parent
        while parent not in mounts:
            between.append(parent)
            parent = parent.parent
        if kind == "mask":
            if mounts[parent] != "tmpfs":  # else it is hidden already
                args += (
                    ["--perms", "0755", "--tmpfs", str(path)]
                    if path.is_dir()
                    else ["--ro-bind", "/dev/null", str(path)]
                )
                mounts[path] = "tmpfs"
            continue
        if kind == "ro" and mounts[parent] == "ro":
            continue  # already visible, read-only, through the mount above
        if mounts[parent] == "tmpfs":
            for d in reversed(between):
                args += ["--perms", "0755", "--dir", str(d)]
                mounts[d] = "tmpfs"  # a folder in that tmpfs: a later bind below it stops here
        flag = {"ro": "--ro-bind", "rw": "--bind", "dev": "--dev-bind"}[kind]
        args += [flag, os.path.realpath(path), str(path)]
        mounts[path] = kind
    return args


def environment(policy: SandboxPolicy, sandboxed: bool) -> dict[str, str]:
    """The allow-listed variables, HOME private, cache folders that the sandbox cannot write
    dropped (the tools fall back to the private home), then the policy's own."""

    def allowed(name: str) -> bool:
        return any(name == a or (a.endswith("_") and name.startswith(a)) for a in policy.env_allow)

    env = {k: v for k, v in os.environ.items() if allowed(k)}
    env.update(policy.env)
    for name in [k for k in env if "CACHE" in k and env[k].startswith("/")]:
        if sandboxed and policy.view(env[name]) != "rw":
            del env[name]
    if sandboxed:
        # A policy may name its own HOME (an agent's, kept with its attempt); else the private one.
        env.update(
            {k: v for k, v in (("HOME", PRIVATE_HOME), ("TMPDIR", "/tmp")) if k not in policy.env}
        )
        user_base = site.getuserbase()
        if site.ENABLE_USER_SITE and os.path.isdir(site.getusersitepackages()):
            env.setdefault(
                "PYTHONUSERBASE", user_base
            )  # HOME moved; the user's site-packages did not
    elif policy.writable and "HOME" not in policy.env:
        home = Path(policy.writable[0]) / ".home"
        home.mkdir(exist_ok=True)
        env["HOME"] = str(home)
    env.setdefault("PATH", os.defpath)
    return env


def _device_groups(devices: tuple[Path, ...]) -> list[int]:
    """Groups that own the bound device nodes (render, video): kept when root drops to uid
    65534, so that nodes open to a group only (AMD's /dev/kfd) stay usable."""
    groups: set[int] = set()
    for d in devices:
        for node in [d, *(d.iterdir() if d.is_dir() else [])]:
            try:
                st = node.stat()
            except OSError:
                continue
            if st.st_gid != 0 and st.st_mode & 0o060:
                groups.add(st.st_gid)
    return sorted(groups)
