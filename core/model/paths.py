"""Where the arena keeps its data on this machine: the results store's default path.

It lives with the nouns because both the store and the sandbox (which masks the store's folder
from every untrusted process) need it, and the sandbox sits below the store."""

from __future__ import annotations

import os
from pathlib import Path

def default_path() -> Path:
    """`$ARENA_DB`, else `${XDG_DATA_HOME:-~/.local/share}/kernel-arena/arena.db`."""
    if os.environ.get("ARENA_DB"):
        return Path(os.environ["ARENA_DB"]).expanduser()
    data_home = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data_home).expanduser() / "kernel-arena" / "arena.db"
