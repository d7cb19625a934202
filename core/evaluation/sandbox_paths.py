"""What a sandbox binds: the system folders, the vendors' toolkits and compilers, the GPU device
nodes, the Python installation and its libraries, the masked private folders; and the two standard
policies, the harness's (`for_harness`) and an agent's (`for_agent`). Imports nothing of the engine."""

from __future__ import annotations

import glob
import os
import site
import sys
from collections.abc import Mapping
from pathlib import Path

from core.evaluation.sandbox_policy import (
    ENV_ALLOW,
    GPU_NODES,
    PRIVATE_TMPFS,
    GiB,
    Limits,
    SandboxPolicy,
    abs_path,
)


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
    return tuple(sorted(p for p in {abs_path(p) for p in paths} if not holds_private_tmp(p)))


def library_paths() -> tuple[Path, ...]:
    """The folders on LD_LIBRARY_PATH (a CUDA or ROCm installed outside the system folders,
    say), which the loader inside must see as outside."""
    found = (
        abs_path(p)
        for p in os.environ.get("LD_LIBRARY_PATH", "").split(":")
        if p.startswith("/") and os.path.isdir(p)
    )
    return tuple(
        dict.fromkeys(
            p for p in found if not holds_private_tmp(p) and not is_under(p, (Path("/tmp"),))
        )
    )


def private_masks() -> tuple[Path, ...]:
    """Folders that hold people's secrets: home folders, per-user runtime folders (agent
    sockets), root's home."""
    home = os.path.expanduser("~")
    return tuple(
        sorted({abs_path(p) for p in ("/home", "/root", "/run/user", home) if os.path.exists(p)})
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
        address_space=None if gpu else max(16 * GiB, physical_memory()),
        processes=max(4096, 32 * (os.cpu_count() or 1)),
        open_files=8192,
        file_size=16 * GiB,
    )
    prefixes = {
        abs_path(p) for p in (sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix)
    }
    python = tuple(p for p in python_paths() if not is_under(p, masked) or is_under(p, prefixes))
    libraries = tuple(p for p in library_paths() if not is_under(p, masked))
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

    workspace = abs_path(workspace)
    home = abs_path(home) if home is not None else workspace.parent / "home"
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
        abs_path(p) for p in (sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix)
    }
    python = tuple(
        p for p in python_paths() if not is_under(p, tuple(hidden)) or is_under(p, prefixes)
    )
    dns = abs_path("/etc/resolv.conf")  # systemd-resolved links it into /run, which is not bound
    resolver = (
        (dns.parent,) if network and dns.exists() and not is_under(dns, (Path("/etc"),)) else ()
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


def is_under(path: Path, folders: tuple[Path, ...] | set[Path]) -> bool:
    p = abs_path(path)
    return any(p == f or f in p.parents for f in map(abs_path, folders))


def holds_private_tmp(path: Path | str) -> bool:
    """Binding `path` would cover a private tmpfs (it is `/`, `/tmp`, or holds one), which is
    mounted before the binds. Masks need no such rule: they are applied by depth, and win a tie."""
    p = abs_path(path)
    return any(p == t or p in t.parents for t in map(Path, PRIVATE_TMPFS))


def physical_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return 16 * GiB
