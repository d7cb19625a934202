"""A candidate whose worker dies mid-stage frees its shared regions at once (issue 20).

Each slot's trusted worker allocates the regions a candidate's worker maps for its
correctness runs (memfd here; CUDA IPC on a GPU, where a block a killed consumer never
returned stays allocated for the trusted worker's whole life unless it is returned for it).
Every path that ends a candidate's worker (a crash, a flag, a timeout, the end of its
evaluation) has the trusted worker free that worker's regions; its answer to `regions`
(what it holds, and how many regions it freed for dead workers) is written after each
candidate to the batch's `trusted_regions.jsonl`, which these tests read.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from core.evaluation.evaluator import Evaluator
from core.evaluation.job import Timing
from core.harness import shared_check, shared_region
from core.model.task import Limits
from core.tasks.spec import load_task

FIXTURES = Path(__file__).resolve().parent / "fixtures"
FAST = Timing(alternations=2, budget_ms=20.0, min_calls=1, max_calls=5)

# Each dies on its worker's second call: the first is the compile stage's, the second a
# correctness run on inputs the trusted worker wrote into the region the worker maps.
SECOND_CALL = """
import os
import torch
CALLS = [0]
def run(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    CALLS[0] += 1
    if CALLS[0] == 2:
        {action}
    return x * 2.0 + b
"""
CANDIDATES = {
    "right": SECOND_CALL.format(action="pass"),
    "exits": SECOND_CALL.format(action="os._exit(3)"),
    "segfaults": SECOND_CALL.format(action="import ctypes; ctypes.string_at(0)"),
    "hangs": SECOND_CALL.format(action="import time; time.sleep(600)"),
    # a proven flag (torch_patched): the stage fails and the worker is killed
    "flagged": SECOND_CALL.format(action="torch.allclose = lambda *a, **k: True"),
    # right, but it keeps a tensor over its region past the stage (the mapping stays)
    "keeps": SECOND_CALL.format(action="KEPT.append(x)").replace(
        "CALLS = [0]", "CALLS, KEPT = [0], []"
    ),
}


@pytest.fixture(scope="module")
def axpy():
    return load_task(FIXTURES / "tasks" / "elementwise" / "axpy")


def _batch(axpy, names: list[str], tmp_path: Path, concurrency: str, limits: Limits | None):
    folder = tmp_path / "candidates"
    folder.mkdir()
    paths = []
    for i, name in enumerate(names):
        path = folder / f"{i}_{name}.py"
        path.write_text(CANDIDATES[name])
        paths.append(path)
    saved = os.environ.get("ARENA_BATCH_CONCURRENCY")
    os.environ["ARENA_BATCH_CONCURRENCY"] = concurrency
    # Fresh workers for timing: a kept worker (the CPU device's default) lives on, stopped,
    # with whatever it maps, until its turn; here every candidate's worker ends with its stages.
    os.environ["ARENA_QUIESCE_CPU"] = "0"
    try:
        with Evaluator("cpu", timing=FAST, workdir=tmp_path / "work") as evaluator:
            results = asyncio.run(
                evaluator.aevaluate_batch(axpy, paths, seed=5, limits=limits, profile="train")
            )
    finally:
        os.environ.pop("ARENA_QUIESCE_CPU", None)
        if saved is None:
            os.environ.pop("ARENA_BATCH_CONCURRENCY", None)
        else:
            os.environ["ARENA_BATCH_CONCURRENCY"] = saved
    (log,) = list((tmp_path / "work").rglob("trusted_regions.jsonl"))
    return results, [json.loads(line) for line in log.read_text().splitlines()]


def _held_of(line: dict, member: int) -> list[str]:
    """The keys a trusted worker still holds for candidate `member` (its untimed run or its
    re-run alone)."""
    mine = (f"member{member}:", f"alone{member}:")
    return [
        k for k in [*line["regions"], *line["orphans"]] if k.startswith(mine)
    ]  # keys: prefix + worker name:pid


def test_a_crashed_or_flagged_candidate_leaves_no_region_behind(axpy, tmp_path):
    names = ["right", "exits", "segfaults", "flagged", "keeps"]
    results, lines = _batch(axpy, names, tmp_path, "2", None)
    assert [(r.status, r.failed_stage) for r in results] == [
        ("passed", None),
        ("failed", "correctness"),
        ("failed", "correctness"),
        ("failed", "correctness"),
        ("passed", None),
    ]
    assert results[1].stage("correctness").status == "crashed"
    assert results[2].stage("correctness").status == "crashed"
    assert [f.split(":")[0] for f in results[3].integrity_flags] == ["torch_patched"]
    assert results[0].stage("performance").status == "passed" and results[4].speedup
    # After each candidate's untimed stages (and after its re-run alone, for the failed ones),
    # its slot's trusted worker holds nothing of it.
    seen = {(line["member"], line["phase"]) for line in lines}
    for k in range(len(names)):
        assert (k, "untimed") in seen
    for k in (1, 2, 3):
        assert (k, "alone") in seen
    for line in lines:
        assert _held_of(line, line["member"]) == [], line
    # The crashed workers' regions were freed as a dead worker's, not with the batch's end.
    assert max(line["freed_dead"] for line in lines) >= 2


def test_a_timed_out_candidate_frees_its_region_in_a_batch_of_one_at_a_time(axpy, tmp_path):
    names = ["hangs", "right"]
    limits = Limits(compile_s=60.0, correctness_s=6.0, performance_s=60.0)
    results, lines = _batch(axpy, names, tmp_path, "1", limits)
    assert [(r.status, r.failed_stage) for r in results] == [
        ("failed", "correctness"),
        ("passed", None),
    ]
    assert results[0].stage("correctness").status == "timeout"
    first = next(line for line in lines if line["member"] == 0)
    assert first["regions"] == {} and first["orphans"] == {}
    assert first["freed_dead"] >= 1


def test_a_round_left_mid_way_waits_for_its_worker_then_goes():
    """A timed round's region whose worker left mid-round is not freed at once (it may still
    map it): kept under that worker's key until the parent says it is dead."""
    regions = shared_check.CheckRegions(shared_region.torch.device("cpu"))
    region, _, fds = shared_region.create_region(4096, regions.device)
    for fd in fds:
        os.close(fd)
    regions.orphan("member0:candidate:1", region)
    assert regions.held()["orphans"] == {"member0:candidate:1": 4096}
    regions.release("member0:candidate:1")  # not known dead: kept
    assert regions.held()["orphans"] == {"member0:candidate:1": 4096}
    regions.release("member0:candidate:1", gone=True)
    assert regions.held() == {"regions": {}, "orphans": {}, "freed_dead": 1}
    assert region.base is None


def test_a_worker_that_keeps_a_tensor_over_its_region_says_so_when_it_unmaps():
    """Its region then waits in the trusted worker until that worker is dead, instead of being
    given back while mapped (a CUDA block it still maps would otherwise be lost for good)."""
    cpu = shared_region.torch.device("cpu")
    trusted_side = shared_check.CheckRegions(cpu)
    header, fds = trusted_side.write("m0:w:1", "m0:", [], 1, [], {})
    worker = shared_check.CandidateRegion()
    worker.attach(header["region"], fds, cpu)
    assert worker.detach() is True  # nothing kept: unmapped
    header, fds = trusted_side.write("m0:w:2", "m0:", [], 1, [], {})
    worker.attach(header["region"], fds, cpu)
    kept = worker.region.view(shared_region.Slot(0, "uint8", (16,)))
    assert worker.detach() is False
    trusted_side.keep_until_gone("m0:w:2")
    assert trusted_side.held()["orphans"] == {"m0:w:2": 256}
    trusted_side.release("m0:w:2", gone=True)
    assert trusted_side.held()["orphans"] == {}
    del kept


def test_a_region_that_does_not_fit_frees_the_stale_ones_and_is_tried_once_more(monkeypatch):
    """Out of memory: the trusted worker frees its other candidates' regions and its cache,
    then tries again; a second failure names the size and the device (the parent makes it
    that candidate's infrastructure error, never the batch's)."""
    import errno

    real = shared_region._create_region
    calls = []

    def tight(nbytes, device):
        calls.append(nbytes)
        if len(calls) == 1 or nbytes > 1 << 20:
            raise OSError(errno.ENOMEM, "Cannot allocate memory")
        return real(nbytes, device)

    monkeypatch.setattr(shared_region, "_create_region", tight)
    cpu = shared_region.torch.device("cpu")
    regions = shared_check.CheckRegions(cpu)
    stale, _, fds = real(4096, cpu)
    for fd in fds:
        os.close(fd)
    regions.regions["member0:candidate:1"] = (stale, 4096)
    _, fds = regions.write("member0:candidate:2", "member0:", [], 1, [], {})
    for fd in fds:
        os.close(fd)
    assert len(calls) == 2 and "member0:candidate:1" not in regions.regions  # freed, retried
    with pytest.raises(shared_region.RegionOOM, match=r"of 2097152 bytes on cpu"):
        shared_region.create_region(2 << 20, cpu)
