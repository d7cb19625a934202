"""Save an SVG of each screen of the app at 80×24 and 200×50 into docs/screenshots/.

    python tools/app_screenshots.py

It draws a scripted run (arena_tui/app/scripted.py: three agents on the axpy fixture task,
one passing, one failing correctness, one failing to compile) from a temporary store, so the
pictures need no harness and come out the same every time."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from unittest import mock

import core.store.db
import core.store.rows
from arena_tui.app.app import ArenaApp
from arena_tui.app.scripted import ScriptedRun
from core.store.db import Store

ROOT = Path(__file__).resolve().parent.parent
TASKS = ROOT / "tests" / "fixtures" / "tasks"
OUT = ROOT / "docs" / "screenshots"
SCREENS = {
    "queue": (),
    "transcripts": ("2",),
    "scores": ("enter",),
    "leaderboard": ("4",),
    "triage": ("5",),
    "help": ("question_mark",),
}
SIZES = ((80, 24), (200, 50))


async def shoot(run: ScriptedRun, name: str, keys: tuple[str, ...], size: tuple[int, int]) -> Path:
    app = ArenaApp(run.source(TASKS, live=False), clock=lambda: 100.0)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        for key in keys:
            await pilot.press(key)
            await pilot.pause(0.3)
        path = OUT / f"{name}-{size[0]}x{size[1]}.svg"
        app.save_screenshot(path.name, str(OUT))
    return path


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    with (
        tempfile.TemporaryDirectory() as tmp,
        mock.patch.object(core.store.rows, "utc_now", lambda: "2026-12-01T00:00:00+00:00"),
        mock.patch.object(core.store.db.secrets, "token_hex", lambda n: "abcd"[: 2 * n]),
    ):
        with Store.open(Path(tmp) / "arena.db") as store:
            run = ScriptedRun(
                store,
                ("elementwise/axpy",),
                ("ref", "cli", "bad"),
                starter=TASKS / "elementwise/axpy/starter.py",
                folder=Path(tmp) / "attempts",
            )
            run.play_into_store()
            for name, keys in SCREENS.items():
                for size in SIZES:
                    print(asyncio.run(shoot(run, name, keys, size)).relative_to(ROOT))


if __name__ == "__main__":
    main()
