"""verl as it is (0.9.x), installed without its GPU stack: docs/rl-verl.md's command composed with
verl's own Hydra config, and verl's own reward-loop workers scoring a GRPO group through one
`arena serve`, which evaluates the group as one batch however the samples were spread over the
workers. Under CI=true these must run (.ci/run installs verl); elsewhere they skip without it.
About 30 s, most of it one `sim:h200` batch."""

from __future__ import annotations

import asyncio
import os
import re
import shlex
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from core.rl.adapters import verl as adapter
from core.rl.adapters.dataset import rows
from core.rl.arena import Arena
from core.tasks.discovery import find_task
from tests.candidates import AXPY
from tests.tiny_models import trained_tokenizer

ROOT = Path(__file__).resolve().parents[1]
FIXTURE_TASKS = Path(__file__).resolve().parent / "fixtures" / "tasks"
RIGHT = f"Here it is:\n```python\n{AXPY}```"
WRONG = "```python\nimport torch\n\ndef run(x, b):\n    return x + b\n```"
PROSE = "I would fuse the two loads into one kernel."


def _verl():
    try:
        import verl
        from hydra import compose, initialize_config_dir
    except ImportError as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI installs verl (.ci/run): the reward loop must be tested there ({exc})")
        pytest.skip(f"verl is not installed ({exc}): pip install -e '.[verl]'")
    return verl, compose, initialize_config_dir


def documented_command() -> tuple[dict[str, str], list[str]]:
    """docs/rl-verl.md's environment (`export ...`) and main_ppo overrides, as written there."""
    text = (ROOT / "docs" / "rl-verl.md").read_text()
    block = re.search(r"```bash\n(.*?)```", text, re.DOTALL)
    assert block, "docs/rl-verl.md has its command block"
    lines = block.group(1).replace("\\\n", " ").splitlines()
    env = {
        k: v
        for line in lines
        if line.startswith("export ")
        for k, v in (w.split("=", 1) for w in shlex.split(line.split("#")[0])[1:])
    }
    main = next(line for line in lines if "verl.trainer.main_ppo" in line)
    overrides = [w for w in shlex.split(main) if "=" in w]
    return env, overrides


def compose_documented(tmp_path: Path, tokenizer) -> object:
    verl, compose, initialize_config_dir = _verl()
    _, overrides = documented_command()
    tokenizer.save_pretrained(
        tmp_path / "model"
    )  # the model's path is where verl reads its tokenizer
    overrides = [
        f"actor_rollout_ref.model.path={tmp_path / 'model'}"
        if o.startswith("actor_rollout_ref.model.path=")
        else o
        for o in overrides
    ]
    config_dir = Path(verl.__file__).parent / "trainer" / "config"
    with initialize_config_dir(config_dir=str(config_dir), version_base=None):
        return compose("ppo_trainer", overrides=overrides)


def test_the_documented_command_composes_with_verl_s_own_config(tmp_path):
    env, overrides = documented_command()
    assert env["ARENA_GROUP_SIZE"] == next(
        o.split("=")[1] for o in overrides if o.startswith("actor_rollout_ref.rollout.n=")
    ), "the group size is the rollout's n"
    _verl()  # skips here (fails under CI) without verl, before the tokenizer needs its stack
    config = compose_documented(tmp_path, trained_tokenizer(["a b c"]))
    reward = config.reward  # the live keys, which verl 0.9's reward loop reads
    assert reward.custom_reward_function.path == "pkg://core.rl.adapters.verl"
    assert reward.custom_reward_function.name == "compute_score"
    assert reward.reward_manager.name == "naive" and config.trainer.use_v1
    from verl.trainer.ppo.reward import get_custom_reward_fn

    fn = get_custom_reward_fn(config)  # verl's own loader: pkg:// imports this package's module
    import inspect

    assert inspect.iscoroutinefunction(fn), "a coroutine: the reward loop awaits it in its loop"


def _sample(tokenizer, data_row: dict, reply: str):
    """One generated sample as verl's agent loop hands it to a reward worker (agent_loop.py,
    `_compute_score`): token tensors and the dataset row's fields."""
    import numpy as np
    import torch
    from verl import DataProto

    prompt = tokenizer(data_row["prompt"][0]["content"][:200])["input_ids"]
    response = tokenizer(reply)["input_ids"]
    ids = torch.tensor([prompt + response])
    batch = {
        "prompts": torch.tensor([prompt]),
        "responses": torch.tensor([response]),
        "input_ids": ids,
        "attention_mask": torch.ones_like(ids),
    }
    fields = {k: np.array([data_row[k]], dtype=object) for k in ("data_source", "reward_model")}
    fields["extra_info"] = np.array([dict(data_row["extra_info"])], dtype=object)
    return DataProto.from_dict(tensors=batch, non_tensors=fields)


class _Serve:
    """`arena serve` on sim:h200 over the fixture tasks, on its own loop in a thread."""

    def __init__(self):
        from arena_tui.serve_cmd import RLServer

        self.loop = asyncio.new_event_loop()
        self.arena = Arena(["sim:h200"], tasks_dir=FIXTURE_TASKS)
        self.server = RLServer(self.arena, port=0, tasks_dir=FIXTURE_TASKS)
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        _, port = asyncio.run_coroutine_threadsafe(self.server.start(), self.loop).result(30)
        self.url = f"http://127.0.0.1:{port}"

    def close(self):
        async def stop():
            await self.server.aclose(5)
            await self.arena.aclose()

        asyncio.run_coroutine_threadsafe(stop(), self.loop).result(60)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


def test_verl_s_reward_workers_score_a_grpo_group_as_one_batch_of_one_server(tmp_path, monkeypatch):
    _verl()
    from verl.experimental.reward_loop.reward_loop import RewardLoopWorker

    task = find_task("elementwise/axpy", FIXTURE_TASKS)
    data_row = rows([task], "verl", device="sim:h200")[0]
    replies = [RIGHT, WRONG, PROSE, RIGHT]  # a group of 4: rollout.n = ARENA_GROUP_SIZE = 4
    tokenizer = trained_tokenizer([data_row["prompt"][0]["content"]], replies)
    config = compose_documented(tmp_path, tokenizer)
    serve = _Serve()
    try:
        monkeypatch.setenv("ARENA_SERVER", serve.url)
        monkeypatch.setenv("ARENA_GROUP_SIZE", "4")
        monkeypatch.setenv("ARENA_GROUP_WAIT_S", "120")
        adapter.reset()
        samples = [_sample(tokenizer, data_row, r) for r in replies]

        async def score():
            # Two of verl's workers, as the reward loop starts them (ray.remote(RewardLoopWorker),
            # made in the actor's event loop); the agent loop sends each sample to a worker at
            # random: here two to each.
            workers = [RewardLoopWorker(config), RewardLoopWorker(config)]
            return await asyncio.gather(
                *(w.compute_score(s) for w, s in zip(workers + workers, samples))
            )

        results = asyncio.run(score())
    finally:
        adapter.reset()
        serve.close()
    assert serve.server.rl._gather.batches == [4], "the group was one evaluation on one server"
    infos = [r["reward_extra_info"] for r in results]
    assert [i["outcome"] for i in infos] == ["correct", "incorrect", "no_code", "correct"]
    scores = [r["reward_score"] for r in results]
    assert scores[0] == scores[3] > 0 > scores[1] > scores[2] == -0.75
    assert {i["profile"] for i in infos} == {"train"} and infos[0]["gap_closed"] is not None
    assert "no ```python block" in infos[2]["reason"]


def test_a_second_process_reaching_for_a_locked_gpu_is_told_to_share_one_server(tmp_path):
    """Without ARENA_SERVER each reward worker's arena locks its GPU devices: another worker
    process of the same host gets an error naming the fix, never a second timer on the GPU."""
    env = {**os.environ, "XDG_RUNTIME_DIR": str(tmp_path)}
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from core.rl.adapters.verl import _lock_device as l; f = l('cuda:0');"
            " print('held', flush=True); sys.stdin.read()",
        ],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        second = subprocess.run(
            [
                sys.executable,
                "-c",
                "from core.rl.adapters.verl import _lock_device as l; l('cuda:0')",
            ],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        assert second.returncode != 0
        assert "another process already evaluates on cuda:0" in second.stderr
        assert "ARENA_SERVER" in second.stderr and "reward.num_workers=1" in second.stderr
    finally:
        holder.communicate("", timeout=30)


def test_without_a_server_a_worker_s_own_arena_gathers_its_group(monkeypatch):
    """No ARENA_SERVER: the worker process's arena (ARENA_DEVICES) scores the samples, a group's
    members again evaluated together. verl's managers await the coroutine in their own loop,
    while the arena lives in the scorer's: each call crosses over and back."""
    monkeypatch.delenv("ARENA_SERVER", raising=False)
    monkeypatch.setenv("ARENA_DEVICES", "cpu")
    monkeypatch.setenv("ARENA_TASKS", str(FIXTURE_TASKS))
    monkeypatch.setenv("ARENA_GROUP_SIZE", "2")
    adapter.reset()
    info = {"task_id": "elementwise/axpy", "index": 5}

    async def score():
        return await asyncio.gather(
            *(
                adapter.compute_score(
                    data_source="kernel_arena",
                    solution_str=reply,
                    ground_truth="elementwise/axpy",
                    extra_info=dict(info),
                )
                for reply in (RIGHT, WRONG)
            )
        )

    try:
        right, wrong = asyncio.run(score())
        gather = adapter.local_arena().gather
        assert gather is not None and gather.batches == [2]
    finally:
        adapter.reset()
    assert (right["outcome"], wrong["outcome"]) == ("correct", "incorrect")
    assert right["score"] > 0 > wrong["score"] == -0.25 and right["profile"] == "train"
