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


CONSOLE_SCRIPT = "arena"


def cli_module() -> str:
    """The module behind the `arena` command, read from the installed distribution's console
    script (pyproject's `[project.scripts]`), so the engine never names its front end: an
    attempt's workspace gets an `arena` wrapper that runs this module, and the agents' sandbox
    leaves its package readable."""
    from importlib.metadata import entry_points

    for entry in entry_points(group="console_scripts", name=CONSOLE_SCRIPT):
        return str(entry.module)
    raise LookupError(
        f"the `{CONSOLE_SCRIPT}` command is not installed: run `pip install -e .` in the checkout"
    )


def cli_package() -> str:
    """The top-level package of the `arena` command's module."""
    return cli_module().split(".", 1)[0]
