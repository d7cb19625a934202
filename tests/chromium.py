"""A headless Chromium driven over the DevTools protocol on a pipe (`--remote-debugging-pipe`):
the browser a person uses, with no driver binary and no Python package beyond the standard
library. Used by tests/test_web.py and tools/web_screenshots.py.

    with Chromium() as browser:
        page = browser.page(1280, 900)
        page.goto("http://127.0.0.1:8765/")
        page.wait_for("document.body.dataset.entries === '3'")
        page.screenshot(Path("board.png"))
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

# As root (CI) Chromium needs --no-sandbox; the rest keep it from reaching the network or
# writing outside its fresh profile.
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-dev-shm-usage",
    "--disable-extensions",
    "--mute-audio",
    "--hide-scrollbars",
    "--remote-debugging-pipe",
]


def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        if found := shutil.which(name):
            return found
    return None


class BrowserError(RuntimeError):
    pass


class Chromium:
    def __init__(self, binary: str | None = None, timeout_s: float = 30.0):
        binary = binary or find_chromium()
        if binary is None:
            raise BrowserError("no chromium on PATH: apt-get install chromium")
        self.timeout_s = timeout_s
        self.profile = tempfile.mkdtemp(prefix="arena-chromium-")
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()

        def fds() -> None:  # the protocol pipe is fds 3 (commands in) and 4 (answers out)
            os.dup2(to_browser_r, 3)
            os.dup2(from_browser_w, 4)

        self.proc = subprocess.Popen(
            [binary, *FLAGS, f"--user-data-dir={self.profile}", "about:blank"],
            preexec_fn=fds,  # noqa: PLW1509 - Chromium reads its pipe at fds 3 and 4: only a dup2 in the child puts it there
            pass_fds=(3, 4),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._next = 0
        self._lock = threading.Lock()
        self._answers: dict[int, dict[str, Any]] = {}
        self._events: list[dict[str, Any]] = []
        self._arrived = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        buffer = b""
        while True:
            chunk = os.read(self._from_browser, 1 << 16)
            if not chunk:
                break
            buffer += chunk
            *messages, buffer = buffer.split(b"\0")
            with self._arrived:
                for raw in messages:
                    msg = json.loads(raw)
                    if "id" in msg:
                        self._answers[msg["id"]] = msg
                    else:
                        self._events.append(msg)
                self._arrived.notify_all()
        with self._arrived:
            self._arrived.notify_all()

    def send(
        self, method: str, params: dict[str, Any] | None = None, session: str | None = None
    ) -> dict[str, Any]:
        with self._lock:
            self._next += 1
            ident = self._next
        msg: dict[str, Any] = {"id": ident, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._to_browser, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + self.timeout_s
        with self._arrived:
            while ident not in self._answers:
                left = deadline - time.monotonic()
                if left <= 0 or self.proc.poll() is not None:
                    raise BrowserError(
                        f"{method}: no answer from chromium in {self.timeout_s:g} s (exit {self.proc.poll()})"
                    )
                self._arrived.wait(min(left, 0.5))
            answer = self._answers.pop(ident)
        if "error" in answer:
            raise BrowserError(f"{method}: {answer['error']}")
        return answer.get("result", {})

    def wait_event(
        self, method: str, session: str | None, timeout_s: float | None = None
    ) -> dict[str, Any]:
        deadline = time.monotonic() + (timeout_s or self.timeout_s)
        with self._arrived:
            while True:
                for i, e in enumerate(self._events):
                    if e.get("method") == method and e.get("sessionId") == session:
                        return self._events.pop(i)
                left = deadline - time.monotonic()
                if left <= 0:
                    raise BrowserError(f"no {method} in time")
                self._arrived.wait(min(left, 0.5))

    def page(self, width: int = 1280, height: int = 900, mobile: bool = False) -> Page:
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})[
            "sessionId"
        ]
        page = Page(self, session)
        page.resize(width, height, mobile)
        for domain in ("Page", "Runtime"):
            self.send(f"{domain}.enable", session=session)
        return page

    def close(self) -> None:
        try:
            self.send("Browser.close")
        except BrowserError:
            pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        for fd in (self._to_browser, self._from_browser):
            try:
                os.close(fd)
            except OSError:
                pass
        shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> Chromium:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Page:
    def __init__(self, browser: Chromium, session: str):
        self.browser, self.session = browser, session
        self.width, self.height, self.mobile = 1280, 900, False

    def send(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        return self.browser.send(method, params, self.session)

    def resize(self, width: int, height: int, mobile: bool = False) -> None:
        self.width, self.height, self.mobile = width, height, mobile
        self.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile},
        )

    def goto(self, url: str) -> None:
        self.send("Page.navigate", {"url": url})
        self.browser.wait_event("Page.loadEventFired", self.session)

    def eval(self, expression: str) -> Any:
        answer = self.send(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
        )
        if "exceptionDetails" in answer:
            raise BrowserError(
                f"{expression[:80]}: {answer['exceptionDetails'].get('exception', {}).get('description') or answer['exceptionDetails']}"
            )
        return answer["result"].get("value")

    def wait_for(self, expression: str, timeout_s: float = 20.0) -> Any:
        deadline = time.monotonic() + timeout_s
        while True:
            value = self.eval(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise BrowserError(f"timed out after {timeout_s:g} s waiting for {expression}")
            time.sleep(0.05)

    def screenshot(self, path: Path, full_page: bool = True) -> None:
        if full_page:
            height = int(self.eval("Math.ceil(document.documentElement.scrollHeight)"))
            self.send(
                "Emulation.setDeviceMetricsOverride",
                {
                    "width": self.width,
                    "height": max(height, self.height),
                    "deviceScaleFactor": 1,
                    "mobile": self.mobile,
                },
            )
        data = self.send("Page.captureScreenshot", {"format": "png"})["data"]
        if full_page:
            self.resize(self.width, self.height, self.mobile)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))
