"""A real GRPO step: TRL's own `GRPOTrainer`, with the arena's reward function as it ships
(core/rl/adapters/trl.py), trains a tiny random model for two optimizer steps on `sim:h200` in the
`train` profile. Nothing comes from a hub: the model is built from a config and its tokenizer is
trained here, on the exported prompts. Its vocabulary holds two whole replies as single tokens
(a correct candidate and a wrong one) that generation is biased towards, so that each group
holds real candidates the arena scores differently and the step has an advantage to follow.

Under CI=true this must run (.ci/run installs TRL); elsewhere it skips without TRL. About 40 s."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from core.rl.adapters.dataset import rows
from core.rl.adapters.trl import kernel_reward
from core.tasks.discovery import find_task
from tests.candidates import AXPY
from tests.tiny_models import trained_tokenizer

FIXTURE_TASKS = Path(__file__).resolve().parent / "fixtures" / "tasks"
RIGHT = f"```python\n{AXPY}```"
WRONG = "```python\nimport torch\n\ndef run(x, b):\n    return x + b\n```"


def _libraries():
    try:
        import datasets
        import tokenizers
        import transformers
        import trl
    except ImportError as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI installs TRL (.ci/run): the GRPO step must run there ({exc})")
        pytest.skip(f"TRL is not installed ({exc}): pip install -e '.[trl]'")
    return datasets, tokenizers, transformers, trl


def test_trl_grpo_trainer_takes_two_optimizer_steps_on_arena_rewards(tmp_path, monkeypatch):
    datasets, tokenizers, transformers, trl = _libraries()
    import torch

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # nothing may come from a hub
    monkeypatch.setenv("WANDB_DISABLED", "true")
    task = find_task("elementwise/axpy", FIXTURE_TASKS)
    data = rows([task], "trl", device="sim:h200", repeat=2)
    tokenizer = trained_tokenizer([r["prompt"][0]["content"] for r in data], [RIGHT, WRONG])
    right, wrong = tokenizer.convert_tokens_to_ids([RIGHT, WRONG])
    assert tokenizer.decode([right]) == RIGHT and tokenizer.decode([wrong]) == WRONG
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(
        transformers.LlamaConfig(
            vocab_size=len(tokenizer),
            hidden_size=16,
            intermediate_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            num_key_value_heads=1,
            max_position_embeddings=2048,
            pad_token_id=tokenizer.pad_token_id,
            eos_token_id=tokenizer.eos_token_id,
        )
    )
    before = model.lm_head.weight.detach().clone()
    reward = kernel_reward(devices=["sim:h200"], tasks_dir=FIXTURE_TASKS)  # profile: train
    calls: list[list[float | None]] = []
    original = reward.__call__

    class Counted(type(reward)):  # type: ignore[misc]
        def __call__(self, *args, **kwargs):
            values = original(*args, **kwargs)
            calls.append(values)
            return values

    reward.__class__ = Counted
    args = trl.GRPOConfig(
        output_dir=str(tmp_path),
        per_device_train_batch_size=4,
        num_generations=4,
        max_completion_length=1,  # one token: one of the two whole replies
        max_steps=2,
        learning_rate=1e-2,
        logging_steps=1,
        report_to=[],
        save_strategy="no",
        use_cpu=True,
        seed=0,
        generation_kwargs={"sequence_bias": [[[right], 30.0], [[wrong], 30.0]]},
    )
    trainer = trl.GRPOTrainer(
        model=model,
        processing_class=tokenizer,
        reward_funcs=[reward],
        args=args,
        train_dataset=datasets.Dataset.from_list(data),
    )
    try:
        trainer.train()
    finally:
        reward.close()
    assert trainer.state.global_step == 2, "two optimizer steps"
    assert len(calls) == 2 and all(len(c) == 4 for c in calls), "one arena call per step's group"
    values = {v for c in calls for v in c}
    assert values <= {-0.25} | {v for v in values if v is not None and v > 0}, values
    assert any(v is not None and v > 0 for v in values), "the correct reply was scored correct"
    logged = [h for h in trainer.state.log_history if "rewards/kernel_arena/mean" in h]
    assert logged and all("arena/correct" in h for h in logged)
    if any(len(set(c)) > 1 for c in calls):  # a group with different rewards: a real gradient
        assert not torch.equal(model.lm_head.weight.detach(), before)
