"""Who owns a candidate's files when the harness runs as root without a sandbox.

Unsandboxed as root, each candidate worker drops to `ARENA_CANDIDATE_UID` (65534, nobody;
zygote.drop_privileges), so a folder the harness parent makes for it, as root, must be handed
to that uid before the worker starts, or the candidate cannot write in it: its log, its scratch
files, and its Triton cache (jit_cache.JitStore.seed writes that one, and Triton writes a new
key folder there for every kernel it compiles). Sandboxed, the parent already runs as the
sandbox's uid, and nothing here changes anything."""

from __future__ import annotations

import os
from pathlib import Path

# set by core/evaluation/sandbox.wrap for an unsandboxed harness run by root
CANDIDATE_UID_ENV = "ARENA_CANDIDATE_UID"


def candidate_uid() -> int | None:
    """The uid candidate workers drop to, where this process is root and one is set."""
    text = os.environ.get(CANDIDATE_UID_ENV, "")
    if not text.isdigit() or not hasattr(os, "geteuid") or os.geteuid() != 0:
        return None
    return int(text)


def grant(path: Path | str, recursive: bool = False) -> None:
    """Hand `path` (with `recursive`, everything below it too) to the candidates' uid; a no-op
    where `candidate_uid` is None."""
    uid = candidate_uid()
    if uid is None:
        return
    os.chown(path, uid, uid, follow_symlinks=False)
    if not recursive:
        return
    for root, dirs, files in os.walk(path):
        for name in (*dirs, *files):
            os.chown(os.path.join(root, name), uid, uid, follow_symlinks=False)
