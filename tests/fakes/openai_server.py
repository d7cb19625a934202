"""A scripted OpenAI-compatible server on loopback, for the `openai` agent's tests.

    with FakeOpenAI([tool_calls(("write_file", {...})), answer("done")], token="sk-test") as server:
        ... base_url=server.base_url ...
    server.requests[1].body["messages"]  # what the agent sent back

Each POST /v1/chat/completions gets the next canned reply of the script, in order; the server
records every request (path, headers, JSON body) so a test can assert what the agent sent,
e.g. that a tool's result went back to the model. With `token`, a request without
`Authorization: Bearer <token>` gets 401 (and uses up no reply). When the script runs out, 500.
GET /v1/models (the arena's preflight) lists one model and uses up no reply.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self


@dataclass(frozen=True)
class Recorded:
    path: str
    headers: dict[str, str]
    body: Any


@dataclass(frozen=True)
class Reply:
    status: int
    body: dict[str, Any]


def _completion(
    message: dict[str, Any], finish: str, prompt_tokens: int, completion_tokens: int
) -> Reply:
    return Reply(
        200,
        {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": 0,
            "model": "fake-model",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        },
    )


def answer(text: str, prompt_tokens: int = 100, completion_tokens: int = 10) -> Reply:
    """The model answers in prose and calls nothing: the end of an episode."""
    return _completion(
        {"role": "assistant", "content": text}, "stop", prompt_tokens, completion_tokens
    )


def tool_calls(
    *calls: tuple[str, dict[str, Any] | str],
    text: str | None = None,
    prompt_tokens: int = 100,
    completion_tokens: int = 20,
) -> Reply:
    """The model calls functions: (name, arguments) pairs; a str argument is sent as is
    (for malformed JSON). Call ids are call_0, call_1, … within the reply."""
    encoded = [
        {
            "id": f"call_{i}",
            "type": "function",
            "function": {
                "name": name,
                "arguments": args if isinstance(args, str) else json.dumps(args),
            },
        }
        for i, (name, args) in enumerate(calls)
    ]
    return _completion(
        {"role": "assistant", "content": text, "tool_calls": encoded},
        "tool_calls",
        prompt_tokens,
        completion_tokens,
    )


def failure(status: int, message: str = "fake failure") -> Reply:
    return Reply(status, {"error": {"message": message, "type": "server_error"}})


@dataclass
class FakeOpenAI:
    script: list[Reply]
    token: str | None = None
    requests: list[Recorded] = field(default_factory=list)
    base_url: str = ""
    _server: ThreadingHTTPServer | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __enter__(self) -> Self:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw)
                except json.JSONDecodeError:
                    body = raw.decode("utf-8", errors="replace")
                self._send(fake._reply(Recorded(self.path, dict(self.headers.items()), body)))

            def do_GET(
                self,
            ) -> None:  # GET /v1/models: what the arena's preflight asks; uses up no reply
                self._send(fake._models(Recorded(self.path, dict(self.headers.items()), None)))

            def _send(self, reply: Reply) -> None:
                payload = json.dumps(reply.body).encode()
                self.send_response(reply.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.shutdown()
        self._server.server_close()

    def _reply(self, request: Recorded) -> Reply:
        with self._lock:
            self.requests.append(request)
            if request.path.rstrip("/") != "/v1/chat/completions":
                return failure(404, f"no route {request.path}")
            if (
                self.token is not None
                and request.headers.get("Authorization") != f"Bearer {self.token}"
            ):
                return failure(401, "Incorrect API key provided")
            if not self.script:
                return failure(500, "the fake's script is used up")
            return self.script.pop(0)

    def _models(self, request: Recorded) -> Reply:
        with self._lock:
            self.requests.append(request)
            if request.path.rstrip("/") != "/v1/models":
                return failure(404, f"no route {request.path}")
            if (
                self.token is not None
                and request.headers.get("Authorization") != f"Bearer {self.token}"
            ):
                return failure(401, "Incorrect API key provided")
            return Reply(200, {"object": "list", "data": [{"id": "fake-model", "object": "model"}]})

    @property
    def completions(self) -> list[Recorded]:
        return [r for r in self.requests if r.path.rstrip("/") == "/v1/chat/completions"]
