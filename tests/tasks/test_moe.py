"""The MoE family's tasks and what makes each special: routing ids are judged as sets (any
order, each weight paired with its id) with ties to the lowest index, which the bfloat16-
valued logits really produce; DeepSeek-V3's group limit and bias-for-selection-only are
enforced; moe_align's segments are multisets with a free tail; fused_moe tolerates
bfloat16 intermediates but not a dropped token. Every routing input comes uniform (S = 1)
and with hot experts (S = 2)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from core.tasks.spec import load_task
from tests.task_files import task_file, task_inputs

MOE = Path(__file__).resolve().parents[2] / "tasks" / "moe"
TASKS = ["route_topk_softmax", "route_grouped_topk", "align_permute", "fused_moe"]


def _module(task: str, name: str):
    return task_file(MOE / task, name)


def _inputs(task: str, seed: int = 0, **axes):
    return task_inputs(MOE / task, axes, seed)


def _judge(task: str, outputs, inputs):
    expected = _module(task, "reference").run(*inputs)
    expected = list(expected) if isinstance(expected, (tuple, list)) else [expected]
    outputs = list(outputs) if isinstance(outputs, (tuple, list)) else [outputs]
    return _module(task, "check").check(outputs, expected, inputs)


def _passed(verdict) -> bool:
    return all(v["passed"] for v in verdict.values())


def _messages(verdict) -> str:
    return " ".join(v.get("message", "") for v in verdict.values() if not v["passed"])


pytestmark = pytest.mark.usefixtures("triton_interpreter")


@pytest.mark.parametrize("task", TASKS)
def test_task_loads_with_model_workloads_and_check(task):
    t = load_task(MOE / task)
    assert t.model_workloads and (MOE / task / "check.py").is_file()
    assert "S" in t.axes  # uniform and hot-expert routing are both workloads
    assert {w.axes["S"] for w in t.gpu.visible} == {1, 2}


@pytest.mark.parametrize("task", TASKS)
def test_inputs_deterministic_and_every_input_matters(task):
    t = load_task(MOE / task)
    axes = dict(t.cpu.visible[-1].axes)
    a, b = _inputs(task, 7, **axes), _inputs(task, 7, **axes)
    assert all(torch.equal(x, y) if isinstance(x, torch.Tensor) else x == y for x, y in zip(a, b))
    ref = _module(task, "reference")
    base = ref.run(*a)
    base = list(base) if isinstance(base, (tuple, list)) else [base]
    other = _inputs(task, 8, **axes)
    for i, x in enumerate(a):
        if not isinstance(x, torch.Tensor):
            continue
        changed = list(a)
        changed[i] = other[i]
        out = ref.run(*changed)
        out = list(out) if isinstance(out, (tuple, list)) else [out]
        assert any(not torch.equal(p, q) for p, q in zip(base, out)), (
            f"input {i} of {task} does not change the output"
        )


@pytest.mark.parametrize(
    "task", ["route_topk_softmax", "route_grouped_topk", "align_permute", "fused_moe"]
)
def test_hot_experts_skew_the_routing(task):
    axes = {
        "route_topk_softmax": dict(T=512, E=128, K=8),
        "route_grouped_topk": dict(T=512, E=256, K=8, G=8, KG=4),
        "align_permute": dict(T=512, K=8, E=128, BM=16),
        "fused_moe": dict(T=512, H=16, I=16, E=128, K=8),
    }[task]
    share = []
    for S in (1, 2):
        args = _inputs(task, 3, S=S, **axes)
        ids = (
            args[1]
            if task == "fused_moe"
            else args[0]
            if task == "align_permute"
            else _module(task, "reference").run(*args)[1]
        )
        counts = (
            torch.bincount(ids.flatten().long(), minlength=axes["E"]).sort(descending=True).values
        )
        share.append(
            float(counts[: axes["E"] // 16].sum()) / ids.numel()
        )  # the busiest E/16 experts' share
    assert share[0] < 0.25 and share[1] > 0.35 and share[1] > 2 * share[0], (
        share
    )  # fair share: 1/16


# --- route_topk_softmax ------------------------------------------------------------------


def _topk_by_sort(x, k, lowest_first=True):
    if not lowest_first:  # ties to the highest index
        return (x.shape[1] - 1) - torch.sort(
            x.flip(1), dim=-1, descending=True, stable=True
        ).indices[:, :k]
    return torch.sort(x, dim=-1, descending=True, stable=True).indices[:, :k]


def test_topk_softmax_ties_are_real_and_go_to_the_lowest_index():
    x, k = _inputs("route_topk_softmax", 0, T=256, E=128, K=8, S=1)
    srt = x.sort(dim=1, descending=True).values
    assert (srt[:, k - 1] == srt[:, k]).sum() >= 5  # bfloat16-valued logits tie at the boundary
    ids = _topk_by_sort(x, k)
    w = torch.softmax(x.gather(1, ids), dim=1)
    perm = torch.randperm(k)
    assert _passed(
        _judge(
            "route_topk_softmax", (w[:, perm].contiguous(), ids[:, perm].int().contiguous()), [x, k]
        )
    )  # any order
    bad = _topk_by_sort(x, k, lowest_first=False)
    verdict = _judge("route_topk_softmax", (torch.softmax(x.gather(1, bad), 1), bad.int()), [x, k])
    assert not verdict["topk_ids"]["passed"] and "tie" in verdict["topk_ids"]["message"]


def test_topk_softmax_rejects_unnormalised_unpaired_and_constant_outputs():
    x, k = _inputs("route_topk_softmax", 1, T=64, E=32, K=4, S=2)
    ids = _topk_by_sort(x, k)
    probs = torch.softmax(x, 1).gather(1, ids)
    assert not _passed(
        _judge("route_topk_softmax", (probs, ids.int()), [x, k])
    )  # renormalise is required
    w = probs / probs.sum(1, keepdim=True)
    assert not _passed(
        _judge("route_topk_softmax", (w, ids.flip(1).int().contiguous()), [x, k])
    )  # weights unpaired
    assert not _passed(
        _judge("route_topk_softmax", (w.bfloat16().float(), ids.int()), [x, k])
    )  # bf16 softmax
    T = x.shape[0]
    assert not _passed(
        _judge(
            "route_topk_softmax", (torch.zeros(T, k), torch.zeros(T, k, dtype=torch.int32)), [x, k]
        )
    )
    const = torch.arange(k, dtype=torch.int32).expand(T, k).contiguous()
    assert not _passed(_judge("route_topk_softmax", (torch.full((T, k), 1 / k), const), [x, k]))


def test_topk_softmax_starter_and_baseline_pass():
    for axes in (dict(T=37, E=128, K=8, S=2), dict(T=5, E=60, K=6, S=1)):
        args = _inputs("route_topk_softmax", 2, **axes)
        for name in ("starter", "baseline"):
            assert _passed(
                _judge("route_topk_softmax", _module("route_topk_softmax", name).run(*args), args)
            ), name


# --- route_grouped_topk ------------------------------------------------------------------


def _deepseek(seed=0, T=128, S=1):
    return _inputs("route_grouped_topk", seed, T=T, E=256, K=8, G=8, KG=4, S=S)


def test_grouped_topk_rejects_ignoring_the_group_limit():
    args = _deepseek(0)
    x, bias, k, G, KG, factor = args
    u = torch.sigmoid(x) + bias
    ids = torch.sort(u, dim=1, descending=True, stable=True).indices[
        :, :k
    ]  # plain top-8 over all groups
    s = torch.sigmoid(x).gather(1, ids)
    verdict = _judge("route_grouped_topk", (s / s.sum(1, keepdim=True) * factor, ids.int()), args)
    assert not verdict["topk_ids"]["passed"] and "group" in verdict["topk_ids"]["message"]


def test_grouped_topk_bias_selects_but_does_not_weigh():
    args = _deepseek(1, S=2)
    x, bias, k, G, KG, factor = args
    w, ids = _module("route_grouped_topk", "reference").run(*args)
    assert _passed(_judge("route_grouped_topk", (w, ids), args))
    biased = (torch.sigmoid(x) + bias).gather(1, ids.long())  # weights from the biased scores
    verdict = _judge(
        "route_grouped_topk", (biased / biased.sum(1, keepdim=True) * factor, ids), args
    )
    assert verdict["topk_ids"]["passed"] and not verdict["topk_weights"]["passed"]
    unbiased = _module("route_grouped_topk", "reference").run(
        x, torch.zeros_like(bias), k, G, KG, factor
    )
    assert not _passed(_judge("route_grouped_topk", unbiased, args))  # selection without the bias
    assert not _passed(
        _judge("route_grouped_topk", (w / factor, ids), args)
    )  # the factor is part of the weight


def test_grouped_topk_starter_and_baseline_pass_deepseek_and_kimi():
    cases = [
        dict(T=37, E=256, K=8, G=8, KG=4, S=2),
        dict(T=20, E=96, K=8, G=1, KG=1, S=1),
        dict(T=5, E=60, K=6, G=6, KG=3, S=1),
    ]
    for axes in cases:
        args = _inputs("route_grouped_topk", 3, **axes)
        for name in ("starter", "baseline"):
            out = _module("route_grouped_topk", name).run(*args)
            w, ids = out
            perm = torch.randperm(axes["K"])
            assert _passed(
                _judge(
                    "route_grouped_topk", (w[:, perm].contiguous(), ids[:, perm].contiguous()), args
                )
            ), (name, axes)


# --- align_permute -----------------------------------------------------------------------


def test_align_segments_are_multisets_and_the_tail_is_free():
    args = _inputs("align_permute", 0, T=37, K=8, E=128, BM=16, S=2)
    sorted_ids, expert_ids, total = _module("align_permute", "reference").run(*args)
    npad, n = int(total), args[0].numel()
    shuffled = sorted_ids.clone()
    for e in expert_ids[: npad // 16].unique():  # shuffle rows and sentinels inside each segment
        pos = (expert_ids[: npad // 16] == e).nonzero().flatten()
        seg = torch.cat([torch.arange(p * 16, p * 16 + 16) for p in pos.tolist()])
        shuffled[seg] = shuffled[seg[torch.randperm(seg.numel())]]
    shuffled[npad:] = 12345  # beyond the padded total: ignored
    tail = expert_ids.clone()
    tail[npad // 16 :] = 7
    assert not torch.equal(shuffled, sorted_ids)
    assert _passed(_judge("align_permute", (shuffled, tail, total), args))
    # one row moved into the neighbouring expert's segment
    moved = sorted_ids.clone()
    first, last = 0, npad - 1
    moved[first], moved[last] = sorted_ids[last], sorted_ids[first]
    if int(expert_ids[0]) != int(expert_ids[npad // 16 - 1]) and int(sorted_ids[first]) != int(
        sorted_ids[last]
    ):
        verdict = _judge("align_permute", (moved, expert_ids, total), args)
        assert (
            not verdict["sorted_token_ids"]["passed"]
            and "segment" in verdict["sorted_token_ids"]["message"]
        )
    assert not _passed(
        _judge("align_permute", (sorted_ids, expert_ids, total + 16), args)
    )  # the total is exact
    wrong_block = expert_ids.clone()
    wrong_block[0] += 1
    assert not _passed(_judge("align_permute", (sorted_ids, wrong_block, total), args))
    zeros = (torch.zeros_like(sorted_ids), torch.zeros_like(expert_ids), torch.zeros_like(total))
    assert not _passed(_judge("align_permute", zeros, args))
    assert int(sorted_ids.max()) == n  # padding carries the sentinel T·K


def test_align_starter_and_baseline_pass_with_empty_and_hot_experts():
    for axes in (dict(T=5, K=6, E=60, BM=8, S=1), dict(T=64, K=8, E=64, BM=16, S=2)):
        args = _inputs("align_permute", 4, **axes)
        assert (
            int((torch.bincount(args[0].flatten().long(), minlength=axes["E"]) == 0).sum()) > 0
        )  # empty experts
        for name in ("starter", "baseline"):
            assert _passed(
                _judge("align_permute", _module("align_permute", name).run(*args), args)
            ), (name, axes)


# --- fused_moe ---------------------------------------------------------------------------


def test_fused_moe_tolerates_bf16_intermediates_but_not_a_dropped_token():
    args = _inputs("fused_moe", 0, T=2000, H=64, I=32, E=8, K=2, S=1)
    hidden, topk_ids, topk_weights, w13, w2 = args
    ref = _module("fused_moe", "reference").run(*args)
    assert _passed(_judge("fused_moe", _module("fused_moe", "baseline").run(*args), args))
    dropped = ref.clone()
    dropped[57] = (
        0  # 0.05% of the elements: inside the overall 99.9%; the per-token rule catches it
    )
    verdict = _judge("fused_moe", dropped.bfloat16(), args)
    assert not verdict["out"]["passed"] and "token 57" in verdict["out"]["message"]
    one_slot = _module("fused_moe", "reference").run(
        hidden, topk_ids, topk_weights * torch.tensor([1.0, 0.0]), w13, w2
    )
    assert not _passed(_judge("fused_moe", one_slot.bfloat16(), args))  # a dropped expert slot
    up_gate = torch.cat([w13[:, 32:], w13[:, :32]], dim=1)  # gate and up swapped
    assert not _passed(
        _judge(
            "fused_moe",
            _module("fused_moe", "reference")
            .run(hidden, topk_ids, topk_weights, up_gate, w2)
            .bfloat16(),
            args,
        )
    )
    assert not _passed(_judge("fused_moe", torch.zeros_like(hidden), args))


def test_fused_moe_starter_passes_with_hot_experts():
    args = _inputs("fused_moe", 5, T=24, H=128, I=64, E=8, K=4, S=2)
    assert _passed(_judge("fused_moe", _module("fused_moe", "starter").run(*args), args))
