"""Temporary folders that say which process made them, and the sweep that removes those whose
process died without removing them (`kill -9`, a power cut, an out-of-memory kill).

The arena's working folders (`arena-rl-*`: a server's evaluations, their job files and
harness logs; `arena-cand-*`: the candidates' sources; `arena-run-*`: a run's) are removed
when their process ends normally. A process that is killed cannot, so each folder holds an
owner file (`.arena-owner`: process id, host, start time, `core.model.owner`), and the next
`arena serve` or `arena run` on this host removes the folders whose owner is gone. A folder
without an owner file, on another host, or of a live process is never touched."""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from core.model.owner import Owner

OWNER_FILE = ".arena-owner"
PREFIXES = ("arena-rl-", "arena-cand-", "arena-run-")  # what `sweep` looks for


def owned_tempdir(prefix: str, parent: Path | None = None) -> Path:
    """`tempfile.mkdtemp(prefix=...)` (mode 700) with this process's owner file in it."""
    folder = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    me = Owner.me()
    (folder / OWNER_FILE).write_text(
        json.dumps({"pid": me.pid, "host": me.host, "token": me.token})
    )
    return folder


def remove_tree(folder: Path, tries: int = 5) -> bool:
    """Remove `folder`, trying again a few times: a process that was just told to end (a
    harness, its logger) may still write a file into it, and one pass then leaves the folder
    behind (`arena run`'s temporary folder under SIGTERM on a loaded machine). True once gone."""
    for attempt in range(tries):
        shutil.rmtree(folder, ignore_errors=True)
        if not folder.exists():
            return True
        time.sleep(0.05 * 2**attempt)
    return not folder.exists()


def owner_of(folder: Path) -> Owner | None:
    """The owner its file names, or None (no file, or not one of ours)."""
    try:
        data = json.loads((folder / OWNER_FILE).read_text())
        return Owner(int(data["pid"]), str(data["host"]), str(data["token"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


@dataclass(frozen=True)
class Swept:
    folder: Path
    owner: Owner


def sweep(parent: Path | None = None, prefixes: tuple[str, ...] = PREFIXES) -> list[Swept]:
    """Remove the folders under `parent` (default: the temporary folder) whose name starts with
    one of `prefixes` and whose owner process, on this host, is gone. Returns what it removed."""
    root = Path(parent or tempfile.gettempdir())
    removed: list[Swept] = []
    try:
        entries = [p for p in root.iterdir() if p.name.startswith(prefixes)]
    except OSError:
        return removed
    for folder in entries:
        owner = owner_of(folder)
        if owner is None or owner.alive() is not False:
            continue
        shutil.rmtree(folder, ignore_errors=True)
        if not folder.exists():
            removed.append(Swept(folder, owner))
    return removed
