"""Triton's cache, kept apart per process role (docs/performance.md, "Triton's cache").

Before, every worker of a warm harness shared one Triton cache, the sandbox's `~/.triton/cache`:
a candidate could plant a cubin or a launcher there under the key of the baseline's kernel (the
trusted worker would load it: a slower baseline, or code in the trusted process), under the key
of a neighbour's kernel (a sibling of a GRPO group made slower), or read what the baseline
compiled for the hidden workloads. Now:

- **A candidate's worker** caches in its own folder, `triton/` in its evaluation folder
  (`candidate_dir`), fresh for each candidate. Before its worker starts, the harness writes in
  it (`JitStore.seed`) what it may share: Triton's driver utilities (`cuda_utils`, the same for
  every job, built by a trusted worker), and, for a candidate whose files are byte-identical to
  an earlier one's (`source_key`), what that one's compile stage left (`harvest`, taken when its
  compile stage ended). A copy then loads its kernels instead of compiling them, and is still
  judged on its own. Only an identical source gets another's files: what the earlier one could
  put there, the copy's own code could do in its own process, and by the end of its compile
  stage it had seen only what the copy sees (its view of the job and the first visible
  workload).
- **The trusted worker** caches in its own memory (`TrustedCache`, Triton's cache-manager
  seam): a lookup is answered from memory only, written afresh into a private folder for
  Triton to read, never from what lies on disk. What it compiles (the baseline's kernels,
  their launchers, the driver's utilities) goes back to the parent at the end of each
  evaluation (`jit` op) and every later trusted worker, forked from the parent, starts with
  it: the baseline compiles once per harness, as it did.

The store lives in the harness parent's memory, which no candidate can reach (it is not
dumpable), and is bounded (`MAX_BYTES`; what does not fit is not kept).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any, ClassVar

from core.harness.candidate_owner import grant

CANDIDATE_DIR = "triton"  # in a candidate's evaluation folder
MAX_BYTES = 512 << 20  # the whole store
MAX_SOURCE_BYTES = 64 << 20  # one source's harvest
MAX_FILES = 4096
MAX_SOURCE_FILES = 32  # a candidate folder with more files is not keyed (nothing shared)
MAX_KEYED = 16 << 20  # ... nor one whose files hold more bytes
SHARED_PREFIXES = ("cuda_utils", "hip_utils")  # driver utilities: the same for every job
_NAME = re.compile(r"^[A-Za-z0-9_=-]{1,128}/[A-Za-z0-9_.=+-]{1,200}$")  # `key/filename`
GROUP = "__grp__"  # Triton's group files: the children of one compile
KEEP_WRITTEN = 32  # folders the trusted worker's cache wrote that stay (Triton has read them)
TRUSTED_ROOT = "arena-trusted-jit"  # in the temporary folder: each trusted worker's own inside


def candidate_dir(workdir: str | Path) -> Path:
    return Path(workdir) / CANDIDATE_DIR


def source_key(candidate: str | Path) -> str | None:
    """A digest of the candidate's folder (its module and every file beside it, as staged):
    equal keys, equal sources. None where the folder is too large to key."""
    folder = Path(candidate).parent
    try:
        paths = [p for p in folder.iterdir() if p.is_file()]
        if len(paths) > MAX_SOURCE_FILES or sum(p.stat().st_size for p in paths) > MAX_KEYED:
            return None  # not a candidate's folder of sources: nothing shared
        files = {p.name: p.read_bytes() for p in paths}
    except OSError:
        return None
    return _digest(Path(candidate).name, files)


def spec_key(member: dict[str, Any]) -> str | None:
    """`source_key` of a batch member before it is staged (its `entry` and `sources`)."""
    sources = member.get("sources") or {}
    return _digest(str(member.get("entry")), {n: t.encode() for n, t in sources.items()})


def _digest(entry: str, files: dict[str, bytes]) -> str | None:
    if len(files) > MAX_SOURCE_FILES:
        return None
    digest = hashlib.sha256(entry.encode())
    for name in sorted(files):
        digest.update(f"\0{name}\0{len(files[name])}\0".encode())
        digest.update(files[name])
    return digest.hexdigest()


def read_folder(folder: Path, limit: int) -> dict[str, bytes] | None:
    """The cache entries in a Triton cache folder (`key/filename` -> bytes), a group file's
    paths made relative; None where it holds more than `limit` bytes."""
    entries: dict[str, bytes] = {}
    total = 0
    try:
        keys = [k for k in folder.iterdir() if k.is_dir() and not k.is_symlink()]
    except OSError:
        return {}
    for key in keys:
        for path in key.iterdir():
            name = f"{key.name}/{path.name}"
            if not _NAME.match(name) or not path.is_file() or path.is_symlink():
                continue  # Triton's temporary folders, anything not its own
            raw: bytes | None = path.read_bytes()
            if raw is not None and path.name.startswith(GROUP):
                raw = _relative_group(raw, key)
            if raw is None:
                continue
            data = raw
            total += len(data)
            if total > limit or len(entries) >= MAX_FILES:
                return None
            entries[name] = data
    return entries


def _relative_group(data: bytes, key: Path) -> bytes | None:
    """A group file names its children by absolute path: kept as names (the children of a
    compile all lie in its key's folder); None where one does not."""
    try:
        children = json.loads(data)["child_paths"]
        names = {c: Path(p).name for c, p in children.items()}
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    if any(Path(p).parent.name != key.name for p in children.values()):
        return None
    return json.dumps({"child_names": names}).encode()


def write_folder(folder: Path, entries: dict[str, bytes]) -> int:
    """Write `entries` into a Triton cache folder (group files with their children's paths
    there); how many were written."""
    written = 0
    for name, data in entries.items():
        key, filename = name.split("/", 1)
        target = folder / key
        target.mkdir(parents=True, exist_ok=True)
        if filename.startswith(GROUP):
            names = json.loads(data)["child_names"]
            data = json.dumps(
                {"child_paths": {c: str(target / n) for c, n in names.items()}}
            ).encode()
        (target / filename).write_bytes(data)
        written += 1
    return written


class JitStore:
    """The harness parent's store (one per harness, `STORE`): what trusted workers compiled,
    and per source key what a candidate's compile left. Slots of a concurrent batch use it
    from their threads."""

    def __init__(self, limit: int = MAX_BYTES):
        self.limit = limit
        self.trusted: dict[str, bytes] = {}
        self.by_source: OrderedDict[str, dict[str, bytes]] = OrderedDict()
        self.size = 0
        self.lock = threading.Lock()

    def _fits(self, entries: dict[str, bytes]) -> bool:
        grow = sum(len(v) for v in entries.values())
        while self.size + grow > self.limit and self.by_source:  # the oldest sources go first
            _, old = self.by_source.popitem(last=False)
            self.size -= sum(len(v) for v in old.values())
        return self.size + grow <= self.limit

    def add_trusted(self, entries: dict[str, bytes]) -> None:
        with self.lock:
            new = {k: v for k, v in entries.items() if k not in self.trusted and _NAME.match(k)}
            if new and self._fits(new):
                self.trusted.update(new)
                self.size += sum(len(v) for v in new.values())

    def seed(self, workdir: str | Path, key: str | None) -> int:
        """Fill a candidate's fresh cache folder before its worker starts (entries written
        by the parent, from its memory); how many files it wrote."""
        folder = candidate_dir(workdir)
        if folder.exists():
            return 0  # a second worker of the same candidate: the folder is its own already
        with self.lock:
            shared = {
                k: v for k, v in self.trusted.items() if k.split("/")[1].startswith(SHARED_PREFIXES)
            }
            same = dict(self.by_source.get(key) or {}) if key else {}
        folder.mkdir(parents=True, exist_ok=True)
        written = write_folder(folder, {**shared, **same})
        grant(folder, recursive=True)  # the candidate's, also where it runs as another uid
        return written

    def has(self, key: str | None) -> bool:
        with self.lock:
            return key is not None and key in self.by_source

    def harvest(self, workdir: str | Path, key: str | None) -> None:
        """What a candidate's compile stage left in its folder, for a later identical one."""
        if key is None or self.has(key):
            return
        entries = read_folder(candidate_dir(workdir), MAX_SOURCE_BYTES)
        if not entries:
            return
        with self.lock:
            if key not in self.by_source and self._fits(entries):
                self.by_source[key] = entries
                self.size += sum(len(v) for v in entries.values())


STORE = JitStore()  # the harness parent's; a trusted worker forked from it inherits it


# --- inside the trusted worker ----------------------------------------------------------------


class TrustedCache:
    """Triton's cache manager in the trusted worker: entries in this process's memory only
    (those inherited from the parent's store, and its own), written afresh into a private
    folder each time Triton asks for one; `fresh` is what it compiled itself."""

    # Triton makes a manager per lookup: the state is the class's, one per process.
    entries: ClassVar[dict[str, bytes]] = {}
    fresh: ClassVar[dict[str, bytes]] = {}
    root: ClassVar[str] = ""
    recent: ClassVar[list[Path]] = []  # the folders written last (older ones removed)

    def __init__(self, key: str, override: bool = False, dump: bool = False):
        self.key = key
        self.off = override or dump  # Triton's override and dump folders: not this cache's
        self.folder: Path | None = None  # this manager's (one compile's) files, made on first use

    @classmethod
    def install(cls, inherited: dict[str, bytes], root: str, device_type: str = "cpu") -> bool:
        """Triton's cache of this process from here on; on a GPU, Triton's driver utilities
        are built (or loaded from what the parent inherited) now, so that the parent can hand
        them to candidates (`seed`) after this worker's first evaluation."""
        try:
            from triton import knobs
        except ImportError:
            return False
        cls.entries, cls.fresh = dict(inherited), {}
        os.makedirs(root, mode=0o700, exist_ok=True)
        cls.root = tempfile.mkdtemp(prefix="triton-", dir=root)
        knobs.cache.manager_class = cls
        if device_type in ("cuda", "hip"):
            try:
                from triton.runtime import driver

                driver.active.utils  # noqa: B018 - built here: gcc, once per harness
            except Exception:  # noqa: BLE001 - no driver here: a candidate builds its own
                pass
        return True

    def _write(self, files: dict[str, bytes]) -> dict[str, str]:
        """`files` in this manager's new folder of the private root, for Triton to read at once
        (Triton makes a manager per compile or build, reads a kernel's files when it is done
        and loads a module right after asking); the folders of older managers go."""
        if self.folder is None:
            top = Path(tempfile.mkdtemp(dir=self.root))
            self.folder = top / self.key
            self.folder.mkdir()
            type(self).recent.append(top)
            while len(self.recent) > KEEP_WRITTEN:
                shutil.rmtree(self.recent.pop(0), ignore_errors=True)
        paths = {}
        for filename, data in files.items():
            (self.folder / filename).write_bytes(data)
            paths[filename] = str(self.folder / filename)
        return paths

    def get_file(self, filename: str) -> str | None:
        data = None if self.off else self.entries.get(f"{self.key}/{filename}")
        return None if data is None else self._write({filename: data})[filename]

    def put(self, data: Any, filename: str, binary: bool = True) -> str:
        raw = data if isinstance(data, bytes) else str(data).encode()
        if not self.off:
            name = f"{self.key}/{filename}"
            self.entries[name] = self.fresh[name] = raw
        return self._write({filename: raw})[filename]

    def get_group(self, filename: str) -> dict[str, str] | None:
        group = None if self.off else self.entries.get(f"{self.key}/{GROUP}{filename}")
        if group is None:
            return None
        names = json.loads(group)["child_names"]
        files = {n: self.entries.get(f"{self.key}/{n}") for n in names.values()}
        if any(v is None for v in files.values()):
            return None
        paths = self._write({n: v for n, v in files.items() if v is not None})
        return {child: paths[n] for child, n in names.items()}

    def put_group(self, filename: str, group: dict[str, str]) -> str:
        names = {child: Path(path).name for child, path in group.items()}
        return self.put(json.dumps({"child_names": names}).encode(), f"{GROUP}{filename}")


def pack(entries: dict[str, bytes]) -> tuple[dict[str, Any], bytes]:
    """Entries as a reply and its payload (the trusted worker's `jit` op)."""
    names = sorted(entries)
    return (
        {"ok": True, "names": names, "sizes": [len(entries[n]) for n in names]},
        b"".join(entries[n] for n in names),
    )


def unpack(reply: dict[str, Any], payload: bytes | bytearray | None) -> dict[str, bytes]:
    """The entries of a `jit` reply; {} where it is not well formed."""
    names, sizes = reply.get("names"), reply.get("sizes")
    data = bytes(payload or b"")
    if (
        not isinstance(names, list)
        or not isinstance(sizes, list)
        or len(names) != len(sizes)
        or not all(isinstance(n, str) and _NAME.match(n) for n in names)
        or not all(type(s) is int and s >= 0 for s in sizes)
        or sum(sizes) != len(data)
    ):
        return {}
    out, at = {}, 0
    for name, size in zip(names, sizes):
        out[name] = data[at : at + size]
        at += size
    return out
