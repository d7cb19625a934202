"""PNG screenshots of the leaderboard page at desktop and phone widths into docs/screenshots/.

    python tools/web_screenshots.py

It fills a temporary store with sample results (tests/web_sample.py), serves it read-only
(`arena serve --leaderboard-only`) on loopback, and drives headless Chromium (tests/chromium.py):
the boards, one entry's details with its plots, and one result's verdicts."""

from __future__ import annotations

import asyncio
import tempfile
import threading
from pathlib import Path

from arena_tui.web.app import WebServer
from core.store.db import Store
from tests.chromium import Chromium
from tests.web_sample import fill

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "screenshots"
SIZES = {"desktop": (1280, 900, False), "phone": (390, 844, True)}


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp, Store.open(Path(tmp) / "arena.db") as store:
        fill(store, Path(tmp) / "candidates")
        loop = asyncio.new_event_loop()
        threading.Thread(target=loop.run_forever, daemon=True).start()
        server = WebServer(None, port=0, store=store)
        _, port = asyncio.run_coroutine_threadsafe(server.start(), loop).result(30)
        try:
            with Chromium() as browser:
                for name, (w, h, mobile) in SIZES.items():
                    page = browser.page(w, h, mobile)
                    page.goto(f"http://127.0.0.1:{port}/")
                    page.wait_for(
                        "document.getElementById('live').dataset.state === 'live' && Number(document.body.dataset.entries) > 0"
                    )
                    page.screenshot(OUT / f"web-leaderboard-{name}.png", full_page=False)
                    page.goto(
                        f"http://127.0.0.1:{port}/?family=gemm#entry="
                        + "measured|gemm|NVIDIA H200|claude-code|opus".replace("|", "%7C").replace(
                            " ", "%20"
                        )
                    )
                    page.wait_for("!document.getElementById('detail').hidden")
                    page.eval("document.querySelector('#detail tr.result a').click()")
                    page.wait_for("document.querySelector('#result pre.source') !== null")
                    page.eval("document.getElementById('detail').scrollIntoView()")
                    page.screenshot(OUT / f"web-entry-{name}.png", full_page=True)
                    print(
                        f"wrote docs/screenshots/web-leaderboard-{name}.png, web-entry-{name}.png"
                    )
        finally:
            asyncio.run_coroutine_threadsafe(server.aclose(), loop).result(30)
            loop.call_soon_threadsafe(loop.stop)


if __name__ == "__main__":
    main()
