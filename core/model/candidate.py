"""The candidate: the agent's Python module (`solution.py` in a workspace) plus the native
sources beside it that its wrapper may build through PyTorch's extension loader.

The one list of native-source suffixes lives here: every place that ships, stages, scans,
hashes or accepts a candidate (the local and Ray executors, the SSH bundle, batches, the
`arena check` server and client, the attempt's outcome) asks this module, so a candidate that
works locally works on every device."""

from __future__ import annotations

from pathlib import Path

NATIVE_SOURCES: tuple[str, ...] = (".cu", ".cuh", ".hip", ".cpp", ".cc", ".c", ".h", ".hpp")


def is_native_source(path: Path) -> bool:
    """A CUDA/HIP/C++ source or header that may sit beside a candidate."""
    return path.suffix in NATIVE_SOURCES


def native_siblings(candidate: Path) -> list[Path]:
    """The native sources in the candidate's folder (plain files), sorted by name."""
    return sorted(
        p
        for p in candidate.parent.iterdir()
        if p.is_file() and is_native_source(p) and p != candidate
    )


def candidate_files(candidate: Path) -> list[Path]:
    """The candidate module first, then its native siblings: what travels with it to a device."""
    return [candidate, *native_siblings(candidate)]
