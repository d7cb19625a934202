"""Triton's cache kept apart per role (core/harness/jit_cache.py): a candidate caches in its
own folder, seeded by the harness with what it may share (the driver's utilities, and an
identical earlier source's kernels); the trusted worker caches in its own memory, so nothing
on disk reaches it."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from core.evaluation.evaluator import Evaluator
from core.evaluation.job import Timing
from core.harness import jit_cache
from core.tasks.spec import load_task

FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture
def triton_dir(tmp_path: Path, monkeypatch) -> Path:
    """A cache folder as Triton's own FileCacheManager writes it."""
    from triton.runtime.cache import FileCacheManager

    folder = tmp_path / "first" / jit_cache.CANDIDATE_DIR
    monkeypatch.setenv("TRITON_CACHE_DIR", str(folder))
    kernel = FileCacheManager("KERNELKEY")
    group = {
        "k.json": kernel.put(json.dumps({"name": "k"}), "k.json", binary=False),
        "k.cubin": kernel.put(b"\x7fELF cubin", "k.cubin"),
    }
    kernel.put_group("k.json", group)
    FileCacheManager("UTILSKEY").put(b"\x7fELF utils", "cuda_utils.cpython-312.so")
    return folder


def test_an_identical_source_is_seeded_with_the_first_ones_kernels(triton_dir: Path, tmp_path):
    from triton.runtime.cache import FileCacheManager

    store = jit_cache.JitStore()
    store.harvest(triton_dir.parent, "same")
    assert store.has("same") and not store.has("other")
    copy, other = tmp_path / "copy", tmp_path / "other"
    assert store.seed(copy, "same") == 4  # both files, their group, the utilities
    assert store.seed(other, "other") == 0  # another source gets nothing of it
    # Triton finds the kernel in the copy's own folder, its group pointing there.
    group = FileCacheManager.__new__(FileCacheManager)
    group.cache_dir = str(jit_cache.candidate_dir(copy) / "KERNELKEY")
    found = group.get_group("k.json")
    assert found is not None and set(found) == {"k.json", "k.cubin"}
    assert all(p.startswith(str(copy)) for p in found.values())
    assert Path(found["k.cubin"]).read_bytes() == b"\x7fELF cubin"


def test_only_the_driver_utilities_of_the_trusted_worker_reach_a_candidate(tmp_path):
    store = jit_cache.JitStore()
    store.add_trusted(
        {"UTILSKEY/cuda_utils.cpython-312.so": b"utils", "BASEKEY/liger.cubin": b"baseline"}
    )
    store.add_trusted({"../../etc/passwd": b"x"})  # not a cache entry's name: dropped
    assert store.seed(tmp_path / "c", None) == 1
    assert [p.name for p in jit_cache.candidate_dir(tmp_path / "c").rglob("*") if p.is_file()] == [
        "cuda_utils.cpython-312.so"
    ]


def test_unsandboxed_as_root_the_seeded_folder_is_the_candidates_own(tmp_path, monkeypatch):
    """Run by root without a sandbox, a candidate's worker drops to ARENA_CANDIDATE_UID: the
    parent must hand it its Triton folder, or Triton cannot write a kernel there (a
    PermissionError in the candidate's first compile; found on the H100, 2026-12-06)."""
    from core.harness import candidate_owner

    store = jit_cache.JitStore()
    store.add_trusted({"UTILSKEY/cuda_utils.cpython-312.so": b"utils"})
    owners: dict[str, int] = {}
    monkeypatch.setattr(candidate_owner.os, "geteuid", lambda: 0)
    monkeypatch.setattr(
        candidate_owner.os, "chown", lambda p, uid, gid, **kw: owners.__setitem__(str(p), uid)
    )
    monkeypatch.setenv(candidate_owner.CANDIDATE_UID_ENV, "65534")
    store.seed(tmp_path / "c", None)
    folder = jit_cache.candidate_dir(tmp_path / "c")
    assert owners == {
        str(folder): 65534,
        str(folder / "UTILSKEY"): 65534,
        str(folder / "UTILSKEY" / "cuda_utils.cpython-312.so"): 65534,
    }
    owners.clear()
    monkeypatch.delenv(candidate_owner.CANDIDATE_UID_ENV)  # sandboxed: nothing to hand over
    store.seed(tmp_path / "d", None)
    assert owners == {}


def test_the_trusted_cache_answers_from_memory_never_from_disk(tmp_path: Path) -> None:
    from triton import knobs

    saved = knobs.cache.manager_class
    try:
        assert jit_cache.TrustedCache.install({}, str(tmp_path))
        cache = jit_cache.TrustedCache("KEY")
        path = cache.put(b"good cubin", "k.cubin")
        meta = cache.put('{"name": "k"}', "k.json")
        cache.put_group("k.json", {"k.cubin": path, "k.json": meta})
        Path(path).write_bytes(b"planted")  # what a same-uid process could do on disk
        group = jit_cache.TrustedCache("KEY").get_group("k.json")
        assert group is not None and Path(group["k.cubin"]).read_bytes() == b"good cubin"
        assert jit_cache.TrustedCache("OTHER").get_file("k.cubin") is None
        assert set(jit_cache.TrustedCache.fresh) == {
            "KEY/k.cubin",
            "KEY/k.json",
            "KEY/__grp__k.json",
        }
        # What goes back to the parent, and what the parent accepts of it.
        reply, payload = jit_cache.pack(jit_cache.TrustedCache.fresh)
        assert jit_cache.unpack(reply, payload) == jit_cache.TrustedCache.fresh
        assert jit_cache.unpack({**reply, "sizes": [1, 2, 3]}, payload) == {}
    finally:
        knobs.cache.manager_class = saved


CACHE_DIR_PROBE = """
import os
import torch
print("TRITON_CACHE_DIR=" + os.environ.get("TRITON_CACHE_DIR", ""))

def run(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return 2 * x + b
"""


def test_a_candidate_caches_in_its_own_evaluation_folder(tmp_path: Path) -> None:
    axpy = load_task(FIXTURES / "tasks" / "elementwise" / "axpy")
    (tmp_path / "probe.py").write_text(CACHE_DIR_PROBE)
    fast = Timing(alternations=2, budget_ms=20.0, min_calls=1, max_calls=5)
    with Evaluator("cpu", timing=fast) as ev:
        result = asyncio.run(
            ev.aevaluate(axpy, tmp_path / "probe.py", seed=1, visible_only=True, performance=False)
        )
    assert result.status == "passed"
    line = next(x for x in result.stage("compile").log.splitlines() if "TRITON_CACHE_DIR=" in x)
    folder = Path(line.split("=", 1)[1])
    assert folder.name == jit_cache.CANDIDATE_DIR and ".triton" not in str(folder)


def _compile_for_h100():
    """One real Triton compile, for a GPU target, on this CPU machine (as the sim device's
    ahead-of-time compile does): Triton's own use of the cache manager, groups included."""
    import triton
    import triton.language as tl
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from triton.runtime.jit import JITFunction

    def double(x_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)

    # a JIT function for the GPU even where an earlier test of this process routed
    # @triton.jit to the CPU interpreter (core/harness/triton_cpu.py)
    double = JITFunction(double)
    signature = {"x_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"}
    src = ASTSource(fn=double, signature=signature, constexprs={"BLOCK": 128})
    return triton.compile(src, target=GPUTarget("cuda", 90, 32))


def test_triton_compiles_into_and_loads_from_each_roles_cache(tmp_path: Path, monkeypatch):
    from triton import knobs

    # A candidate: compiled into its folder; an identical copy, seeded, loads it.
    monkeypatch.setenv("TRITON_CACHE_DIR", str(jit_cache.candidate_dir(tmp_path / "first")))
    first = _compile_for_h100()
    store = jit_cache.JitStore()
    store.harvest(tmp_path / "first", "same")
    store.seed(tmp_path / "copy", "same")
    monkeypatch.setenv("TRITON_CACHE_DIR", str(jit_cache.candidate_dir(tmp_path / "copy")))
    hits = []
    monkeypatch.setattr(knobs.compilation, "listener", lambda **kw: hits.append(kw["cache_hit"]))
    assert _compile_for_h100().asm["cubin"] == first.asm["cubin"] and hits == [True]
    # The trusted worker: compiled into memory, a later one (inheriting it) loads it.
    saved = knobs.cache.manager_class
    try:
        jit_cache.TrustedCache.install({}, str(tmp_path / "trusted"))
        _compile_for_h100()
        compiled = dict(jit_cache.TrustedCache.fresh)
        assert {n.split("/")[1] for n in compiled} >= {"double.cubin", "double.json"}
        jit_cache.TrustedCache.install(compiled, str(tmp_path / "trusted"))
        assert _compile_for_h100().asm["cubin"] == first.asm["cubin"] and hits[-1] is True
        assert jit_cache.TrustedCache.fresh == {}  # nothing new: loaded from memory
    finally:
        knobs.cache.manager_class = saved
