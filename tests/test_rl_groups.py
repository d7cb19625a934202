"""GRPO groups gathered from single calls (core/rl/groups.py): members wait for their group and
are evaluated together, a group missing a member is evaluated after the wait anyway, and a
group named inconsistently is refused. A stand-in evaluate_many: no arena, milliseconds."""

from __future__ import annotations

import asyncio

import pytest

from arena_tui.web.errors import HttpError
from arena_tui.web.rl_fields import group_fields, profile_field
from core.rl.groups import GroupError, GroupGather
from core.rl.requests import EvalRequest


class Recorded:
    def __init__(self):
        self.calls: list[list[str]] = []

    async def __call__(self, requests):
        self.calls.append([r.source for r in requests])
        return [f"scored {r.source}" for r in requests]


def request(source: str, task: str = "elementwise/rope") -> EvalRequest:
    return EvalRequest(task, source)


def test_members_wait_for_their_group_and_are_evaluated_together():
    seen = Recorded()

    async def main():
        gather = GroupGather(seen, wait_s=30)
        a = asyncio.ensure_future(gather.submit("rope#1", 3, request("a")))
        other = asyncio.ensure_future(gather.submit("rope#2", 2, request("x")))
        b = asyncio.ensure_future(gather.submit("rope#1", 3, request("b")))
        await asyncio.sleep(0.01)
        assert seen.calls == [] and gather.waiting == 3  # nothing evaluated before a group is whole
        c = await gather.submit("rope#1", 3, request("c"))
        return await a, await b, c, other, gather

    a, b, c, other, gather = asyncio.run(main())
    assert seen.calls == [["a", "b", "c"]] and (a, b, c) == ("scored a", "scored b", "scored c")
    assert other.cancelled() or not other.done()  # rope#2 still waits for its second member


def test_a_group_short_of_a_member_is_evaluated_after_the_wait_and_singles_at_once():
    seen = Recorded()

    async def main():
        gather = GroupGather(seen, wait_s=0.05)
        lone = await gather.submit(None, None, request("solo"))
        short = await gather.submit("rope#1", 4, request("a"))  # three members never came
        return lone, short, gather.batches

    lone, short, batches = asyncio.run(main())
    assert (lone, short) == ("scored solo", "scored a") and batches == [1, 1]


def test_a_group_named_inconsistently_is_refused_with_the_fix():
    async def main():
        gather = GroupGather(Recorded(), wait_s=0.05)
        first = asyncio.ensure_future(gather.submit("g", 2, request("a")))
        await asyncio.sleep(0)
        with pytest.raises(GroupError, match="opened for 2 members of elementwise/rope, not 3"):
            await gather.submit("g", 3, request("b"))
        await first

    asyncio.run(main())
    with pytest.raises(ValueError, match="wait_s"):
        GroupGather(Recorded(), wait_s=0)


def test_the_server_takes_a_group_only_with_its_size():
    assert group_fields({"group": "rope#1", "group_size": 8}) == ("rope#1", 8)
    assert group_fields({}) == (None, None)
    with pytest.raises(HttpError, match="`group_size` is missing"):
        group_fields({"group": "rope#1"})
    with pytest.raises(HttpError, match="`group_size` is 0"):
        group_fields({"group": "rope#1", "group_size": 0})


def test_the_server_takes_a_known_profile_and_names_the_field_otherwise():
    assert profile_field({"profile": "train"}) == "train" and profile_field({}) is None
    with pytest.raises(
        HttpError, match=r"`candidates\[2\]\.profile` is fast: use one of full, train"
    ):
        profile_field({"profile": "fast"}, "candidates[2].")
