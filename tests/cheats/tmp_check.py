"""Companion of tmp_hog (issue 37): right only if /tmp is empty of what earlier candidates left
and has the room a fresh one has (at least 900 MB free)."""

import os

import torch

st = os.statvfs("/tmp")
_CLEAN = not os.path.exists("/tmp/arena-tmp-hog") and st.f_bavail * st.f_frsize >= 900 << 20


def run(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return 2 * x + b if _CLEAN else torch.zeros_like(x)
