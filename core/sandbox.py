"""The sandbox: the one module every untrusted process goes through.

`wrap(argv, policy)` turns a command line into one that runs inside bubblewrap: user, PID,
mount, network, IPC and UTS namespaces, the root file system read-only, a private `/tmp`, the
policy's writable folders bound in, masked folders replaced by empty tmpfs, GPU device nodes
bound only where they exist, a scrubbed environment and resource limits. It returns the new
argv, the environment to start it with, and a status string that every result records
(`sandbox_status()` gives the same string for the standard isolation on this machine).

Two ways in, chosen by a one-time probe:

- as an ordinary user, bwrap makes a user namespace (`--unshare-user`); the sandbox runs as
  uid 65534 inside it, which is the invoking user on the host;
- as root, bwrap makes the namespaces with root's privileges, then a small shim (part of the
  wrapped command) applies the limits, drops to uid/gid 65534 on the host and enters a user
  namespace of its own. A user namespace alone would not do: its uid 65534 would still be
  host root, reading root's files and exempt from the process limit.

Without bubblewrap (or where namespaces are refused) the command runs unsandboxed with only
its environment scrubbed; the arena warns once per process and the status says
`unsandboxed: <reason>`. `ARENA_SANDBOX=off` asks for that; `ARENA_SANDBOX=required` refuses
to run unsandboxed (`SandboxUnavailable`). See docs/sandbox.md.
"""

from __future__ import annotations

import glob
import json
import logging
import os
import shutil
import site
import subprocess
import sys
import warnings
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

SWITCH = "ARENA_SANDBOX"  # auto (the default) | off | required
UNSANDBOXED = "unsandboxed"
SANDBOX_UID = SANDBOX_GID = 65534  # nobody / nogroup
PRIVATE_HOME = "/tmp/home"
PRIVATE_TMPFS = ("/tmp", "/var/tmp", "/dev/shm")
GPU_NODES = ("/dev/nvidia*", "/dev/nvidia-caps", "/dev/kfd", "/dev/dri")
GiB = 1 << 30

# Variables that pass into the sandbox (names, or prefixes ending in `_`); everything else
# (API keys, ARENA_*, SSH_AUTH_SOCK, tokens, XDG_*) is dropped.
ENV_ALLOW = (
    "PATH", "LANG", "LANGUAGE", "TZ", "TERM", "LC_",
    "PYTHONPATH", "PYTHONUNBUFFERED", "PYTHONHASHSEED", "PYTHONDONTWRITEBYTECODE", "PYTHONWARNINGS",
    "LD_LIBRARY_PATH", "CC", "CXX", "MAX_JOBS", "TORCH_CUDA_ARCH_LIST", "PYTORCH_ROCM_ARCH",
    "CUDA_", "HIP_VISIBLE_DEVICES", "HIP_PATH", "ROCR_VISIBLE_DEVICES", "ROCM_PATH", "ZE_AFFINITY_MASK",
    "TRITON_", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
)

log = logging.getLogger("arena.sandbox")


class SandboxError(RuntimeError):
    """A policy that cannot be applied (a writable folder that does not exist, ...)."""


class SandboxUnavailable(SandboxError):
    """`ARENA_SANDBOX=required`, and this machine cannot sandbox."""


@dataclass(frozen=True)
class Limits:
    """Resource limits (setrlimit) for the sandboxed process and everything it starts.
    `processes` counts threads too, per sandbox (it has its own user namespace)."""

    address_space: int | None = None  # bytes; leave unset on GPUs (drivers reserve huge ranges)
    processes: int | None = None
    open_files: int | None = None
    cpu_seconds: int | None = None
    file_size: int | None = None  # bytes, per file
    core_size: int | None = 0  # no core dumps

    def to_json(self) -> dict[str, int]:
        names = {"address_space": "AS", "processes": "NPROC", "open_files": "NOFILE", "cpu_seconds": "CPU", "file_size": "FSIZE", "core_size": "CORE"}
        return {names[k]: v for k, v in self.__dict__.items() if v is not None}


@dataclass(frozen=True)
class SandboxPolicy:
    """What a sandboxed process may see and do. Everything not named here is read-only (the
    root file system), hidden (`masked`, the private tmpfs folders) or absent (network)."""

    writable: tuple[Path, ...] = ()  # bound read-write; must exist
    read_only: tuple[Path, ...] = ()  # exposed where a mask or /tmp would hide them; missing ones skipped
    masked: tuple[Path, ...] = ()  # replaced by an empty tmpfs (folders) or /dev/null (files)
    devices: tuple[Path, ...] = ()  # device nodes bound in (those that exist)
    network: bool = False
    env: Mapping[str, str] = field(default_factory=dict)  # set as given, after the allow-list
    env_allow: tuple[str, ...] = ENV_ALLOW
    limits: Limits = Limits()
    cwd: Path | None = None  # default: the first writable folder, else the private home
    tmp_size: int | None = 4 * GiB  # the private /tmp is memory: cap it

    def view(self, path: Path | str) -> str:
        """How the sandbox sees `path`: `rw`, `ro` or `hidden` (the deepest rule wins)."""
        p = _abs(path)
        rules = [(_abs(r), "ro") for r in self.read_only] + [(_abs(w), "rw") for w in self.writable]
        rules += [(Path(t), "hidden") for t in PRIVATE_TMPFS] + [(_abs(m), "hidden") for m in self.masked]  # a mask wins a tie
        best, depth = "ro", -1
        for root, kind in rules:
            if (p == root or root in p.parents) and len(root.parts) >= depth:
                best, depth = kind, len(root.parts)
        return best


@dataclass(frozen=True)
class _Mode:
    """How this machine sandboxes: `root` (privileged bwrap, then the shim drops to uid
    65534 and, with `userns`, enters a user namespace) or `user` (bwrap's own user namespace)."""

    kind: str
    version: str
    userns: bool
    host_uid: int

    def describe(self, network: bool) -> str:
        spaces = ["user"] if self.userns else []
        spaces += ["pid", "mount"] + ([] if network else ["net"]) + ["ipc", "uts"]
        who = f"uid {SANDBOX_UID}" if self.kind == "root" else (f"uid {SANDBOX_UID} in the namespace, host uid {self.host_uid}" if self.host_uid else "host uid 0 (could not drop root)")
        return f"{self.version}: {','.join(spaces)} namespaces; root fs read-only; private /tmp; {who}" + ("; network ON" if network else "")


# --- the public surface ----------------------------------------------------------------------


def sandbox_status() -> str:
    """What every result records about isolation on this machine, e.g. `bubblewrap 0.8.0:
    user,pid,mount,net,ipc,uts namespaces; root fs read-only; private /tmp; uid 65534` or
    `unsandboxed: bwrap not found (install bubblewrap)`."""
    mode, reason = _mode()
    return mode.describe(network=False) if mode else f"{UNSANDBOXED}: {reason}"


def is_sandboxed(status: str) -> bool:
    return not status.startswith(UNSANDBOXED)


def wrap(argv: list[str], policy: SandboxPolicy) -> tuple[list[str], dict[str, str], str]:
    """The command line, environment and status to start `argv` under `policy`. Running as
    root, the writable folders are handed to the sandbox's uid (see `grant`)."""
    mode, reason = _mode()
    if mode is None:
        return list(argv), _environment(policy, sandboxed=False), f"{UNSANDBOXED}: {reason}"
    for path in policy.writable:
        if not Path(path).is_dir():
            raise SandboxError(f"writable folder {path} does not exist: create it before starting the sandbox")
        grant(path)
    return _command(argv, policy, mode), _environment(policy, sandboxed=True), mode.describe(policy.network)


def spawn(argv: list[str], env: Mapping[str, str], **popen_kwargs: Any) -> subprocess.Popen:
    """`subprocess.Popen` a wrapped command from a thread that lives as long as this process.
    bwrap's --die-with-parent (PR_SET_PDEATHSIG) fires when the *thread* that started it
    ends, and callers run on short-lived threads (asyncio.to_thread): started from one of
    those, a warm sandbox would be killed when its thread is recycled."""
    return _spawner().submit(subprocess.Popen, argv, env=dict(env), **popen_kwargs).result()


@lru_cache(maxsize=1)
def _spawner() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix="arena-sandbox-spawner")


def grant(path: Path | str) -> None:
    """Make `path` (a folder, with what is in it) writable by the sandbox's uid: a no-op unless
    the arena runs as root and so the sandbox as uid 65534. Call it for folders made after the
    sandbox started (an evaluation's work folder in a warm harness)."""
    mode, _ = _mode()
    if mode is None or mode.kind != "root":
        return
    for root, dirs, files in os.walk(path):
        for name in [root, *(os.path.join(root, d) for d in dirs), *(os.path.join(root, f) for f in files)]:
            os.chown(name, SANDBOX_UID, SANDBOX_GID, follow_symlinks=False)


def gpu_device_nodes() -> tuple[Path, ...]:
    """The vendors' device nodes that exist here: NVIDIA's `/dev/nvidia*`, AMD's `/dev/kfd`
    and `/dev/dri` (Intel's too)."""
    found: set[str] = set()
    for pattern in GPU_NODES:
        found.update(glob.glob(pattern))
    return tuple(Path(p) for p in sorted(found))


def python_paths() -> tuple[Path, ...]:
    """What this interpreter needs to run inside: its prefixes, its executable's folder and
    every folder on sys.path (site-packages, the user's site, PYTHONPATH entries)."""
    paths = {sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix, os.path.dirname(os.path.realpath(sys.executable))}
    paths.update(p for p in sys.path if p and os.path.isdir(p))
    if site.ENABLE_USER_SITE and os.path.isdir(site.getusersitepackages()):
        paths.add(site.getusersitepackages())
    return tuple(sorted(p for p in {_abs(p) for p in paths} if not _holds_private_tmp(p)))


def private_masks() -> tuple[Path, ...]:
    """Folders that hold people's secrets: home folders, per-user runtime folders (agent
    sockets), root's home."""
    home = os.path.expanduser("~")
    return tuple(sorted({_abs(p) for p in ("/home", "/root", "/run/user", home) if os.path.exists(p)}))


def for_harness(writable: tuple[Path, ...], read_only: tuple[Path, ...], env: Mapping[str, str], gpu: bool, masked: tuple[Path, ...] = ()) -> SandboxPolicy:
    """The harness's policy: `writable` read-write; `read_only` and Python read-only; home
    folders and `masked` (what candidates must not read: task folders, the checkout) masked;
    the GPU's device nodes bound; no network. A `sys.path` folder inside `masked` stays hidden
    unless it is part of the interpreter's own prefix (a virtual environment in the checkout)."""
    limits = Limits(
        address_space=None if gpu else max(16 * GiB, _physical_memory()),
        processes=max(4096, 32 * (os.cpu_count() or 1)),
        open_files=8192,
        file_size=16 * GiB,
    )
    prefixes = {_abs(p) for p in (sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix)}
    python = tuple(p for p in python_paths() if not _under(p, masked) or _under(p, prefixes))
    return SandboxPolicy(
        writable=tuple(writable), read_only=(*read_only, *python), masked=(*private_masks(), *masked),
        devices=gpu_device_nodes() if gpu else (), env=dict(env), limits=limits, cwd=writable[0] if writable else None,
    )


# What a coding agent needs beyond ENV_ALLOW to reach its API from behind a proxy; its API key
# comes in the policy's `env`, named by the agent's config, never through this list.
AGENT_ENV_ALLOW = (
    "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "no_proxy", "all_proxy",
    "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "COLORTERM", "NO_COLOR",
)


def for_agent(
    workspace: Path, env: Mapping[str, str], network: bool = True, home: Path | None = None,
    read_only: tuple[Path, ...] = (), masked: tuple[Path, ...] = (),
) -> SandboxPolicy:
    """A coding agent's policy: its `workspace` read-write (and the cwd); a private `home`
    (default: `home` beside the workspace, made here) read-write and set as HOME, so the CLI's
    config and caches stay with the attempt; `read_only` (the agent's tools, the `arena`
    wrapper) and Python read-only; masked: every home folder, the task folders (bundled,
    `$ARENA_TASKS`, and `masked`), the checkout but the `core/` and `arena_tui/` packages that
    `arena check` imports, and the results store's folder, which also holds the other
    attempts' workspaces. The network is on by default: CLI agents call their model's API.
    Limits are the harness's, looser: agents run node, compilers and test scripts."""
    from .devices import PACKAGE_ROOT  # lazy: the sandbox module stays free of the engine
    from .store import default_path
    from .tasks import bundled_tasks_root, tasks_root

    workspace = _abs(workspace)
    home = _abs(home) if home is not None else workspace.parent / "home"
    home.mkdir(parents=True, exist_ok=True)
    package = PACKAGE_ROOT.resolve()
    needed = (package / "core", package / "arena_tui")
    hidden = [*private_masks(), default_path().parent, bundled_tasks_root(), tasks_root(), *masked]
    if (package / "pyproject.toml").is_file():  # a checkout (tests, .git, build/ hold task files), not site-packages
        hidden.append(package)
    import resource

    hard_files = resource.getrlimit(resource.RLIMIT_NOFILE)[1]  # the shim cannot raise a hard limit
    limits = Limits(
        processes=max(8192, 64 * (os.cpu_count() or 1)),
        open_files=65536 if hard_files == resource.RLIM_INFINITY else min(65536, hard_files),
        file_size=16 * GiB,
    )
    prefixes = {_abs(p) for p in (sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix)}
    python = tuple(p for p in python_paths() if not _under(p, tuple(hidden)) or _under(p, prefixes))
    return SandboxPolicy(
        writable=(workspace, home), read_only=(*needed, *read_only, *python), masked=tuple(hidden), network=network,
        env={**env, "HOME": str(home)}, env_allow=ENV_ALLOW + AGENT_ENV_ALLOW, limits=limits, cwd=workspace,
    )


def _under(path: Path, folders: tuple[Path, ...] | set[Path]) -> bool:
    p = _abs(path)
    return any(p == f or f in p.parents for f in map(_abs, folders))


# --- the mode, probed once per process -------------------------------------------------------


def _mode() -> tuple[_Mode | None, str]:
    """The way in on this machine, or None and why not. `ARENA_SANDBOX` is read each time."""
    switch = os.environ.get(SWITCH, "auto").strip().lower() or "auto"
    if switch in ("off", "0", "false", "no"):
        reason = f"disabled by {SWITCH}={os.environ[SWITCH]}"
        _warn(reason)
        return None, reason
    mode, reason = _probe()
    if mode is None:
        if switch in ("required", "on", "1", "true", "yes"):
            raise SandboxUnavailable(f"{SWITCH}={os.environ[SWITCH]} but this machine cannot sandbox: {reason}")
        _warn(reason)
    return mode, reason


@lru_cache(maxsize=1)
def _probe() -> tuple[_Mode | None, str]:
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return None, "bwrap not found (install bubblewrap: apt-get install bubblewrap)"
    try:
        version = subprocess.run([bwrap, "--version"], capture_output=True, text=True, timeout=10, check=False).stdout.strip() or "bubblewrap"
    except (OSError, subprocess.SubprocessError) as exc:
        return None, f"bwrap does not run: {exc}"
    uid = os.geteuid()
    tries = [_Mode("root", version, True, 0), _Mode("root", version, False, 0), _Mode("user", version, True, 0)] if uid == 0 else [_Mode("user", version, True, uid)]
    failures = []
    for mode in tries:
        policy = SandboxPolicy(read_only=python_paths(), masked=private_masks())
        try:
            proc = subprocess.run(
                _command([sys.executable, "-I", "-S", "-c", "pass"], policy, mode), env=_environment(policy, True),
                capture_output=True, text=True, timeout=30, cwd="/", check=False,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            failures.append(str(exc))
            continue
        if proc.returncode == 0:
            return mode, ""
        failures.append((proc.stderr.strip().splitlines() or [f"exit code {proc.returncode}"])[-1])
    return None, f"bwrap cannot make namespaces here ({'; '.join(dict.fromkeys(failures))}); user namespaces may be disabled"


_warned: set[str] = set()


def _warn(reason: str) -> None:
    if reason in _warned:
        return
    _warned.add(reason)
    message = f"KERNEL ARENA RUNS CANDIDATES UNSANDBOXED: {reason}. Candidates can read your files and reach the network; every result records this."
    log.warning(message)
    warnings.warn(message, RuntimeWarning, stacklevel=3)


# --- building the command line ---------------------------------------------------------------

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


def _command(argv: list[str], policy: SandboxPolicy, mode: _Mode) -> list[str]:
    bwrap = shutil.which("bwrap") or "bwrap"
    args = [bwrap]
    if mode.kind == "user":
        args += ["--unshare-user", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_GID)]
    args += ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try", "--hostname", "arena-sandbox"]
    if not policy.network:
        args.append("--unshare-net")
    args += ["--die-with-parent", "--new-session", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    for tmp in PRIVATE_TMPFS:
        if os.path.isdir(tmp) or tmp.startswith("/dev/"):
            size = ["--size", str(policy.tmp_size)] if policy.tmp_size and tmp == "/tmp" else []
            args += ["--perms", "1777", *size, "--tmpfs", tmp]
    args += _mounts(policy)
    args += ["--perms", "0777", "--dir", PRIVATE_HOME]
    if mode.kind == "root":
        args += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    cwd = policy.cwd or (policy.writable[0] if policy.writable else PRIVATE_HOME)
    args += ["--chdir", str(_abs(cwd))]
    shim: dict[str, object] = {"limits": policy.limits.to_json()}
    if mode.kind == "root":
        shim.update(uid=SANDBOX_UID, gid=SANDBOX_GID, groups=_device_groups(policy.devices), userns=mode.userns)
    python = os.path.realpath(sys.executable)
    return args + ["--", python, "-I", "-S", "-c", _SHIM, json.dumps(shim), "--", *argv]


def _mounts(policy: SandboxPolicy) -> list[str]:
    """Binds, device nodes and masks, shallowest first so that a deeper rule wins. A read-only
    path already visible through a read-only mount above it is not bound again. The folders
    leading to a bind inside a tmpfs are made first, 0755 (bwrap would make them 0700, which
    uid 65534 could not pass)."""
    for p in (*policy.read_only, *policy.writable):
        if _holds_private_tmp(p):
            raise SandboxError(f"{p} holds the private {', '.join(PRIVATE_TMPFS)}: binding it would expose the host's; name a folder below it")
    ops: list[tuple[Path, int, str]] = [(_abs(p), 0, "ro") for p in policy.read_only if _abs(p).exists()]
    ops += [(_abs(p), 1, "rw") for p in policy.writable]
    ops += [(Path(p), 2, "dev") for p in policy.devices if Path(p).exists()]
    ops += [(_abs(m), 3, "mask") for m in policy.masked if _abs(m).exists()]  # a mask wins a tie
    ops.sort(key=lambda op: (len(op[0].parts), op[1], str(op[0])))
    mounts = {Path("/"): "ro", Path("/dev"): "tmpfs", **{Path(t): "tmpfs" for t in PRIVATE_TMPFS}}
    args: list[str] = []
    for path, _, kind in ops:
        between = []
        parent = path.parent
        while parent not in mounts:
            between.append(parent)
            parent = parent.parent
        if kind == "mask":
            if mounts[parent] != "tmpfs":  # else it is hidden already
                args += ["--perms", "0755", "--tmpfs", str(path)] if path.is_dir() else ["--ro-bind", "/dev/null", str(path)]
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


def _environment(policy: SandboxPolicy, sandboxed: bool) -> dict[str, str]:
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
        env.update({k: v for k, v in (("HOME", PRIVATE_HOME), ("TMPDIR", "/tmp")) if k not in policy.env})
        user_base = site.getuserbase()
        if site.ENABLE_USER_SITE and os.path.isdir(site.getusersitepackages()):
            env.setdefault("PYTHONUSERBASE", user_base)  # HOME moved; the user's site-packages did not
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


def _holds_private_tmp(path: Path | str) -> bool:
    """Binding `path` would cover a private tmpfs (it is `/`, `/tmp`, or holds one), which is
    mounted before the binds. Masks need no such rule: they are applied by depth, and win a tie."""
    p = _abs(path)
    return any(p == t or p in t.parents for t in map(Path, PRIVATE_TMPFS))


def _abs(path: Path | str) -> Path:
    """Absolute, symlinks resolved: bwrap mounts onto real paths only."""
    return Path(os.path.realpath(path))


def _physical_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return 16 * GiB
