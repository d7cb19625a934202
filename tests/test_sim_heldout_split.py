"""The simulator's held-out figures are out of sample (bench/sim_heldout.py, docs/simulation.md
"The band"): the published kernels are split by kernel, every other one of each family by name
is the fit half, and the bands are calibrated on that half alone."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _heldout():
    sys.path.insert(0, str(ROOT / "bench"))
    spec = importlib.util.spec_from_file_location("sim_heldout", ROOT / "bench" / "sim_heldout.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def _published(task: str, kernel: str, measured: float = 10.0) -> dict:
    return {"kind": "published", "task": task, "kernel": kernel, "measured_us": measured}


def test_the_split_is_by_kernel_and_every_workload_of_a_kernel_is_on_one_side():
    heldout = _heldout()
    points = [
        _published("norm/a", k)
        for k in ("liger_norm", "sglang_norm", "unsloth_norm")
        for _ in range(3)
    ] + [_published("moe/b", "only_router"), {"kind": "identity", "task": "norm/a"}]
    heldout.split_published(points)
    sides = {p["kernel"]: p["split"] for p in points if p["kind"] == "published"}
    assert sides == {
        "liger_norm": "heldout",
        "sglang_norm": "fit",
        "unsloth_norm": "heldout",
        "only_router": "heldout",  # a family of one kernel is all held out
    }
    for kernel, side in sides.items():
        assert all(p["split"] == side for p in points if p.get("kernel") == kernel)
    assert "split" not in points[-1]  # the identity points are the library fit's own


def test_bands_come_from_the_fit_half_and_a_thin_family_takes_the_pooled_one(monkeypatch):
    heldout = _heldout()
    fit = [_published("norm/a", "fit_norm", 10.0) for _ in range(10)]
    for i, p in enumerate(fit):
        p.update(split="fit", predicted=10.0 * (1 + 0.01 * i))  # errors 0% .. 9%
    wild = [_published("norm/a", "held_norm", 10.0) | {"split": "heldout", "predicted": 100.0}]
    thin = [_published("moe/b", "fit_router", 10.0) | {"split": "fit", "predicted": 30.0}]
    monkeypatch.setattr(heldout, "price", lambda p, target, c: p["predicted"])
    bands = heldout.family_bands(fit + wild + thin, None, None)
    # norm: the 85th percentile of its own fit errors (9 of 10 within 8%), less the baseline's 2%
    assert math.isclose(bands["norm"], max(0.05, math.ceil((1.08 / 1.02 - 1) * 1000) / 1000))
    assert bands["norm"] < 0.1, "the held-out kernel, 10x off, never widens a band"
    assert bands["moe"] >= bands["norm"]  # one point: the pooled fit half's band
