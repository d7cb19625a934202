"""The manifest of bundled files: sha256 of every file of the bundled tasks (`tasks/`) and of
the engine's data (`core/data/`), as shipped. What judges a candidate (a task's reference,
baseline, checker, workloads; the peaks table; the simulator's constants) must be what the
arena shipped, so the engine refuses to evaluate against a bundled file that no longer
matches (`ManifestMismatch`: one line naming the file and the command that restores it; the
command line exits 2), and says which file a candidate changed.

The user is trusted, candidates are not: `arena tasks add-model` edits bundled task.yaml files
and re-records their entries (`record`); a contributor who edits a bundled task or data file
by hand runs `python -m core.tasks.manifest update`, and tests/test_manifest.py fails until they do.
See docs/sandbox.md.

The manifest covers the shipped tasks only. A task folder is bundled when the manifest lists
files in it; a folder it knows nothing of (`arena tasks new moe/my_kernel` in a checkout) is the
user's own task, never a mismatch: it validates and evaluates like a task in any other folder.
`update` ships every task folder there is (a contributor adding a bundled task runs it).
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from core.devices.device import PACKAGE_ROOT

DATA_DIR = PACKAGE_ROOT / "core" / "data"
TASKS_DIR = PACKAGE_ROOT / "tasks"
MANIFEST = DATA_DIR / "manifest.json"
SKIPPED_DIRS = {"__pycache__"}


class ManifestMismatch(ValueError):
    """A bundled task or data file differs from the manifest (exit code 2)."""


@dataclass(frozen=True)
class Staged:
    """Files as they were read (and checked) before any candidate ran: path -> bytes. The
    engine judges with these bytes; `on_disk()`, taken around an evaluation, says whether a
    candidate changed them."""

    files: dict[Path, bytes]

    def on_disk(self) -> dict[Path, bytes | None]:
        """The same files as they are on disk now."""
        return {p: read(p) for p in self.files}

    def named(self, folder: Path) -> dict[str, bytes]:
        """The staged files directly in `folder`, by name."""
        return {p.name: data for p, data in self.files.items() if p.parent == folder}


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def rel(path: Path) -> str:
    """A bundled file's manifest key: its path from the package root, `/`-separated."""
    return Path(path).resolve().relative_to(PACKAGE_ROOT.resolve()).as_posix()


def is_bundled(path: Path, manifest: dict[str, str] | None = None) -> bool:
    """A file (or folder) the manifest vouches for: the engine's data, and the shipped tasks. A
    task folder is shipped when the manifest lists a file in it (`manifest`: the loaded one, else
    it is read); a folder it does not know is the user's own task (`user_task`)."""
    p = Path(path).resolve()
    data = DATA_DIR.resolve()
    if p == data or data in p.parents:
        return True
    return in_bundled_roots(p) and not user_task(p, manifest)


def in_bundled_roots(path: Path) -> bool:
    """Under the bundled tasks folder or the engine's data, shipped or not."""
    p = Path(path).resolve()
    return any(p == root or root in p.parents for root in (TASKS_DIR.resolve(), DATA_DIR.resolve()))


def task_folder_key(path: Path) -> str | None:
    """`tasks/FAMILY/NAME` of a path in a task folder of the bundled tasks folder, else None."""
    p = Path(path).resolve()
    tasks = TASKS_DIR.resolve()
    if tasks not in p.parents:
        return None
    parts = p.relative_to(tasks).parts
    return rel(tasks / parts[0] / parts[1]) if len(parts) >= 2 else None


def user_task(path: Path, manifest: dict[str, str] | None = None) -> bool:
    """A path in a task folder of the bundled tasks folder that the manifest lists nothing in:
    a task the user made there (`arena tasks new`), not a shipped one."""
    key = task_folder_key(path)
    if key is None:
        return False
    try:
        known = manifest if manifest is not None else load()
    except ManifestMismatch:
        return False  # no manifest to go by: treated as shipped, so the missing manifest is said
    return not any(k.startswith(key + "/") for k in known)


def shipped_task_ids(manifest: dict[str, str] | None = None) -> list[str]:
    """The ids (`gemm/bf16_gemm`) of the tasks the manifest ships."""
    known = manifest if manifest is not None else load()
    return sorted(
        {"/".join(k.split("/")[1:3]) for k in known if k.startswith("tasks/") and k.count("/") >= 3}
    )


def files_under(folder: Path) -> list[Path]:
    """The files a manifest covers in `folder`: all but caches, compiled files, dotfiles and the
    manifest itself."""
    found = []
    for p in sorted(Path(folder).rglob("*")):
        parts = p.relative_to(folder).parts
        if (
            p.is_file()
            and not any(x in SKIPPED_DIRS or x.startswith(".") for x in parts)
            and p.suffix not in (".pyc", ".pyo")
            and p != MANIFEST
        ):
            found.append(p)
    return found


def compute() -> dict[str, str]:
    """The manifest of the files as they are now."""
    return {
        rel(p): sha256(p.read_bytes())
        for root in (TASKS_DIR, DATA_DIR)
        if root.is_dir()
        for p in files_under(root)
    }


def load() -> dict[str, str]:
    try:
        return dict(json.loads(MANIFEST.read_text())["files"])
    except FileNotFoundError:
        raise ManifestMismatch(f"{MANIFEST} is missing: {restore_hint(MANIFEST)}") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise ManifestMismatch(
            f"{MANIFEST} is not a valid manifest ({exc}): {restore_hint(MANIFEST)}"
        ) from None


def save(files: dict[str, str]) -> None:
    MANIFEST.write_text(
        json.dumps({"version": 1, "files": dict(sorted(files.items()))}, indent=1) + "\n"
    )


def restore_hint(path: Path) -> str:
    """The command that puts a bundled file back as shipped: git in a checkout, pip otherwise."""
    if (PACKAGE_ROOT / ".git").exists():
        return f"restore it with `git -C {PACKAGE_ROOT} checkout -- {rel(path)}`, or if you changed it on purpose, `python -m core.tasks.manifest update`"
    return (
        "restore it with `pip install --force-reinstall --no-deps PATH`, PATH being the kernel-arena "
        "checkout or wheel it was installed from (the package index's kernel-arena is another project)"
    )


def stage(paths: Iterable[Path], manifest: dict[str, str] | None = None) -> Staged:
    """Read `paths` once; a bundled one (or a folder's file the manifest does not know, in a
    bundled folder) that does not match the manifest raises ManifestMismatch."""
    files = {Path(p): read(Path(p)) for p in paths}
    candidates = [p for p in files if in_bundled_roots(p)]
    known = manifest if manifest is not None or not candidates else load()
    bundled = [p for p in candidates if is_bundled(p, known)]
    if bundled:
        assert known is not None
        for p in bundled:
            data, want = files[p], known.get(rel(p))
            if data is None and want is None:
                continue
            if data is None:
                raise ManifestMismatch(f"bundled file {rel(p)} is missing: {restore_hint(p)}")
            if want is None:
                raise ManifestMismatch(
                    f"{rel(p)} is not a bundled file (the manifest does not list it): remove it, or if you added it on purpose, `python -m core.tasks.manifest update`"
                )
            if sha256(data) != want:
                raise ManifestMismatch(
                    f"bundled file {rel(p)} no longer matches the arena's manifest (changed after it was shipped): {restore_hint(p)}"
                )
    return Staged({p: d for p, d in files.items() if d is not None})


def stage_task(folder: Path) -> Staged:
    """A task folder's top-level files, checked against the manifest when it is a bundled task
    (a file the manifest lists but the folder lacks is a mismatch too)."""
    folder = Path(folder).resolve()
    paths = {p for p in folder.iterdir() if p.is_file() and not p.name.startswith(".")}
    manifest = load() if in_bundled_roots(folder) else None
    if manifest is not None and is_bundled(folder, manifest):
        prefix = rel(folder) + "/"
        paths |= {
            PACKAGE_ROOT.resolve() / key
            for key in manifest
            if key.startswith(prefix) and "/" not in key[len(prefix) :]
        }
        return stage(sorted(paths), manifest)
    return stage(sorted(paths), manifest)


def stage_engine_data() -> Staged:
    """The engine's data (core/data), checked against the manifest, then loaded into the caches
    the engine reads it from, so that later reads never see a change on disk."""
    manifest = load()
    root = PACKAGE_ROOT.resolve()
    paths = set(files_under(DATA_DIR)) | {
        root / key for key in manifest if key.startswith("core/data/")
    }
    staged = stage(sorted(paths), manifest)
    from core.devices.sim.targets import load_constants

    load_constants()
    return staged


def record(paths: Iterable[Path]) -> None:
    """Re-record the manifest entries of bundled `paths` as they are now (the user edited them:
    `arena tasks add-model`)."""
    manifest = load()
    bundled = [Path(p) for p in paths if is_bundled(p, manifest)]  # a user's task has no entry
    if not bundled:
        return
    for p in bundled:
        manifest[rel(p)] = sha256(p.read_bytes())
    save(manifest)


def differences() -> list[str]:
    """What differs between the shipped files and the manifest, one line each (a user's own
    task folder is no difference: `user_task_folders`)."""
    now, shipped = compute(), load()
    mine = set(user_task_folders(shipped))
    now = {k: v for k, v in now.items() if "/".join(k.split("/")[:3]) not in mine}
    lines = [f"changed: {k}" for k in sorted(now) if k in shipped and now[k] != shipped[k]]
    lines += [f"not in the manifest: {k}" for k in sorted(set(now) - set(shipped))]
    lines += [f"missing: {k}" for k in sorted(set(shipped) - set(now))]
    return lines


def user_task_folders(manifest: dict[str, str] | None = None) -> list[str]:
    """The task folders (`tasks/FAMILY/NAME`) in the bundled tasks folder that the manifest
    ships nothing of: the user's own tasks."""
    known = manifest if manifest is not None else load()
    if not TASKS_DIR.is_dir():
        return []
    return [
        rel(folder)
        for folder in sorted(TASKS_DIR.glob("*/*"))
        if folder.is_dir() and (folder / "task.yaml").is_file() and user_task(folder, known)
    ]


def read(path: Path) -> bytes | None:
    """A file's bytes, None if it is not there."""
    try:
        return path.read_bytes()
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return None


def main(argv: list[str] | None = None) -> int:
    """`python -m core.tasks.manifest check` lists what differs (exit 1 if anything does);
    `python -m core.tasks.manifest update` re-records every bundled file as it is now."""
    args = sys.argv[1:] if argv is None else argv
    if args == ["update"]:
        save(compute())
        print(f"recorded {len(compute())} bundled files in {MANIFEST}")
        return 0
    if args in ([], ["check"]):
        lines = differences()
        print("\n".join(lines) if lines else f"every bundled file matches {MANIFEST}")
        for folder in user_task_folders():
            print(f"{folder}: a user's task (not shipped, not checked; `update` would ship it)")
        return 1 if lines else 0
    print("usage: python -m core.tasks.manifest [check|update]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
