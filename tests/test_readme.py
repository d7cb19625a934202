"""The README's commands run verbatim on a fresh clone: every `arena …` line of its "Use" block is
either run here (the cheap ones that need no GPU) or listed below with the reason it is not, so a
new README line fails this test until someone decides which. The README's counts match the
program."""

from __future__ import annotations

import re
import shlex
import shutil

import pytest

from arena_tui.cli import main
from core.tasks.discovery import discover
from tests.conftest import ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")

# What is not run here, and why (each is tested elsewhere or needs what CI does not have).
NOT_RUN = {
    "arena eval --task gemm/bf16_gemm --candidate solution.py": "a harness evaluation, 30 s on 2 cores: tests/test_cli.py runs `arena eval` on a fixture task",
    "arena eval --task gemm/bf16_gemm --candidate solution.py --device sim:h200": "a harness evaluation: tests/test_sim_eval.py",
    "arena eval --task gemm/bf16_gemm --candidate solution.py --device cuda:0 --json": "needs a GPU (without one: exit 2, tests/test_cli.py)",
    "arena eval --task comm/all_reduce --candidate tasks/comm/all_reduce/starter.py --world-size 4": "4 CPU ranks, 25 s: tests/test_ranked.py evaluates a multi-rank fixture task",
    "arena devices": "probes this machine: tests/test_cli_render.py",
    "arena demo --all": "every task, about 10 minutes",
    "arena demo --task gemm/bf16_gemm": "a harness evaluation on sim:h200: tests/test_cli.py runs demo --task's path",
    "arena compare solution.py tasks/gemm/bf16_gemm/starter.py --task gemm/bf16_gemm": "two evaluations on sim:h200: tests/test_compare.py compares two files end to end on a fixture task",
    "arena run": "the default run, 20 s on sim:h200: tests/test_app.py and tests/test_agent_runs.py",
    "arena run runs/agents.yaml": "needs agent CLIs and their API keys",
    "arena run runs/example.yaml": "many evaluations, minutes",
    "arena run --resume r-20261129-1c4b": "an example id: no such run on a fresh clone (exit 2)",
    "arena runs show RUN": "RUN is a placeholder: tests/test_runs.py",
    "arena runs export RUN -o run.jsonl": "RUN is a placeholder: tests/test_runs.py",
    "arena runs transcript RUN/1": "RUN is a placeholder: tests/test_agent_runs.py",
    "arena compare RUN_A RUN_B": "placeholders: tests/test_compare.py",
    "arena hosts check": "needs a hosts file and SSH hosts: tests/test_remotes_sshd.py",
    "arena tasks validate": "every task, minutes: tests/test_validate.py",
    "arena serve": "a server that runs until stopped: tests/test_serve.py",
    "arena serve --leaderboard-only": "a server that runs until stopped: tests/test_web.py drives its page in Chromium",
    "arena eval --task gemm/bf16_gemm --candidate solution.py --device cuda:0 --profile train": "needs a GPU (profiles: tests/test_batch.py)",
    "arena devices --ray auto": "needs a Ray cluster: tests/test_ray.py starts one",
    "arena import kernelbench ~/KernelBench --out kb-tasks": "needs a KernelBench checkout: tests/test_import_kernelbench.py imports a fixture in its format",
    "arena import agentkernelarena ~/AgentKernelArena --out aka-tasks": "needs an AgentKernelArena checkout: tests/test_import_agentkernelarena.py imports a fixture",
    "arena dataset export --format trl --out kernels.jsonl": "writes into the working folder: tests/test_trainer_adapters.py exports both formats",
}


# Run end to end in a package root of their own (they write into the bundled tasks folder):
# test_the_readme_scaffold_validates_where_it_is_written.
SCAFFOLD = ("arena tasks new moe/my_kernel", "arena tasks validate moe/my_kernel")


def use_commands() -> list[str]:
    block = README.split("## Use", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    found = []
    for line in block.splitlines():
        line = line.split("  #", 1)[0].strip()
        found += [
            part.strip()
            for part in line.split(";")
            if part.strip() and not part.strip().startswith("#")
        ]
    return found


def test_every_readme_command_is_run_or_has_a_reason_not_to_be():
    commands = use_commands()
    assert len(commands) > 20
    unknown = [
        c
        for c in commands
        if c not in NOT_RUN
        and not c.startswith(
            ("arena tasks", "arena runs list", "arena leaderboard", "arena --version", "cp ")
        )
    ]
    assert not unknown, (
        f"new README commands: run them in test_the_cheap_readme_commands_run_verbatim or say why not in NOT_RUN: {unknown}"
    )
    assert not set(NOT_RUN) - set(commands), "NOT_RUN names commands the README no longer has"


def test_the_cheap_readme_commands_run_verbatim(tmp_path, monkeypatch, capsys):
    """In a folder like a fresh clone's (its tasks/ and tests/fixtures/), from the README's text."""
    (tmp_path / "tasks").symlink_to(ROOT / "tasks")
    (tmp_path / "tests").symlink_to(ROOT / "tests")
    monkeypatch.chdir(tmp_path)
    ran = 0
    for command in use_commands():
        if command in NOT_RUN or command in SCAFFOLD:
            continue
        argv = shlex.split(command)
        if argv[0] == "cp":
            (tmp_path / argv[2]).write_bytes((tmp_path / argv[1]).read_bytes())
        elif argv[1:] == ["--version"]:
            with pytest.raises(SystemExit) as done:
                main(argv[1:])
            assert done.value.code == 0
        else:
            assert main(argv[1:]) == 0, command
        ran += 1
    assert ran >= 6 and (tmp_path / "solution.py").is_file()
    capsys.readouterr()


def test_the_readme_scaffold_validates_where_it_is_written(tmp_path, monkeypatch, capsys):
    """`arena tasks new` then `arena tasks validate`, verbatim from the README, in a package root
    like a checkout's (the bundled tasks, the engine's data and its manifest): the new folder is
    the user's own task, not a bundled file that no longer matches, and it validates."""
    from core.tasks import discovery, manifest

    root = tmp_path / "pkg"
    skip = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(ROOT / "tasks", root / "tasks", ignore=skip)
    shutil.copytree(ROOT / "core" / "data", root / "core" / "data", ignore=skip)
    monkeypatch.setattr(manifest, "PACKAGE_ROOT", root)
    monkeypatch.setattr(manifest, "TASKS_DIR", root / "tasks")
    monkeypatch.setattr(manifest, "DATA_DIR", root / "core" / "data")
    monkeypatch.setattr(manifest, "MANIFEST", root / "core" / "data" / "manifest.json")
    monkeypatch.setattr(discovery, "bundled_tasks_root", lambda: root / "tasks")
    monkeypatch.delenv("ARENA_TASKS", raising=False)
    monkeypatch.chdir(tmp_path)
    commands = [c for c in use_commands() if c in SCAFFOLD]
    assert commands == list(SCAFFOLD), "the README's scaffold example changed: update SCAFFOLD"
    for command in commands:
        assert main(shlex.split(command)[1:]) == 0, (command, capsys.readouterr())
    out = capsys.readouterr().out
    assert (root / "tasks" / "moe" / "my_kernel" / "task.yaml").is_file()
    from core.evaluation.validate_report import CHECK_NAMES

    assert f"{len(CHECK_NAMES)} checks passed" in out, out  # the harness's ones and the budget too
    assert manifest.differences() == []  # a user's task: the shipped files still all match


def test_the_readme_counts_match_the_program():
    from core.tasks.manifest import shipped_task_ids

    tasks = discover()
    (count,) = re.findall(r"the catalogue: (\d+) tasks", README)
    assert int(count) == len(shipped_task_ids())  # a task of the user's own is no bundled one
    assert {t.id for t in tasks} >= set(shipped_task_ids())
    assert (
        "`sim:h200`" in README or "sim:h200" in README.split("## Use")[0]
    )  # the first command's device without a GPU
