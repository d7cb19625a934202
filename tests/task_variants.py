"""Variants of the axpy fixture task (tests/fixtures/tasks/elementwise/axpy), each its files
with a few edits, written out when a test first asks for one. One starter, baseline and
reference serve every variant; they were seven copies of the same files.

    variant_dir("bad_formula")       # <root>/elementwise/bad_formula, a loadable task folder
    variants_root("a", "b")          # <root>, holding at least a and b: a --tasks-dir

An edit names text that must be in the fixture: when the fixture changes under a variant, the
variant fails loudly instead of silently testing something else."""

from __future__ import annotations

import atexit
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

AXPY = Path(__file__).resolve().parent / "fixtures" / "tasks" / "elementwise" / "axpy"
FAMILY = "elementwise"


@dataclass(frozen=True)
class Variant:
    why: str  # the first line of its task.yaml, replacing the fixture's
    edits: tuple[tuple[str, str, str], ...] = ()  # (file, text in the fixture, its replacement)
    files: dict[str, str] = field(default_factory=dict)  # files written whole


VARIANTS: dict[str, Variant] = {
    # tests/test_validate.py: each broken in one way that `arena tasks validate` must catch
    "bad_formula": Variant(
        "Broken on purpose (tests/test_validate.py): flops is not positive where D <= 128.",
        (("task.yaml", "flops: 2 * N * D", "flops: 2 * N * (D - 128)"),),
    ),
    "loose_tolerance": Variant(
        "Broken on purpose (tests/test_validate.py): atol 100 lets an all-zeros output pass.",
        (("task.yaml", "correctness: {atol: 1.0e-5,", "correctness: {atol: 100.0,"),),
    ),
    "pow2_hidden": Variant(
        "Broken on purpose (tests/test_validate.py): the CPU hidden set holds only powers of two.",
        (
            (
                "task.yaml",
                "        - {N: 33, D: 100}\n      draw: {count: 1, ranges: {N: [1, 200]}}\nlimits",
                "        - {N: 32, D: 64}\nlimits",
            ),
        ),
    ),
    "wrong_baseline": Variant(
        "Broken on purpose (tests/test_validate.py): the baseline computes 3x + b.",
        (("baseline.py", "torch.add(b, x, alpha=2)", "torch.add(b, x, alpha=3)"),),
    ),
    "ignores_input": Variant(
        "Broken on purpose (tests/test_validate.py): the reference ignores input b.",
        (
            ("baseline.py", "return torch.add(b, x, alpha=2)", "return 2 * x"),
            (
                "reference.py",
                "return 2 * x.double() + b.double()",
                "return 2 * x.double()  # b is ignored: the validator must notice",
            ),
        ),
        {
            "starter.py": "import torch\n\n\ndef run(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:\n    return 2 * x\n"
        },
    ),
    # tests/cheats/catalogue.py
    "axpy_loose": Variant(
        "The axpy fixture with a tolerance so loose (atol 20, above every output) that a constant\n"
        "# passes it: for the cheat suite, which shows that a constant output is still caught.",
        (("task.yaml", "correctness: {atol: 1.0e-5,", "correctness: {atol: 20.0,"),),
    ),
    # tests/test_shared_check.py: inputs that cannot travel through shared memory
    "axpy_strided_inputs": Variant(
        "The axpy fixture whose inputs.py gives x as a transposed (non-contiguous) view: its\n"
        "# correctness runs keep the old path (inputs drawn in the candidate's process).",
        files={
            "inputs.py": (
                "import torch\n\n\n"
                "def make_inputs(axes, generator):\n"
                "    N, D, dev = axes['N'], axes['D'], generator.device\n"
                "    x = torch.empty(D, N, device=dev).normal_(generator=generator).t()\n"
                "    b = torch.empty(N, D, device=dev).uniform_(-1, 1, generator=generator)\n"
                "    return [x, b]\n"
            )
        },
    ),
    "axpy_gpu": Variant(
        "The axpy fixture at GPU sizes, for tests/gpu/run_cheats.py: the first workload is large\n"
        "# enough to be timed with events (its roofline, 400 MB at 4.8 TB/s, is about 84 µs, above the\n"
        "# 50 µs below which workloads are timed as CUDA graph replays), the second is timed as graph\n"
        "# replays, so both timing paths meet the cheats.",
        (
            (
                "task.yaml",
                "description: y = 2 * x + b, elementwise, float32.",
                "description: y = 2 * x + b, elementwise, float32 (GPU sizes).",
            ),
            (
                "task.yaml",
                "  visible:\n    - {N: 64, D: 128}\n    - {N: 16, D: 256}\n  hidden:\n    fixed:\n      - {N: 33, D: 100}",
                "  visible:\n    - {N: 4096, D: 8192}\n    - {N: 64, D: 128}\n  hidden:\n    fixed:\n      - {N: 3001, D: 8192}",
            ),
            (
                "task.yaml",
                "limits: {compile_s: 60, correctness_s: 60, performance_s: 60}",
                "limits: {compile_s: 120, correctness_s: 120, performance_s: 300}",
            ),
        ),
    ),
}

_root: Path | None = None


def _variants_folder() -> Path:
    """One folder a process, removed when it exits (tests and the GPU scripts share it)."""
    global _root
    if _root is None:
        _root = Path(tempfile.mkdtemp(prefix="arena-task-variants-"))
        atexit.register(shutil.rmtree, _root, True)
    return _root


def write_variant(name: str, root: Path) -> Path:
    """Write variant `name` as root/elementwise/<name> and return that folder."""
    variant = VARIANTS[name]
    folder = root / FAMILY / name
    shutil.copytree(AXPY, folder, ignore=shutil.ignore_patterns("__pycache__"))
    yaml_path = folder / "task.yaml"
    first, rest = yaml_path.read_text().split("\n", 1)
    assert first.startswith("# "), f"{yaml_path}: the fixture's first line is its comment"
    yaml_path.write_text(f"# {variant.why}\n{rest}")
    for file, old, new in variant.edits:
        path = folder / file
        text = path.read_text()
        if old not in text:
            raise AssertionError(
                f"variant {name}: {AXPY / file} no longer contains {old!r}; update tests/task_variants.py"
            )
        path.write_text(text.replace(old, new, 1))
    for file, text in variant.files.items():
        (folder / file).write_text(text)
    return folder


def variant_dir(name: str) -> Path:
    """Variant `name`'s task folder, written once a process."""
    folder = _variants_folder() / FAMILY / name
    if not folder.is_dir():
        write_variant(name, _variants_folder())
    return folder


def variants_root(*names: str) -> Path:
    """A tasks folder holding (at least) these variants."""
    for name in names:
        variant_dir(name)
    return _variants_folder()
