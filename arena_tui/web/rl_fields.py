"""The RL endpoints' reward fields: `profile` on /reset and /evaluate (which evaluation profile a
request asks for) and `group`/`group_size` on a single /evaluate (a GRPO group the server gathers
into one batch: core/rl/groups.py). Each is checked here and refused with a 400 naming it."""

from __future__ import annotations

from typing import Any

from arena_tui.web.errors import HttpError, take
from core.rl.groups import MAX_GROUP


def group_fields(body: dict[str, Any]) -> tuple[str | None, int | None]:
    """A single /evaluate's GRPO group: its name and size, both or neither (core/rl/groups.py)."""
    group = take(body, "group", str, '"rope#17" (a task and a dataset row)')
    size = take(body, "group_size", int, "the group's member count, e.g. 8")
    if (group is None) != (size is None):
        missing = "group_size" if size is None else "group"
        raise HttpError(
            400, f"`{missing}` is missing: a group needs both `group` and `group_size`", missing
        )
    if size is not None and not 1 <= size <= MAX_GROUP:
        raise HttpError(400, f"`group_size` is {size}: give 1..{MAX_GROUP}", "group_size")
    return group, size


def profile_field(body: dict[str, Any], where: str = "") -> str | None:
    """The request's evaluation profile (`train`: the cheap one a trainer asks for; `full`, the
    default, what the leaderboard ranks): docs/evaluation.md, "Profiles"."""
    from core.evaluation.profiles import PROFILES

    profile = take(body, "profile", str, '"train" or "full"', where=where)
    if profile is not None and profile not in PROFILES:
        raise HttpError(
            400,
            f"`{where}profile` is {profile[:40]}: use one of {', '.join(PROFILES)} (train: what a trainer asks for)",
            f"{where}profile",
        )
    return profile
