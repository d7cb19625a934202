"""The `arena` app: each screen and action driven through Textual's Pilot over a scripted run
(arena_tui/app/scripted.py writes to a tmp store what the engine would and reports it through
the engine's callbacks), SVG snapshots of each screen, a stream of hundreds of events per
second, the command line's choice between app and printer, and one real default run."""

from __future__ import annotations

import asyncio
import io
import sys
import time
from pathlib import Path

import pytest
from rich.console import Console
from textual.events import Key
from textual.widgets import DataTable, OptionList, RichLog, Static

import arena_tui.app.app as arena_app
import core.store
import core.store.db
import core.store.rows
from arena_tui.app.app import ArenaApp
from arena_tui.app.messages import RunUpdated
from arena_tui.app.model import RunModel
from arena_tui.app.queue_rows import Filter
from arena_tui.app.screens.help import HelpScreen
from arena_tui.app.screens.note import NoteScreen
from arena_tui.app.scripted import ScriptedRun
from arena_tui.app.source import RunSource
from arena_tui.app.triage import failure_kind
from arena_tui.app.widgets.transcript_pane import TranscriptPane
from core.model import events
from core.orchestration.runfile import RunSpec
from core.orchestration.runs import Queued
from core.store.db import Store

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "tasks"
AXPY = "elementwise/axpy"
STARTER = FIXTURES / "elementwise" / "axpy" / "starter.py"
SIZE = (120, 32)


@pytest.fixture
def store(tmp_path) -> Store:
    with Store.open(tmp_path / "arena.db") as s:
        yield s


@pytest.fixture
def fixed_ids(monkeypatch):
    """Run ids and timestamps that do not change between runs: snapshots show them."""
    monkeypatch.setattr(core.store.rows, "utc_now", lambda: "2026-12-01T00:00:00+00:00")
    monkeypatch.setattr(core.store.db.secrets, "token_hex", lambda n: "abcd"[: 2 * n])


def scripted(store: Store, tmp_path: Path, agents=("ref", "cli", "bad"), **kw) -> ScriptedRun:
    return ScriptedRun(store, (AXPY,), agents, starter=STARTER, folder=tmp_path / "attempts", **kw)


def make_app(run: ScriptedRun, live: bool = True, **kw) -> ArenaApp:
    return ArenaApp(run.source(FIXTURES, live=live), clock=lambda: 100.0, **kw)


async def until(pilot, condition, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting for the app"
        await pilot.pause(0.02)
    await pilot.pause(0.05)


def text_of(static: Static) -> str:
    """What a Static shows, as plain text (its content may be any Rich renderable)."""
    console = Console(width=160, record=True, file=io.StringIO())
    console.print(static.content)
    return console.export_text()


def table_column(app: ArenaApp, column: str) -> list[str]:
    table = app.screen.query_one(DataTable)
    return [str(table.get_cell(row.key, column)) for row in table.ordered_rows]


# -- the queue ---------------------------------------------------------------------------------


def test_queue_follows_the_run_live_then_shows_every_verdict(store, tmp_path):
    gate = asyncio.Event()
    run = scripted(store, tmp_path, gate=gate)

    async def go() -> None:
        app = make_app(run)
        async with app.run_test(size=SIZE) as pilot:
            # Half-way: the agents run, the evaluation job is in its correctness stage.
            await until(pilot, lambda: table_column(app, "state").count("running") == 4)
            assert table_column(app, "stage") == ["agent", "agent", "agent", "correctness"]
            assert table_column(app, "agent") == ["ref", "cli", "bad", "starter"]
            gate.set()
            await until(pilot, lambda: app.run_state == "finished")
            assert table_column(app, "state") == ["done", "failed", "failed", "done"]
            assert table_column(app, "stage") == [
                "",
                "correctness",
                "compile",
                "",
            ]  # where each failed
            assert table_column(app, "ok") == ["✓", "✗", "–", "✓"]
            assert table_column(app, "speedup") == [
                "interp.",
                "–",
                "–",
                "interp.",
            ]  # the cpu device: interpreted
            assert "run r-" in app.sub_title and "finished" in app.sub_title

    asyncio.run(go())


def test_queue_sorts_and_filters_by_state_agent_family_and_device(store, tmp_path):
    run = scripted(store, tmp_path)
    run.play_into_store()

    async def go() -> None:
        app = make_app(run, live=False)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause()
            await pilot.press("slash", *"state:fail")
            await pilot.pause()
            assert table_column(app, "agent") == ["cli", "bad"]
            await pilot.press("escape")  # leaves the filter box
            await pilot.press("escape")  # clears the filter
            await pilot.press("slash", *"agent:re family:elem device:cpu", "enter")
            await pilot.pause()
            assert table_column(app, "agent") == ["ref"]
            await pilot.press("escape")
            await pilot.press("s", "s", "s")  # plan → state → task → agent
            await pilot.pause()
            assert table_column(app, "agent") == ["bad", "cli", "ref", "starter"]
            await pilot.press("r")
            await pilot.pause()
            assert table_column(app, "agent") == ["starter", "ref", "cli", "bad"]
            assert "sort: agent (reversed)" in text_of(
                app.screen.query_one("#queue-status", Static)
            )

    asyncio.run(go())


def test_filter_words_and_fields():
    flt = Filter.parse("state:failed gemm bogus:x")
    assert flt.fields == {"state": "failed"} and flt.words == ("gemm", "bogus:x")


# -- transcripts ---------------------------------------------------------------------------------


def pane_text(pane: TranscriptPane) -> str:
    return "\n".join(line.text for line in pane.query_one(RichLog).lines)


def test_transcripts_show_the_agents_side_by_side_and_fold_long_outputs(store, tmp_path):
    run = scripted(store, tmp_path)

    async def go() -> None:
        app = make_app(run)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: app.run_state == "finished")
            await pilot.press("2")
            await until(
                pilot,
                lambda: (
                    len(app.screen.query(TranscriptPane)) == 3
                    and "Submitted" in pane_text(app.screen.query(TranscriptPane)[0])
                ),
            )
            panes = list(app.screen.query(TranscriptPane))
            assert [p.attempt_id.rsplit("/", 1)[1] for p in panes] == ["1", "2", "3"]
            text = pane_text(panes[1])
            assert (
                "▶ bash" in text and "◀ result" in text and "◀ error" in text
            )  # calls and results apart
            assert "more lines (z unfolds)" in text and "line 14 of solution.py" not in text
            await pilot.press("z")
            await pilot.pause(0.1)
            assert "line 14 of solution.py" in pane_text(panes[1])

    asyncio.run(go())


def test_transcripts_of_a_finished_run_come_from_the_store(store, tmp_path):
    run = scripted(store, tmp_path, agents=("ref", "cli"))
    run.play_into_store()

    async def go() -> None:
        app = make_app(run, live=False)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.press("2")
            await until(pilot, lambda: len(app.screen.query(TranscriptPane)) == 2)
            await until(
                pilot,
                lambda: "Submitted solution.py." in pane_text(app.screen.query(TranscriptPane)[1]),
            )
            assert app.run_state == "viewing"

    asyncio.run(go())


# -- scores, leaderboard, triage -------------------------------------------------------------------


def test_scores_show_stages_workloads_and_times_but_no_interpreted_speedup(store, tmp_path):
    run = scripted(store, tmp_path)
    run.play_into_store()

    async def go() -> None:
        app = make_app(run, live=False)
        async with app.run_test(size=(120, 60)) as pilot:
            await pilot.pause()
            await pilot.press("enter")  # the first row: ref, passed
            await until(pilot, lambda: type(app.screen).__name__ == "ScoresScreen")
            text = text_of(app.screen.query_one("#scores", Static))
            for expected in (
                "passed",
                "generalization",
                "max abs err 3e-07",
                "n=4097 (hidden)",
                "41.7 µs ±4.8%",  # every time with its band (the interquartile spread)
                "interpreted: not a performance figure",
            ):
                assert expected in text, expected
            assert (
                "speedup per workload" not in text and "2.40×" not in text
            )  # the cpu device: no chart of interpreted ratios
            await pilot.press("n", "n")  # the compile failure: its compiler output
            await pilot.pause()
            text = text_of(app.screen.query_one("#scores", Static))
            assert "compile log" in text and "SyntaxError: invalid syntax" in text

    asyncio.run(go())


def test_leaderboard_ranks_this_runs_results_by_timing_kind(store, tmp_path):
    run = scripted(store, tmp_path)

    async def go() -> None:
        app = make_app(run)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.press("4")
            await until(pilot, lambda: app.run_state == "finished")
            await pilot.pause(0.2)
            text = text_of(app.screen.query_one("#boards", Static))
            assert "cpu: for information, never ranked" in text
            assert (
                "ref" in text and "interp." in text and "1.51×" not in text and "starter.py" in text
            )
            await pilot.press("a")
            await pilot.pause()
            assert "every run in the store" in text_of(app.screen.query_one("#board-scope", Static))

    asyncio.run(go())


def test_triage_groups_failures_shows_diff_opens_editor_and_marks_infrastructure(
    store, tmp_path, monkeypatch
):
    run = scripted(store, tmp_path)
    run.play_into_store()
    opened = tmp_path / "opened"
    editor = tmp_path / "editor.sh"
    editor.write_text(f'#!/bin/sh\necho "$1" > {opened}\n')
    editor.chmod(0o755)
    monkeypatch.setenv("VISUAL", str(editor))

    async def go() -> None:
        app = make_app(run, live=False)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.press("5")
            await pilot.pause()
            labels = [str(o.prompt) for o in app.screen.query_one(OptionList).options]
            assert labels[0] == "compile (1)" and labels[2] == "correctness (1)"
            detail = text_of(app.screen.query_one("#failure", Static))
            assert (
                "SyntaxError" in detail and "+BLOCK = 128" in detail and "--- starter.py" in detail
            )
            await pilot.press("e")
            await pilot.pause()
            assert opened.read_text().strip().endswith("_solution.py") and app.last_edited
            await pilot.press("i")  # asks for a note, then keeps the mark in the store
            await pilot.pause()
            assert isinstance(app.screen, NoteScreen)
            await pilot.press(*"flaky", "space", *"node")
            await pilot.press("enter")
            await pilot.pause()
            labels = [str(o.prompt) for o in app.screen.query_one(OptionList).options]
            assert "infrastructure (1)" in labels and "compile (1)" not in labels

    asyncio.run(go())
    marks = [r.infrastructure_marks for r in store.results(run.run_id) if r.infrastructure_marks]
    assert marks == [("flaky node",)]

    async def again() -> None:  # a new session shows the mark; `i` takes it off (no note asked)
        app = make_app(run, live=False)
        async with app.run_test(size=SIZE) as pilot:
            app.selected = next(r.key for r in app.model.rows.values() if r.marked_infrastructure)
            await pilot.press("5")
            await pilot.pause()
            assert "infrastructure (1)" in [
                str(o.prompt) for o in app.screen.query_one(OptionList).options
            ]
            await pilot.press("i")
            await pilot.pause()
            assert "compile (1)" in [
                str(o.prompt) for o in app.screen.query_one(OptionList).options
            ]

    asyncio.run(again())
    assert not any(r.infrastructure_marks for r in store.results(run.run_id))


class FakeControl:
    """What the app asks of a live run's `RunControl`, recorded."""

    live = True

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def cancel_attempt(self, attempt_id: str) -> bool:
        self.calls.append(("cancel", attempt_id))
        return True

    def rerun(self, job_id: int) -> Queued:
        self.calls.append(("rerun", job_id))
        return Queued(99, "r-live")

    def requeue(self, job_id: int, device: str) -> Queued:
        self.calls.append(("requeue", job_id, device))
        return Queued(100, "r-live")


def test_queue_and_triage_keys_cancel_one_attempt_rerun_and_requeue_a_live_run(store, tmp_path):
    gate = asyncio.Event()  # held half-way: the run is live
    run = scripted(store, tmp_path, gate=gate)
    source = run.source(FIXTURES)
    source.control = control = FakeControl()
    source.spec = RunSpec(name="scripted", tasks=(AXPY,), devices=("cpu", "box2/cpu"))

    async def go() -> None:
        app = ArenaApp(source, clock=lambda: 100.0)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: "running" in table_column(app, "state"))
            keys = [row.key.value for row in app.screen.query_one(DataTable).ordered_rows]
            attempt = next(k for k in keys if "/" in k)
            app.screen.query_one(DataTable).move_cursor(row=keys.index(attempt))
            await pilot.press("c")
            app.screen.query_one(DataTable).move_cursor(row=keys.index(run.eval_key))
            await pilot.press("R", "D")
            await pilot.pause()
            assert control.calls == [
                ("cancel", attempt),
                ("rerun", run.eval_job),
                ("requeue", run.eval_job, "box2/cpu"),
            ]
            app.switch_mode("triage")
            await pilot.pause()
            await pilot.press("c")  # triage's selection: the evaluation job is no attempt
            await pilot.pause()
            assert len(control.calls) == 3
            gate.set()
            await until(pilot, lambda: app.run_state == "finished")

    asyncio.run(go())


def test_rerun_of_a_finished_run_opens_a_follow_up_run_with_the_stored_seed(
    store, tmp_path, monkeypatch
):
    run = scripted(store, tmp_path)
    run.play_into_store()
    started = []

    def fake_live_source(
        store_, run_id, spec, factory=None, control=None
    ):  # the follow-up, without the harness
        async def start(on_event, on_attempt):
            started.append(run_id)
            store_.finish_run(run_id, "finished")

        return RunSource(store_, run_id, spec, start, None, control)

    monkeypatch.setattr(arena_app, "live_source", fake_live_source)

    async def go() -> None:
        app = make_app(run, live=False)
        async with app.run_test(size=SIZE) as pilot:
            keys = [row.key.value for row in app.screen.query_one(DataTable).ordered_rows]
            app.screen.query_one(DataTable).move_cursor(row=keys.index(run.eval_key))
            await pilot.press("R")  # no seed was stored for this job: refused, said why
            await pilot.pause()
            assert app.source.run_id == run.run_id and not started
            store.set_job_seed(run.eval_job, 4242)
            await pilot.press("R")
            await until(pilot, lambda: app.run_state == "finished")
            assert started == [app.source.run_id] != [run.run_id]
            assert store.get_run(app.source.run_id).name == f"scripted-rerun-j{run.eval_job}"
            (job,) = store.jobs(app.source.run_id)
            assert job.seed == 4242 and job.device_id == "cpu" and list(app.model.rows) == [job.key]

    asyncio.run(go())


def test_failure_kinds(store, tmp_path):
    run = scripted(store, tmp_path)
    run.play_into_store()
    model = RunModel(store, run.run_id)
    model.reload()
    assert sorted(filter(None, (failure_kind(r) for r in model.rows.values()))) == [
        "compile",
        "correctness",
    ]


# -- cancelling, help, palette ----------------------------------------------------------------------


def test_x_cancels_the_whole_run(store, tmp_path):
    gate = asyncio.Event()  # never set: the run hangs half-way until cancelled
    run = scripted(store, tmp_path, gate=gate)

    async def go() -> None:
        app = make_app(run)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: "running" in table_column(app, "state"))
            await pilot.press("x")
            # said at once, before the seconds that killing agents and harnesses take
            assert any("stopping the run" in n.message for n in app._notifications)
            await until(pilot, lambda: app.run_state == "cancelled")
            assert not any(w.is_running for w in app.workers if w.group == "run")


def test_the_queue_shows_the_running_stage_s_heartbeat(store, tmp_path):
    """Which stage, which workload, how long so far and the limit, under the table."""
    run = scripted(store, tmp_path)
    run.play_into_store()

    async def go() -> None:
        app = make_app(run, live=False)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            job = store.jobs(run.run_id)[0]
            beat = events.Heartbeat("correctness", 84.0, 300.0, "n=4097", 1, 2)
            app.feed(
                [(job.id, events.JobStateChanged(job.key, "running", "cpu", 0, 1)), (job.id, beat)]
            )
            app.flush(force=True)
            await pilot.pause()
            status = text_of(app.screen.query_one("#queue-status", Static))
            assert "correctness: workload n=4097 (2 of 2), 84 s of 300 s" in status, status

    asyncio.run(go())


def test_help_screen_and_a_palette_entry_for_every_action(store, tmp_path):
    run = scripted(store, tmp_path)
    run.play_into_store()

    async def go() -> None:
        app = make_app(run, live=False)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.press("question_mark")
            await pilot.pause()
            assert isinstance(app.screen, HelpScreen)
            await pilot.press("escape")
            await pilot.pause()
            titles = {c.title for c in app.get_system_commands(app.screen)}
            for title in (
                "Show Queue",
                "Show Transcripts",
                "Show Scores",
                "Show Leaderboard",
                "Show Triage",
                "Cancel run",
                "Help",
                "Sort queue",
                "Filter queue",
                "Open scores of the selected row",
            ):
                assert title in titles, title
            for mode in ("transcripts", "scores", "leaderboard", "triage"):
                app.switch_mode(mode)
                await pilot.pause()
                screen_titles = {c.title for c in app.get_system_commands(app.screen)}
                assert (
                    all(t in screen_titles for t, _, _ in type(app.screen).COMMANDS_HERE)
                    and type(app.screen).COMMANDS_HERE
                )
            footer_keys = {b.key for b in app.BINDINGS}
            assert {"1", "2", "3", "4", "5", "question_mark", "x", "q"} <= footer_keys

    asyncio.run(go())


# -- a stream of events -----------------------------------------------------------------------------


def test_app_stays_responsive_under_hundreds_of_events_per_second(store, tmp_path):
    """2 000 transcript events in about 2 s: the app coalesces them into one redraw per tick and
    a key press is handled while the stream is still flowing, not queued behind it.

    Ordering, not a stopwatch, is what this checks: a shared CI machine can stall any process for
    a second, but a key handled before the stream's end cannot have waited behind it."""
    run = scripted(store, tmp_path, agents=("ref", "cli"))
    run.play_into_store()
    attempt = run.attempt_ids[("ref", AXPY)]
    n = 2000
    produced = 0

    async def flood(on_event, on_attempt) -> None:
        nonlocal produced
        for i in range(n):
            on_event(
                None,
                events.TranscriptEvent(attempt, 100 + i, "text", "ref", text=f"token burst {i}"),
            )
            produced += 1
            if i % 20 == 19:
                await asyncio.sleep(0.02)  # ~1 000 events a second

    produced_when_key_handled: list[int] = []

    def hook(message) -> None:
        seen.append(message)
        if isinstance(message, Key) and message.key == "1" and not produced_when_key_handled:
            produced_when_key_handled.append(produced)

    seen: list = []

    async def go() -> None:
        source = run.source(FIXTURES, live=False)
        source.start = flood
        app = ArenaApp(source, clock=lambda: 100.0)
        async with app.run_test(size=SIZE, message_hook=hook) as pilot:
            await pilot.press("2")
            await until(pilot, lambda: app.events_seen >= n // 4, timeout=20)
            await pilot.press("1")
            await until(pilot, lambda: app.current_mode == "queue", timeout=20)
            await until(pilot, lambda: app.run_state == "finished", timeout=30)
        redraws = sum(isinstance(m, RunUpdated) for m in seen)
        assert produced_when_key_handled and produced_when_key_handled[0] < n, (
            "a key press waited behind the stream"
        )
        assert app.events_seen == n
        assert redraws < n / 10, f"{redraws} redraws for {n} events: not coalesced"
        assert len(app.model.transcripts[attempt]) <= 2000  # capped

    asyncio.run(go())


# -- SVG snapshots ----------------------------------------------------------------------------------


SCREEN_KEYS = {
    "queue": (),
    "transcripts": ("2",),
    "scores": ("enter",),
    "scores_times": ("enter", "end"),  # the times table, its long numbers whole at 80 columns
    "leaderboard": ("4",),
    "triage": ("5",),
    "help": ("question_mark",),
}


def long_run(store: Store, tmp_path: Path) -> ScriptedRun:
    """What 80 columns must hold: a long agent name, a run file's long candidate path, times in
    milliseconds, speedups of 123× and 0.01×, predicted bands and a baseline measured on the GPU,
    an evaluation of 1m24s."""
    return ScriptedRun(
        store,
        (AXPY,),
        ("ref", "an-agent-with-a-rather-long-name", "bad"),
        starter=STARTER,
        folder=tmp_path / "attempts",
        device="sim:h200",
        speedups=(123.456, 0.0123, 2.4),
        base_us=12345.6,
        seconds=84.0,
        eval_label="candidates/a-rather-long-folder-name/tuned_kernel_with_a_long_name_v2.py",
    )


@pytest.mark.skipif(
    sys.version_info[:2] != (3, 11), reason="snapshot baselines are made on Python 3.11"
)
@pytest.mark.parametrize("size", [(80, 24), (200, 50)], ids=["80x24", "200x50"])
@pytest.mark.parametrize("screen", list(SCREEN_KEYS))
def test_snapshots(snap_compare, store, tmp_path, fixed_ids, screen, size):
    run = long_run(store, tmp_path)
    run.play_into_store()
    app = make_app(run, live=False)
    assert snap_compare(app, press=list(SCREEN_KEYS[screen]), terminal_size=size)


def test_at_80x24_every_screen_shows_help_and_quit_and_the_queue_keeps_state_and_stage(
    store, tmp_path
):
    from textual.widgets._footer import FooterKey

    run = scripted(store, tmp_path)
    run.play_into_store()

    async def go() -> None:
        app = make_app(run, live=False)
        async with app.run_test(size=(80, 24)) as pilot:
            table = app.screen.query_one(DataTable)
            right = 0
            for column in table.ordered_columns:
                right += column.get_render_width(table)
                if str(column.label) == "stage":
                    break
            assert right <= 80, "the stage column is scrolled off at 80 columns"
            assert (
                table_column(app, "stage")[1] == "correctness"
            )  # a failed row says where it failed
            assert "interp." in table_column(
                app, "speedup"
            )  # the cpu device: no interpreted speedup
            for key in ("1", "2", "3", "4", "5"):
                await pilot.press(key)
                await pilot.pause()
                shown = {k.key: k.region for k in app.screen.query(FooterKey)}
                for needed in ("question_mark", "q"):
                    assert needed in shown and shown[needed].right <= 80, (
                        f"{needed} is not on screen {key}'s footer"
                    )

    asyncio.run(go())


def test_at_80_columns_the_queue_shows_every_number_whole_and_tells_long_names_apart(
    store, tmp_path
):
    """A long task id gives way (its middle elided), so that every column up to `elapsed` is on
    screen whole; a run file's long candidate path keeps its file name."""
    run = long_run(store, tmp_path)
    run.tasks = (AXPY, "gemm/fp8_blockscale_grouped_gemm_with_a_long_name")
    run.__post_init__()
    run.play_into_store()

    async def go() -> None:
        app = make_app(run, live=False)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            table = app.screen.query_one(DataTable)
            right = 0
            for column in table.ordered_columns:
                right += column.get_render_width(table)
                if str(column.label) == "elapsed":
                    break
            assert right <= 80, "a number column is cut at 80 columns"
            assert "1m24s" in table_column(app, "elapsed")
            assert "123.46× ±15%" not in table_column(app, "speedup")  # a mean, not a workload
            assert all(
                "…" not in c for c in table_column(app, "speedup") + table_column(app, "SOL")
            )
            tasks = table_column(app, "task")
            assert any(t.startswith("gemm/") and "…" in t and t.endswith("name") for t in tasks)
            agents = table_column(app, "agent")
            assert "…/tuned_kernel_with_a_long_name_v2.py" in agents, agents

    asyncio.run(go())


def test_the_times_table_lists_every_checked_workload_and_says_why_one_is_untimed(store, tmp_path):
    from rich.console import Console

    from arena_tui.app.widgets.score_card import timing_table

    run = scripted(store, tmp_path)
    run.play_into_store()
    result = next(r.to_result() for r in store.results(run.run_id) if r.status == "passed")
    console = Console(width=120, record=True, file=io.StringIO())  # recorded; nothing printed
    console.print(timing_table(result))
    text = console.export_text()
    checked = {
        (w["label"], s.name)
        for s in result.stages
        if s.name in ("correctness", "generalization")
        for w in s.workloads
    }
    for label, stage in checked:
        assert any(
            line.strip().startswith(label + (" (hidden)" if stage == "generalization" else ""))
            for line in text.splitlines()
        ), label
    assert (
        "drawn hidden shape: checked, not timed" in text
        and "interpreted: not a performance figure" in text
        and "speedup" not in text
    )


# -- the command line ----------------------------------------------------------------------------------


def test_arena_opens_the_app_on_the_default_run_only_when_interactive(monkeypatch, capsys):
    from arena_tui import local_devices
    from arena_tui.app import launch
    from arena_tui.cli import main
    from core.orchestration.runfile import DEFAULT_RUN

    opened = []
    monkeypatch.setattr(
        launch,
        "run_app",
        lambda store, run_id, spec, factory=None, **kw: opened.append((run_id, spec)) or 0,
    )
    assert launch.interactive() is False  # capsys: not a terminal, so the printer as before
    monkeypatch.setattr(launch, "interactive", lambda headless=False: not headless)
    assert main([]) == 0
    assert main(["--tasks-dir", str(FIXTURES)]) == 0
    (_, bundled), (_, fixture) = opened
    # No GPU here: the default run predicts H200 times (sim:h200), never the cpu device's interpreted ones.
    assert (
        bundled.agents == DEFAULT_RUN.agents
        and bundled.tasks == DEFAULT_RUN.tasks
        and bundled.devices == (local_devices.default_device(),)
    )
    assert local_devices.default_device() in ("sim:h200", "cuda:0", "xpu:0")
    assert fixture.tasks == (AXPY,) and fixture.tasks_dir == str(
        FIXTURES
    )  # --tasks-dir: every task there, as the printer does
    import arena_tui.cli

    monkeypatch.setattr(arena_tui.cli, "_demo", lambda args, out: 0)
    assert main(["--headless"]) == 0 and len(opened) == 2  # --headless: the printer, as before


def test_arena_run_runfile_opens_the_app_when_interactive(monkeypatch, tmp_path):
    from arena_tui.app import launch
    from arena_tui.cli import main

    runfile = tmp_path / "run.yaml"
    runfile.write_text(
        "name: mine\ntasks: [elementwise/axpy]\nagents: [{name: ref, kind: reference}]\n"
    )
    opened = []
    monkeypatch.setattr(
        launch, "run_app", lambda store, run_id, spec, factory=None, **kw: opened.append(spec) or 0
    )
    monkeypatch.setattr(launch, "interactive", lambda headless=False: not headless)
    assert main(["--tasks-dir", str(FIXTURES), "run", str(runfile)]) == 0
    assert [s.name for s in opened] == ["mine"]


# -- one real run ------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_the_real_default_run_on_the_axpy_fixture(store):
    from arena_tui.app.source import live_source
    from core.orchestration.runfile import DEFAULT_RUN, RunSpec

    spec = RunSpec(**{**DEFAULT_RUN.__dict__, "tasks": (AXPY,), "tasks_dir": str(FIXTURES)})
    run_id = store.create_run(spec.name, spec.to_json())

    async def go() -> None:
        app = ArenaApp(live_source(store, run_id, spec))
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: app.run_state != "running", timeout=90)
            assert app.run_state == "finished"
            (row,) = app.model.rows.values()
            assert (
                row.kind == "attempt"
                and row.agent == "reference"
                and row.result is not None
                and row.result.passed
            )
            assert table_column(app, "state") == ["done (starter)"], (
                "the default run submits the starter on purpose: labelled so"
            )
            assert app.model.transcript(row.key), "the reference agent's transcript"

    asyncio.run(go())
