"""The leaderboard page in a real headless Chromium, as a person uses it: the boards load, a
filter narrows them, a result recorded after the page loaded appears without a reload (over
the server-sent events), an entry opens its plots and results, a result its verdicts,
per-workload times and source, and no hidden workload is ever shown. The static snapshot
(`arena leaderboard --html`) filters and opens details with no server behind it.

Chromium is Debian's `chromium` (.ci/run installs it); without it these tests skip locally
and fail under CI=true."""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest

from arena_tui.cli import main
from arena_tui.web.app import WebServer
from core.store.db import Store
from tests.chromium import Chromium, find_chromium
from tests.web_sample import H200, HIDDEN_LABEL, MI300, add, fill

if find_chromium() is None:
    if os.environ.get("CI") == "true":
        raise RuntimeError(
            "CI=true but no chromium on PATH: .ci/run installs it (apt-get install chromium)"
        )
    pytest.skip(
        "no chromium on PATH (apt-get install chromium); CI runs these", allow_module_level=True
    )

ENTRY_ROWS = "[...document.querySelectorAll('tr.entry')]"


@pytest.fixture(scope="module")
def browser() -> Iterator[Chromium]:
    with Chromium() as b:
        yield b


@pytest.fixture
def board(tmp_path: Path) -> Iterator[tuple[Store, int]]:
    """A store with one run of sample results, served read-only on loopback; yields the test's
    own handle on the store (another connection, as `arena run` in another process would be)."""
    path = tmp_path / "arena.db"
    with Store.open(path) as writer, Store.open(path) as served:
        fill(writer, tmp_path / "candidates", runs=1)
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, daemon=True)
        thread.start()
        server = WebServer(None, port=0, store=served, poll_s=0.1)
        _, port = asyncio.run_coroutine_threadsafe(server.start(), loop).result(30)
        try:
            yield writer, port
        finally:
            asyncio.run_coroutine_threadsafe(server.aclose(), loop).result(30)
            loop.call_soon_threadsafe(loop.stop)
            thread.join(10)


def choose(page, name: str, value: str) -> None:
    """Pick an option the way a person's click on it does: the select changes and says so."""
    page.eval(
        f"(() => {{ const s = document.getElementById('f-{name}'); s.value = {json.dumps(value)};"
        " s.dispatchEvent(new Event('change', {bubbles: true})); })()"
    )


def test_a_result_recorded_after_the_page_loaded_appears_without_a_reload(
    browser: Chromium, board: tuple[Store, int], tmp_path: Path
) -> None:
    store, port = board
    page = browser.page(1280, 900)
    page.goto(f"http://127.0.0.1:{port}/")
    page.wait_for(
        "document.getElementById('live').dataset.state === 'live' && Number(document.body.dataset.entries) > 0"
    )
    assert page.eval(
        "[...document.querySelectorAll('section.board')].map(s => s.dataset.kind)"
    ) == ["measured", "predicted", "cpu"]
    assert page.eval(f"{ENTRY_ROWS}.some(r => r.dataset.agent === 'reward-hacker')")
    page.eval("window.loadedOnce = true")  # gone if the page reloads

    choose(page, "family", "gemm")
    families = page.eval(f"{ENTRY_ROWS}.map(r => r.dataset.entryId.split('|')[1])")
    assert families and set(families) == {"gemm"}
    assert "family=gemm" in page.eval("location.search")
    choose(page, "vendor", "amd")
    assert set(page.eval(f"{ENTRY_ROWS}.map(r => r.dataset.entryId.split('|')[2])")) == {
        MI300["model"]
    }
    choose(page, "vendor", "")

    version = int(page.eval("document.body.dataset.version"))
    add(
        store,
        store.list_runs()[0].id,
        tmp_path / "candidates",
        "newcomer",
        "gemm/bf16_gemm",
        3.5,
        H200,
        model="m-1",
    )
    add(
        store,
        store.list_runs()[0].id,
        tmp_path / "candidates",
        "elsewhere",
        "norm/rmsnorm",
        2.0,
        H200,
    )
    page.wait_for(f"{ENTRY_ROWS}.some(r => r.dataset.agent === 'newcomer')", timeout_s=20)
    assert page.eval("window.loadedOnce === true"), "the page reloaded"
    assert int(page.eval("document.body.dataset.version")) > version
    assert page.eval("document.getElementById('f-family').value") == "gemm"
    assert not page.eval(
        f"{ENTRY_ROWS}.some(r => r.dataset.agent === 'elsewhere')"
    )  # landed, but filtered out
    rank = page.eval(
        f"{ENTRY_ROWS}.find(r => r.dataset.agent === 'newcomer' && r.dataset.kind === 'measured').cells[0].textContent"
    )
    assert rank == "1"  # 3.5× beats every sample entry on gemm · H200

    page.eval(f"{ENTRY_ROWS}.find(r => r.dataset.agent === 'newcomer').click()")
    page.wait_for("!document.getElementById('detail').hidden")
    assert (
        page.eval("document.querySelectorAll('#detail figure.chart svg').length") == 3
    )  # per-task speedup, SOL, history
    assert "newcomer (m-1)" in page.eval("document.querySelector('#detail h2').textContent")
    page.eval("document.querySelector('#detail tr.result a').click()")
    page.wait_for("document.querySelector('#result pre.source') !== null")
    text = page.eval("document.getElementById('result').innerText")
    assert "correctness" in text and "passed" in text and "hidden#1" in text and "42.0 µs" in text
    assert "# newcomer on gemm/bf16_gemm" in page.eval(
        "document.querySelector('#result pre.source').textContent"
    )
    assert HIDDEN_LABEL not in page.eval("document.body.innerText")


def test_the_static_snapshot_filters_and_opens_details_offline(
    browser: Chromium, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "arena.db"
    with Store.open(db) as store:
        fill(store, tmp_path / "candidates", runs=2)
    monkeypatch.setenv("ARENA_DB", str(db))
    out = tmp_path / "board.html"
    assert (
        main(["leaderboard", "--html", str(out), "--family", "norm"]) == 0
    )  # opens on norm; every board is inside
    html = out.read_text()
    assert (
        "static/leaderboard.js" not in html and HIDDEN_LABEL not in html
    )  # one file; hidden workloads never named
    page = browser.page(390, 844, mobile=True)
    page.goto(out.as_uri())
    page.wait_for("Number(document.body.dataset.entries) > 0")
    assert page.eval("document.getElementById('f-family').value") == "norm"
    assert page.eval("document.getElementById('live').textContent").startswith("snapshot of")
    assert set(page.eval(f"{ENTRY_ROWS}.map(r => r.dataset.entryId.split('|')[1])")) == {"norm"}
    choose(page, "family", "")
    assert {"gemm", "attention", "norm"} <= set(
        page.eval(f"{ENTRY_ROWS}.map(r => r.dataset.entryId.split('|')[1])")
    )
    entry = "measured|norm|NVIDIA H200|codex|gpt-5"
    page.eval(
        f"location.hash = {json.dumps('entry=' + quote(entry, safe=''))}"
    )  # a link to an entry
    page.wait_for("!document.getElementById('detail').hidden")
    assert (
        page.eval("document.getElementById('f-family').value") == ""
    )  # the cleared filter stays cleared
    history = page.eval(
        "document.querySelectorAll('#detail figure.chart')[2].querySelectorAll('circle').length"
    )
    assert history == 2  # one point per run
    page.eval("document.querySelector('#detail tr.result a').click()")
    page.wait_for("document.querySelector('#result pre.source') !== null")
    assert "stage" in page.eval("document.getElementById('result').innerText")

    # cpu times are Triton interpreted: never a speedup, a SOL or a bar, on the board or in details
    cpu = page.eval(
        f"{ENTRY_ROWS}.filter(r => r.dataset.kind === 'cpu').map(r => [r.cells[5].textContent, r.cells[6].textContent, r.querySelectorAll('svg').length])"
    )
    assert cpu and all(c == ["interp.", "interp.", 0] for c in cpu), cpu
    page.eval(f"{ENTRY_ROWS}.find(r => r.dataset.kind === 'cpu').click()")
    page.wait_for("!document.getElementById('detail').hidden")
    detail = page.eval("document.getElementById('detail').innerText")
    assert "×" not in detail and "interpreted: not a performance figure" in detail, detail
    assert page.eval("document.querySelectorAll('#detail figure.chart').length") == 0
    # an entry with no correct result (the caught cheat) is not ranked and has no speedup of its own
    hacker = page.eval(
        f"[...{ENTRY_ROWS}.find(r => r.dataset.agent === 'reward-hacker').cells].map(c => c.textContent)"
    )
    assert hacker[0] == "–" and hacker[5] == "–" and hacker[-1] == "1", hacker
