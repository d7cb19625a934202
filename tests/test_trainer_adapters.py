"""The arena inside trainers: TRL's and verl's reward functions, the dataset they start from,
and the client of `arena serve`. A batch of completions is scored in one arena call and the
rewards come back in the trainer's order; failures are rewards, never exceptions."""

from __future__ import annotations

import asyncio
import json
import os
import types
from pathlib import Path

import pytest

from arena_tui.cli import main
from core.evaluation.job import Timing
from core.rl.adapters import verl
from core.rl.adapters.completions import NO_CODE, BatchScorer, Item, extract_candidate
from core.rl.adapters.serve_client import ArenaClient, ArenaClientError
from core.rl.adapters.trl import kernel_reward

FIXTURE_TASKS = Path(__file__).resolve().parent / "fixtures" / "tasks"
CHEATS = Path(__file__).resolve().parent / "cheats"
FAST = Timing(
    alternations=3, budget_ms=60.0, min_calls=1, max_calls=50
)  # as the cheat suite times (tests/test_cheats.py)

CORRECT = "Here you go:\n```python\nimport torch\n\ndef run(x, b):\n    return torch.add(b, x, alpha=2)\n```\n"
BROKEN = "```python\nimport torch\n\ndef run(x, b):\n    return x + b\n```"
CHEAT = "```python\n" + (CHEATS / "cache_id.py").read_text() + "```"
PROSE = "I would write a Triton kernel that fuses the two loads."


def test_the_candidate_is_the_last_python_block_of_the_reply():
    assert (
        extract_candidate("a\n```python\nx = 1\n```\nthen\n```python\ndef run(): pass\n```")
        == "def run(): pass\n"
    )
    chat = [{"role": "assistant", "content": "```py\ndef run(x):\n    return x\n```"}]
    assert (
        extract_candidate(chat) == "def run(x):\n    return x\n"
    )  # TRL's conversational completions
    assert extract_candidate(PROSE) is None and extract_candidate("```python\n\n```") is None


@pytest.fixture(scope="module")
def scorer():
    from core.rl.arena import Arena

    with BatchScorer(
        arena_factory=lambda: Arena(["cpu"], tasks_dir=FIXTURE_TASKS, timing=FAST)
    ) as s:
        yield s


def test_a_batch_gets_its_rewards_in_order_one_correct_one_broken_one_cheating(scorer):
    calls = []
    original = scorer._arena_call

    async def counted(requests):
        calls.append(len(requests))
        return await original(requests)

    scorer._arena_call = counted
    try:
        scores = scorer.score(
            [Item("elementwise/axpy", c, seed=3) for c in (CORRECT, BROKEN, CHEAT, PROSE)]
        )
    finally:
        scorer._arena_call = original
    assert calls == [4], "one arena call for the batch"
    assert [s.outcome for s in scores] == ["correct", "incorrect", "integrity_violation", NO_CODE]
    correct, broken, cheat, prose = (s.reward for s in scores)
    # the ladder: writing no code is below writing wrong code, a cheat below everything
    assert correct > 0 > broken > prose > cheat == -1.0 and prose == -0.75
    assert "no ```python block" in scores[3].reason and scores[2].reason.startswith("integrity: ")
    assert {s.info["profile"] for s in scores} == {"train"}  # a trainer's default profile


def _grpo_calculate_rewards():
    """TRL's own call site (GRPOTrainer._calculate_rewards), or None without TRL."""
    try:
        from trl.trainer.grpo_trainer import GRPOTrainer
    except ImportError:
        return None
    return GRPOTrainer._calculate_rewards


def test_trl_calls_the_reward_function_and_gets_one_reward_per_completion(scorer):
    calculate = _grpo_calculate_rewards()
    if calculate is None:
        if os.environ.get("CI") == "true":
            pytest.fail(
                "CI installs TRL (.ci/run): the reward function must be tested against TRL's own call"
            )
        pytest.skip("TRL is not installed: pip install -e '.[trl]'")
    import torch

    reward = kernel_reward()
    reward.scorer = scorer  # the module's warm arena on the fixture tasks
    extra: dict = {}
    trainer = (
        types.SimpleNamespace(  # what _calculate_rewards reads of a GRPOTrainer, on one CPU process
            accelerator=types.SimpleNamespace(device=torch.device("cpu"), is_main_process=True),
            args=types.SimpleNamespace(report_to=[]),
            state=types.SimpleNamespace(global_step=0),
            reward_funcs=[reward],
            reward_processing_classes=[None],
            reward_func_names=["kernel_arena"],
            environments=None,
            _log_completion_extra=lambda column, values: extra.setdefault(column, []).extend(
                values
            ),
            _log_metric=lambda name, value: extra.setdefault(name, value),
        )
    )
    inputs = [{"prompt": "p", "task_id": "elementwise/axpy"} for _ in range(3)]
    rewards = calculate(trainer, inputs, ["p"] * 3, [CORRECT, PROSE, BROKEN], [[1]] * 3)
    values = rewards[:, 0].tolist()
    assert values[0] > 0 > values[2] > values[1] == -0.75  # no code scores below wrong code
    assert extra["arena_outcome"] == ["correct", NO_CODE, "incorrect"] and extra[
        "arena/correct"
    ] == pytest.approx(1 / 3)


def test_trl_reward_function_needs_the_task_column():
    reward = kernel_reward()
    with pytest.raises(ValueError, match="arena dataset export --format trl"):
        reward(prompts=["p"], completions=[CORRECT])


def test_an_infrastructure_fault_that_persists_is_no_reward():
    class Down(BatchScorer):
        async def _arena_call(self, requests):
            from core.model.result import Result, StageResult
            from core.rl.arena import RewardedResult

            broken = Result(
                "elementwise/axpy",
                "0",
                {"id": "cpu"},
                "cpu",
                "infrastructure_error",
                "compile",
                [StageResult("compile", "error", message="harness died")],
                [],
                0.0,
                None,
                None,
                0.0,
            )
            return [RewardedResult(broken, None, "default") for _ in requests]

    with Down() as s:
        score = s.score([Item("elementwise/axpy", CORRECT)])[0]
    assert score.reward is None and score.outcome == "infrastructure_error"


def test_verl_compute_score_refuses_prime_reward_manager_s_process_pool():
    """PrimeRewardManager calls the function positionally in a pool of 64 processes, each of
    which would start its own arena on the same GPUs: refused, with the reason."""
    with pytest.raises(TypeError, match=r"PrimeRewardManager.*pool of 64 processes"):
        asyncio.run(verl.compute_score("kernel_arena", CORRECT, "elementwise/axpy", {}))


def test_dataset_export_writes_a_prompt_row_per_task(tmp_path, capsys):
    out = tmp_path / "trl.jsonl"
    assert (
        main(
            [
                "--tasks-dir",
                str(FIXTURE_TASKS),
                "dataset",
                "export",
                "--format",
                "trl",
                "--out",
                str(out),
                "--device",
                "cpu",
            ]
        )
        == 0
    )
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["task_id"] for r in rows] == ["elementwise/axpy"]
    prompt = rows[0]["prompt"][0]["content"]
    assert rows[0]["prompt"][0]["role"] == "user" and "```python" in prompt and "run(" in prompt
    assert (
        rows[0]["visible_workloads"] == ["N=64,D=128", "N=16,D=256"] and "N=33" not in prompt
    )  # never a hidden shape
    verl_out = tmp_path / "verl.jsonl"
    assert (
        main(
            [
                "--tasks-dir",
                str(FIXTURE_TASKS),
                "dataset",
                "export",
                "--format",
                "verl",
                "-o",
                str(verl_out),
                "--repeat",
                "2",
            ]
        )
        == 0
    )
    row = json.loads(verl_out.read_text().splitlines()[1])
    assert (
        row["reward_model"] == {"style": "rule", "ground_truth": "elementwise/axpy"}
        and row["extra_info"]["index"] == 1
    )
    assert "wrote 2 verl rows" in capsys.readouterr().out


def test_the_client_retries_and_then_says_what_failed():
    client = ArenaClient(
        "http://127.0.0.1:9", timeout_s=0.5, retries=1, backoff_s=0.01
    )  # port 9: nothing listens
    with pytest.raises(
        ArenaClientError, match=r"POST http://127.0.0.1:9/reset failed after 2 attempt\(s\)"
    ):
        client.reset("elementwise/axpy")


class _Stub:
    """A loopback HTTP server answering from a script of (status, body) pairs."""

    def __init__(self, script):
        import http.server
        import threading

        self.script, self.seen = list(script), []
        stub = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                stub.seen.append(
                    (
                        self.path,
                        json.loads(self.rfile.read(length) or b"{}"),
                        self.headers.get("Authorization"),
                    )
                )
                status, body = stub.script.pop(0)
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):  # quiet
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()


def test_the_client_retries_a_busy_server_and_names_a_refused_field():
    from core.rl.adapters.serve_client import ArenaRequestError

    step = {
        "episode_id": "e1",
        "observation": {"turn": 1},
        "reward": 0.6,
        "done": False,
        "info": {"outcome": "correct"},
    }
    stub = _Stub(
        [
            (503, {"error": {"status": 503, "message": "shutting down"}}),
            (200, step),
            (
                400,
                {
                    "error": {
                        "status": 400,
                        "field": "action.code",
                        "message": "`code` must be a string",
                    }
                },
            ),
        ]
    )
    try:
        client = ArenaClient(stub.url, token="t0k", retries=2, backoff_s=0.01)
        answer = client.step("e1", "def run(): pass")
        assert (answer.reward, answer.done, answer.observation) == (0.6, False, {"turn": 1})
        assert [s[0] for s in stub.seen] == ["/step", "/step"] and stub.seen[1][2] == "Bearer t0k"
        assert stub.seen[1][1] == {"episode_id": "e1", "action": {"code": "def run(): pass"}}
        with pytest.raises(ArenaRequestError) as refused:
            client.step("e1", "x")
        assert refused.value.status == 400 and refused.value.field == "action.code"
    finally:
        stub.close()


def test_rows_with_an_episode_are_steps_of_that_episode():
    from core.rl.adapters.serve_client import StepResult

    class Server:
        def __init__(self):
            self.steps = []

        def step(self, episode_id, code):
            self.steps.append((episode_id, code))
            return StepResult(episode_id, {}, 0.7, False, {"outcome": "correct", "speedup": 1.4})

    server = Server()
    with BatchScorer(server=server) as s:
        score = s.score([Item("elementwise/axpy", CORRECT, episode_id="ep-3")])[0]
    assert server.steps == [
        ("ep-3", "import torch\n\ndef run(x, b):\n    return torch.add(b, x, alpha=2)\n")
    ]
    assert (score.reward, score.outcome, score.speedup) == (0.7, "correct", 1.4)


def test_the_client_drives_a_real_arena_serve():
    from tests.test_serve import AXPY, WRONG, ServerThread

    server = ServerThread()
    try:
        client = ArenaClient(f"http://127.0.0.1:{server.port}", timeout_s=120)
        assert client.health()["status"] == "healthy"
        episode = client.reset("elementwise/axpy", seed=4)
        step = client.step(episode.episode_id, AXPY)
        assert step.reward is not None and not step.done
        final = client.step(episode.episode_id, final=True)
        assert final.done and final.reward is not None
        good, bad = client.evaluate_many(
            [("elementwise/axpy", AXPY), ("elementwise/axpy", WRONG)], agent="client-test"
        )
        assert (good.outcome, bad.outcome) == ("correct", "incorrect") and good.reward > bad.reward
    finally:
        server.close()
