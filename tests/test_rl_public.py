"""The public surface trainers import from stays put: `core.rl`'s names are pinned here, so a
module moved inside core/rl cannot break a trainer's script silently; and the paths earlier
releases' docs taught (`core.env`, `core.rewards`, `core.adapters.*`) still import, with a
DeprecationWarning that names the new home."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import core.rl

# Change this list only together with docs/rl.md, and never by removing a name without a
# release of deprecation first.
PUBLIC = [
    "Arena",
    "EpisodeError",
    "EvalRequest",
    "ExecutorFactory",
    "GroupGather",
    "KernelEnv",
    "LADDER",
    "OUTCOMES",
    "Observation",
    "RewardFn",
    "RewardedResult",
    "UnknownReward",
    "aevaluate",
    "aevaluate_many",
    "check_source",
    "evaluate",
    "evaluate_many",
    "get_reward",
    "outcome",
    "public_result",
    "register_reward",
    "reward_names",
]


def test_core_rl_exports_exactly_the_pinned_names_and_each_resolves() -> None:
    assert sorted(core.rl.__all__) == PUBLIC
    for name in PUBLIC:
        assert getattr(core.rl, name) is not None, name
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        core.rl.nope  # noqa: B018


def test_the_taught_import_works_without_a_warning_and_without_importing_the_arena_early() -> None:
    script = (
        "import sys, warnings; warnings.simplefilter('error')\n"
        "import core.rl.rewards\n"
        "assert 'core.rl.session' not in sys.modules, 'core.rl must load its names lazily'\n"
        "from core.rl import evaluate, evaluate_many, EvalRequest, Arena, KernelEnv\n"
        "assert Arena.__module__ == 'core.rl.session' and KernelEnv.__module__ == 'core.rl.env'\n"
    )
    subprocess.run([sys.executable, "-c", script], check=True)


@pytest.mark.parametrize(
    ("old", "new", "name"),
    [
        ("core.env", "core.rl.env", "KernelEnv"),
        ("core.rewards", "core.rl.rewards", "get_reward"),
        ("core.adapters.trl", "core.rl.adapters.trl", "kernel_reward"),
        ("core.adapters.verl", "core.rl.adapters.verl", "compute_score"),
        ("core.adapters.gym_env", "core.rl.adapters.gym_env", "make_env"),
        ("core.adapters.verifiers_env", "core.rl.adapters.verifiers_env", "load_environment"),
        ("core.adapters.serve_client", "core.rl.adapters.serve_client", "ArenaClient"),
        ("core.adapters.dataset", "core.rl.adapters.dataset", "rows"),
    ],
)
def test_moved_modules_still_import_with_a_deprecation_warning(
    old: str, new: str, name: str
) -> None:
    sys.modules.pop(old, None)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        module = importlib.import_module(old)
    assert any(
        issubclass(w.category, DeprecationWarning) and f"moved to {new}" in str(w.message)
        for w in seen
    ), [str(w.message) for w in seen]
    assert getattr(module, name) is getattr(importlib.import_module(new), name)
    with pytest.raises(AttributeError, match=f"moved to {new}"):
        module.not_a_name  # noqa: B018


def test_no_install_command_or_hint_names_the_package_index_s_kernel_arena() -> None:
    """The package index's `kernel-arena` is another project: extras install from the checkout
    (`pip install -e ".[trl]"`), and nothing in the repository says otherwise."""
    root = Path(__file__).resolve().parents[1]
    files = [root / "README.md", root / ".ci" / "run", root / "pyproject.toml"]
    for folder in ("docs", "core", "arena_tui", "remotes", "bench"):
        files += [p for p in (root / folder).rglob("*") if p.suffix in (".md", ".py", ".sh")]
    # `kernel-arena[...]`, or kernel-arena as a package argument of a pip command
    bad = re.compile(
        r"kernel-arena\[|pip3? install [^`\n]*?(?<!the )(?<![\w/.-])kernel-arena(?![\w/.-])(?! checkout)"
    )
    offenders = [
        f"{p.relative_to(root)}: {m.group(0)}"
        for p in files
        for m in bad.finditer(p.read_text(errors="replace"))
    ]
    assert not offenders, offenders
