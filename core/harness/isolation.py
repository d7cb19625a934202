"""A candidate's process sees only its own evaluation (docs/integrity.md, "Nothing of one
evaluation is visible to the next").

A warm harness (`arena serve`, the reward API's slots, a batch) runs candidate after candidate,
all as the same user in one sandbox: each one's folder, the sandbox's /tmp and its home stay
where the next can read and rewrite them, and what one leaves in /tmp is memory held for the
harness's whole life. So every candidate worker, before any candidate code runs, enters a mount
namespace of its own (inside a user namespace of its own, which needs no privilege) where:

- fresh tmpfs mounts, size-capped (`TMP_BYTES`), cover /tmp, /var/tmp and /dev/shm (and with
  /tmp the sandbox's home): what the candidate leaves there is gone with its last process;
- the folders that hold other evaluations (the evaluations' root, the harness's log folder:
  `hide`, from the job) are covered by empty ones;
- its own folders (`keep`: its evaluation folder, its candidate's folder) are bound back where
  they were, so every path in its job still works, and so are the folders Python and the
  harness run from where they lie inside a covered one (a `PYTHONPATH` folder under /tmp).

Then it drops every capability of that namespace (no unmount, no remount) and becomes not
dumpable: another candidate of the same user cannot open its /proc/PID/root, cwd or fd, the
one way left into its namespace. A folder that holds one Python or the harness runs from is
never covered.

Linux only; where user namespaces are not available the evaluation runs without this, and the
caller reports why (`isolate` returns the reason).
"""

from __future__ import annotations

import ctypes
import os
import sys
from pathlib import Path

CLONE_NEWNS, CLONE_NEWUSER = 0x00020000, 0x10000000
MS_NOSUID, MS_NODEV, MS_BIND, MS_REC, MS_PRIVATE = 2, 4, 4096, 16384, 1 << 18
PR_SET_DUMPABLE, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS = 4, 24, 38
LINUX_CAPABILITY_VERSION_3 = 0x20080522
TMP_BYTES = 1 << 30  # each private /tmp, /var/tmp and /dev/shm: memory, so capped
MASK_BYTES = 1 << 20  # a mask over another evaluation's folders holds next to nothing
TEMPORARY = ("/tmp", "/var/tmp", "/dev/shm")


class IsolationError(OSError):
    pass


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise IsolationError(err, f"{what}: {os.strerror(err)}")


def _needed(hide: list[str]) -> list[Path]:
    """Folders the harness runs from (Python, its site-packages and `sys.path`, the harness's
    package): never hidden. Of sys.path, not the working folder, which `python -m` puts there,
    nor anything inside a folder to hide."""
    import site

    import core

    found = {Path(sys.prefix), Path(sys.base_prefix), Path(sys.executable).resolve().parent}
    found.add(Path(core.__file__).resolve().parent.parent)
    try:
        sites = [*site.getsitepackages(), site.getusersitepackages()]
    except AttributeError:  # a virtual environment's old site module
        sites = []
    found |= {Path(p).resolve() for p in sites if os.path.isdir(p)}
    here = Path(os.getcwd()).resolve()
    hidden = [Path(h).resolve() for h in hide]
    for p in sys.path:  # not the working folder, nor anything in a folder to hide
        if p and os.path.isabs(p) and os.path.isdir(p):
            path = Path(p).resolve()
            if path != here and not any(_within(path, h) for h in hidden):
                found.add(path)
    return sorted(p for p in found if p.is_dir())


def _within(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def plan(hide: list[str], keep: list[str]) -> tuple[list[tuple[Path, int]], list[Path]]:
    """The folders to cover, shallowest first, each with its size (the temporary folders and
    `hide`, less those that are not there, that lie inside a folder the harness needs, or
    inside one already covered), and the folders the harness needs inside them, which are
    bound back with `keep`."""
    needed = _needed(hide)
    wanted = [(Path(t), TMP_BYTES) for t in TEMPORARY] + [(Path(h), MASK_BYTES) for h in hide]
    chosen: list[tuple[Path, int]] = []
    for path, size in sorted(wanted, key=lambda ps: len(ps[0].parts)):
        try:
            path = path.resolve()
        except OSError:
            continue
        if not path.is_dir() or path == Path("/"):
            continue
        if any(_within(path, c) for c, _ in chosen):
            continue
        if any(_within(path, n) for n in needed):
            continue  # a folder the harness runs from holds it
        chosen.append((path, size))
    kept = [Path(k).resolve() for k in keep]
    inside = [
        n
        for n in needed
        if any(_within(n, c) for c, _ in chosen) and not any(_within(n, k) for k in kept)
    ]
    return chosen, inside


def enter(job: dict[str, object]) -> str | None:
    """Isolate a candidate worker of `job` (its candidate view): its evaluation folder and its
    candidate's folder kept, the job's `isolation.hide` (or its evaluation folder's parent)
    covered. None when done, else why not."""
    workdir = Path(str(job["workdir"]))
    given = job.get("isolation")
    hide = given.get("hide") if isinstance(given, dict) else None
    hide = [str(h) for h in hide] if isinstance(hide, list) else [str(workdir.parent)]
    keep = [str(workdir), str(Path(str(job["candidate"])).parent)]
    try:
        return isolate(hide, keep, as_root=os.geteuid() == 0)
    except IsolationError as exc:
        raise SystemExit(f"the candidate's worker could not be isolated: {exc}") from None


def isolate(hide: list[str], keep: list[str], as_root: bool = False) -> str | None:
    """Enter this process's own mount namespace as the module says (and, unless `as_root`, a
    user namespace of its own to own it; as root the caller drops privileges next). Returns
    None when done, else why not (nothing was changed then); raises IsolationError when it
    failed half way. Call before any candidate code runs."""
    lib = _libc()
    keep_paths = [Path(k).resolve() for k in keep if os.path.isdir(k)]
    covers, needed = plan(hide, [str(k) for k in keep_paths])
    keep_paths += needed  # bound back where they were
    fds: list[int] = []
    home = os.environ.get("HOME")
    uid, gid = os.getuid(), os.getgid()
    try:
        if not as_root:
            lib.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)  # its own /proc/self/uid_map, writable
        _check(lib.unshare(CLONE_NEWNS if as_root else CLONE_NEWUSER | CLONE_NEWNS), "unshare")
    except IsolationError as exc:
        lib.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
        return f"no namespace of its own for the candidate's worker ({exc.strerror})"
    try:
        if not as_root:
            for name, text in (
                ("setgroups", "deny"),
                ("uid_map", f"{uid} {uid} 1"),
                ("gid_map", f"{gid} {gid} 1"),
            ):
                with open(f"/proc/self/{name}", "w") as f:
                    f.write(text)
        _check(lib.mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "mount --make-rprivate /")
        # Opened in this namespace (a mount of another one cannot be bound), before the covers.
        fds += [os.open(k, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC) for k in keep_paths]
        for path, size in covers:
            options = f"size={size},mode={'1777' if str(path) in TEMPORARY else '0755'}"
            _check(
                lib.mount(
                    b"tmpfs", str(path).encode(), b"tmpfs", MS_NOSUID | MS_NODEV, options.encode()
                ),
                f"mount tmpfs on {path}",
            )
        for path, fd in zip(keep_paths, fds):
            if any(_within(path, c) for c, _ in covers):
                _make_dirs(path, covers)
                source = f"/proc/self/fd/{fd}".encode()
                _check(
                    lib.mount(source, str(path).encode(), None, MS_BIND | MS_REC, None),
                    f"bind {path}",
                )
        if home and any(_within(Path(home), c) for c, _ in covers):
            _make_dirs(Path(home), covers)
        if keep_paths:
            os.chdir(
                keep_paths[0]
            )  # a cwd in a covered folder would still reach it (its own folder)
    except (OSError, IsolationError) as exc:
        # Half set up: this process must not run a candidate; the caller fails the evaluation.
        raise IsolationError(getattr(exc, "errno", 0) or 1, f"isolation failed: {exc}") from None
    finally:
        for fd in fds:
            os.close(fd)
    if not as_root:
        drop_all(lib)
    return None


def _make_dirs(path: Path, covers: list[tuple[Path, int]]) -> None:
    """Make `path` inside the tmpfs that covers it, each new folder traversable (0755)."""
    cover = max((c for c, _ in covers if _within(path, c)), key=lambda c: len(c.parts))
    current = cover
    for part in path.relative_to(cover).parts:
        current = current / part
        if not current.exists():
            current.mkdir(mode=0o755)


def drop_all(lib: ctypes.CDLL | None = None) -> None:
    """No capability left in this namespace, none to gain (no_new_privs), and not dumpable."""
    lib = lib or _libc()
    for cap in range(64):
        lib.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
    lib.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    header = (ctypes.c_uint32 * 2)(LINUX_CAPABILITY_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()
    _check(lib.capset(header, data), "capset")
    lib.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)


SCRATCH = ("torch_extensions", "triton_cache")  # a candidate's builds in its evaluation folder


def forget(workdir: Path, candidate_folder: Path | None = None, root: Path | None = None) -> None:
    """Remove what a finished candidate leaves in its evaluation folder: its builds and, where
    the harness staged it (inside `root`, by default its evaluation folder: a batch member's),
    its files. Its logs stay for the engine to read."""
    import shutil

    for name in SCRATCH:
        shutil.rmtree(workdir / name, ignore_errors=True)
    within = (root or workdir).resolve()
    folders = [candidate_folder] if candidate_folder is not None else []
    if root is not None:  # the harness staged its first copy here (batch.py)
        folders.append(workdir / "candidate")
    for folder in folders:
        if _within(folder.resolve(), within):
            shutil.rmtree(folder, ignore_errors=True)
