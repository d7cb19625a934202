"""How the leaderboard learns of results (core/store/db.py's change hook, arena_tui/web/feed.py):
a listener hears this handle's writes once committed, `data_version` changes on another
connection's commit, `recorded_since` says what landed, and the feed turns either into one
`results` event per landing for every stream, with nothing announced twice."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from arena_tui.web.feed import StoreFeed
from core.store.db import Store
from tests.test_store import make_result


def _job(store: Store, run: str, n: int) -> int:
    return store.add_job(
        run, task_id="elementwise/axpy", device_id="cuda:0", agent=f"a{n}", key=f"k{n}"
    )


def test_listeners_hear_committed_result_writes_and_data_version_tells_other_connections(
    tmp_path: Path,
) -> None:
    with Store.open(tmp_path / "arena.db") as a, Store.open(tmp_path / "arena.db") as b:
        run = a.create_run("r")
        heard: list[int] = []
        remove = a.add_listener(heard.append)
        a.add_listener(lambda job: 1 / 0)  # a broken listener does not undo the write
        before = b.data_version
        job = _job(a, run, 1)
        assert heard == []  # adding a job changes no result
        a.record_result(job, make_result())
        assert heard == [job] and b.data_version != before
        a.mark_infrastructure(job, "the node rebooted")
        assert heard == [job, job]
        remove()
        a.record_result(_job(a, run, 2), make_result())
        assert heard == [job, job]
        rows = b.recorded_since(None)
        assert [r["agent"] for r in rows] == ["a1", "a2"] and rows[0]["run_id"] == run
        since = b.recorded_since(
            rows[1]["created_at"]
        )  # at or after the stamp (a1 too, if it shares a2's millisecond)
        assert since[-1]["agent"] == "a2" and all(
            r["created_at"] >= rows[1]["created_at"] for r in since
        )
        assert b.recorded_since("9999") == []


def test_the_feed_announces_each_landing_once_to_every_stream(tmp_path: Path) -> None:
    async def scenario() -> list[list[dict]]:
        with (
            Store.open(tmp_path / "arena.db") as served,
            Store.open(tmp_path / "arena.db") as other,
        ):
            run = other.create_run("r")
            other.record_result(_job(other, run, 0), make_result())  # before the feed: not news
            feed = StoreFeed(served, poll_s=0.05)
            await feed.start()
            streams = [feed.stream() for _ in range(2)]
            for s in streams:
                assert "event: hello" in await anext(s)
            got: list[list[dict]] = [[], []]

            async def read(i: int) -> None:
                async for chunk in streams[i]:
                    if chunk.startswith("id: "):
                        got[i].append(json.loads(chunk.split("data: ", 1)[1]))

            readers = [asyncio.create_task(read(i)) for i in range(2)]
            await asyncio.sleep(0.05)
            for n in (1, 2):  # another process's writes: found by data_version
                other.record_result(_job(other, run, n), make_result())
                await asyncio.sleep(0.3)
            served.record_result(
                _job(served, run, 3), make_result()
            )  # this process's: the listener
            await asyncio.sleep(0.3)
            await feed.close()
            await asyncio.wait_for(asyncio.gather(*readers), 5)  # closing ends every stream
            return got

    got = asyncio.run(scenario())
    for events in got:
        agents = [r["agent"] for e in events for r in e["results"]]
        assert agents == ["a1", "a2", "a3"]
        assert [e["version"] for e in events] == sorted({e["version"] for e in events})
