"""The task's libraries preloaded into the harness (core/harness/preload.py): the modules a
task's baseline imports are imported once, into the zygote and then the parent, before workers
are forked; a library whose import starts a thread (or initialises CUDA) is refused and the
zygote it was imported into is replaced."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from core.harness.preload import Preloader, task_libraries
from core.harness.zygote import Zygote

ROOT = Path(__file__).resolve().parent.parent

BASELINE = """
import math
import torch
import torch.nn.functional as F
try:
    from arena_quiet_lib.ops import fast as _fast
except Exception:
    _fast = None
if _fast is None:
    import arena_noisy_lib
from . import sibling
def run(x):
    import arena_late_lib  # inside a function: imported when called, not preloaded
    return x
"""


def _job(baseline: str) -> dict:
    return {"task_id": "t/x", "task_sources": {"baseline.py": baseline}, "task_files": {}}


def test_the_libraries_are_those_the_baseline_imports_at_its_top_level() -> None:
    assert task_libraries(_job(BASELINE)) == ["arena_quiet_lib.ops", "arena_noisy_lib"]
    assert task_libraries(_job("def run(x):\n    return x\n")) == []
    assert task_libraries(_job("this is not python(")) == []


@pytest.fixture
def libraries(tmp_path: Path, monkeypatch):
    """Two importable libraries: one quiet, one that starts a thread when imported."""
    (tmp_path / "arena_quiet_lib").mkdir()
    (tmp_path / "arena_quiet_lib" / "__init__.py").write_text("")
    (tmp_path / "arena_quiet_lib" / "ops.py").write_text("def fast(x):\n    return x\n")
    (tmp_path / "arena_noisy_lib.py").write_text(
        "import threading, time\nthreading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield
    for name in ("arena_quiet_lib", "arena_quiet_lib.ops", "arena_noisy_lib"):
        sys.modules.pop(name, None)


def test_a_quiet_library_is_loaded_in_every_worker_after_it(libraries) -> None:
    zygote = Zygote()
    try:
        preloader = Preloader()
        same = preloader.prepare(_job("import arena_quiet_lib.ops\n"), zygote)
        assert same is zygote and zygote.alive()
        assert "arena_quiet_lib.ops" in sys.modules  # the parent's: its trusted workers have it
        assert preloader.prepare(_job("import arena_quiet_lib.ops\n"), zygote) is zygote
    finally:
        zygote.close()


def test_a_library_that_starts_a_thread_is_refused_and_its_zygote_replaced(libraries) -> None:
    zygote = Zygote()
    fresh = None
    try:
        preloader = Preloader()
        fresh = preloader.prepare(_job("import arena_noisy_lib\n"), zygote)
        assert fresh is not zygote and fresh.alive() and not zygote.alive()
        assert "arena_noisy_lib" not in sys.modules  # never imported by the parent
        assert preloader.refused == {"arena_noisy_lib"}
        # Once refused, never tried again.
        assert preloader.prepare(_job("import arena_noisy_lib\n"), fresh) is fresh
    finally:
        for z in (zygote, fresh):
            if z is not None:
                z.close()


def test_a_cuda_driver_initialised_without_torch_knowing_is_unsafe(monkeypatch) -> None:
    """`torch.cuda.is_available()` at import initialises the driver (cudaGetDeviceCount) but not
    torch's own flag: the check asks the driver itself where libcuda is loaded."""
    import ctypes

    from core.harness import preload

    class Driver:
        def __init__(self, answer: int):
            self.answer = answer

        def cuDeviceGetCount(self, _count) -> int:  # the driver's name
            return self.answer

        def nvmlShutdown(self) -> int:  # NVML's, asked first: never initialised here
            return 1

    monkeypatch.setattr(ctypes, "CDLL", lambda *a, **k: Driver(0))
    assert preload.cuda_driver_initialised()
    assert preload.import_here([])["unsafe"] == "importing it initialised CUDA"
    monkeypatch.setattr(ctypes, "CDLL", lambda *a, **k: Driver(preload.CUDA_ERROR_NOT_INITIALIZED))
    assert not preload.cuda_driver_initialised()

    def not_loaded(*_a, **_k):
        raise OSError("libcuda.so.1: cannot open shared object file")

    monkeypatch.setattr(ctypes, "CDLL", not_loaded)
    assert not preload.cuda_driver_initialised() and preload.import_here([])["unsafe"] is None


FAKE_NVML = r"""
static int initialised = 0;
int nvmlInit(void) { initialised++; return 0; }
int nvmlShutdown(void) { if (!initialised) return 1; initialised--; return 0; }
int fake_nvml_initialised(void) { return initialised; }
"""


def test_an_import_that_started_nvml_leaves_it_shut_down_for_the_forks(tmp_path) -> None:
    """torch's NVML-based availability check (what Liger asks at import) initialises NVML and
    never shuts it down; forked workers closed its descriptors and later found no GPU. After a
    preload NVML is shut down as many times as it was initialised, so each fork starts it anew."""
    import shutil
    import subprocess
    import sys

    if shutil.which("gcc") is None:
        pytest.skip("needs gcc to build a stand-in libnvidia-ml")
    (tmp_path / "nvml.c").write_text(FAKE_NVML)
    lib = tmp_path / "libnvidia-ml.so.1"
    subprocess.run(
        [
            "gcc",
            "-shared",
            "-fPIC",
            "-Wl,-soname,libnvidia-ml.so.1",
            "-o",
            str(lib),
            str(tmp_path / "nvml.c"),
        ],
        check=True,
    )
    script = f"""
import ctypes, sys
sys.path.insert(0, {str(ROOT)!r})
nvml = ctypes.CDLL({str(lib)!r})
for _ in range(3):
    nvml.nvmlInit()  # torch.cuda.is_available() three times, as an import may ask
from core.harness import preload
print(preload.release_nvml(), nvml.fake_nvml_initialised(), preload.release_nvml())
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["3", "0", "0"]
