"""`arena serve` end to end on loopback: health, tasks, schema, reset/step with two episodes
interleaved, evaluate (one candidate or a batch), state, close; bad requests answered with 4xx
JSON naming the field; a token required off loopback; no response names a hidden workload;
bodies, requests and evaluations bounded; a shutdown that lets evaluations finish or cancels
them, and records either; full evaluations recorded in the store and announced on the
leaderboard's event stream; `--leaderboard-only` serves no evaluation endpoint."""

from __future__ import annotations

import asyncio
import http.client
import json
import random
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from arena_tui.cli import main
from arena_tui.serve_cmd import RLServer, is_loopback
from arena_tui.web.guard import Limits
from core.evaluation.job import Timing
from core.rl.arena import Arena
from core.store.db import Store
from core.tasks.discovery import find_task
from tests.candidates import AXPY, WRONG, sleeping

FIXTURE_TASKS = Path(__file__).resolve().parent / "fixtures" / "tasks"
FAST = Timing(alternations=1, budget_ms=20.0, min_calls=1, max_calls=5)
HIDDEN_FIXED = "N=33,D=100"


class ServerThread:
    """An RLServer over its own Arena (None: a board only), on its own event loop in a thread."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        token: str | None = None,
        store: Store | None = None,
        limits: Limits = Limits(),
        arena: bool = True,
        grace_s: float = 30.0,
    ):
        self.loop = asyncio.new_event_loop()
        self.arena = Arena(["cpu"], tasks_dir=FIXTURE_TASKS, timing=FAST) if arena else None
        self.server = RLServer(
            self.arena,
            host=host,
            port=0,
            token=token,
            max_turns=3,
            store=store,
            limits=limits,
            grace_s=grace_s,
            tasks_dir=FIXTURE_TASKS,
        )
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        _, self.port = asyncio.run_coroutine_threadsafe(self.server.start(), self.loop).result(30)
        self.closed = False

    def close(self, grace_s: float | None = None) -> None:
        if self.closed:
            return
        self.closed = True

        async def stop() -> None:
            await self.server.aclose(grace_s)
            if self.arena is not None:
                await self.arena.aclose()

        asyncio.run_coroutine_threadsafe(stop(), self.loop).result(90)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


def call(
    port: int,
    method: str,
    path: str,
    body: Any = None,
    token: str | None = None,
    raw: Any = None,
    chunked: bool = False,
) -> tuple[int, dict[str, Any]]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    conn.request(method, path, body=data, headers=headers, encode_chunked=chunked)
    response = conn.getresponse()
    payload = json.loads(response.read() or b"{}")
    conn.close()
    return response.status, payload


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    with Store.open(tmp_path_factory.mktemp("serve") / "arena.db") as store:
        s = ServerThread(store=store)
        yield s
        s.close()


def test_health_tasks_schema(server: ServerThread) -> None:
    status, health = call(server.port, "GET", "/health")
    assert status == 200 and health["status"] == "healthy" and health["devices"] == ["cpu"]
    status, tasks = call(server.port, "GET", "/tasks")
    [axpy] = [t for t in tasks["tasks"] if t["id"] == "elementwise/axpy"]
    assert axpy["signature"].startswith("run(x: float32[N, D]") and axpy["visible_workloads"]["cpu"]
    assert HIDDEN_FIXED not in json.dumps(tasks)
    status, schema = call(server.port, "GET", "/schema")
    assert (
        status == 200
        and set(schema["action"]["properties"]) == {"code", "final"}
        and "observation" in schema
        and "state" in schema
    )


def test_two_episodes_interleaved_end_to_end(server: ServerThread) -> None:
    responses: list[dict[str, Any]] = []
    status, a = call(server.port, "POST", "/reset", {"task_id": "elementwise/axpy", "seed": 1})
    assert (
        status == 200
        and a["done"] is False
        and a["reward"] is None
        and a["observation"]["turn"] == 0
    )
    status, b = call(
        server.port, "POST", "/reset", {"task_id": "elementwise/axpy", "seed": 2, "max_turns": 2}
    )
    assert status == 200 and a["episode_id"] != b["episode_id"]
    ea, eb = a["episode_id"], b["episode_id"]
    responses += [a, b]

    _, a1 = call(
        server.port,
        "POST",
        "/step",
        {"episode_id": ea, "action": {"code": "def run(x, b) return x\n"}},
    )
    _, b1 = call(server.port, "POST", "/step", {"episode_id": eb, "action": {"code": AXPY}})
    _, a2 = call(server.port, "POST", "/step", {"episode_id": ea, "action": {"code": WRONG}})
    _, b2 = call(
        server.port, "POST", "/step", {"episode_id": eb, "action": {"code": WRONG}}
    )  # B's last turn
    _, a3 = call(
        server.port, "POST", "/step", {"episode_id": ea, "action": {"code": AXPY, "final": True}}
    )
    responses += [a1, b1, a2, b2, a3]
    assert (a1["reward"], a2["reward"]) == (-0.5, -0.25) and a1["observation"]["last"][
        "compile_error"
    ]
    assert b1["reward"] > 0 and not b1["done"]
    assert (
        b2["done"]
        and b2["info"]["best_turn"] == 1
        and b2["reward"] == b2["info"]["final_reward"] > 0
    )
    assert (
        a3["done"]
        and a3["info"]["turn_rewards"][:2] == [-0.5, -0.25]
        and a3["observation"]["final"]["hidden"]["status"] == "passed"
    )

    status, state = call(server.port, "GET", f"/state?episode_id={ea}")
    assert (
        status == 200
        and state["done"]
        and state["step_count"] == 3
        and state["final_reward"] == a3["reward"]
    )
    status, state_b = call(server.port, "POST", "/state", {"episode_id": eb})
    assert state_b["step_count"] == 2 and state_b["best_turn"] == 1
    status, over = call(server.port, "POST", "/step", {"episode_id": ea, "action": {"code": AXPY}})
    assert status == 409 and "reset" in over["error"]["message"]

    status, ev = call(
        server.port, "POST", "/evaluate", {"task_id": "elementwise/axpy", "code": AXPY, "seed": 11}
    )
    assert (
        status == 200
        and ev["outcome"] == "correct"
        and ev["reward"] > 0
        and ev["result"]["stages"][2]["status"] == "passed"
    )
    responses.append(ev)
    # Hidden workloads: the fixed one, and the one drawn from the /evaluate seed (core/evaluation/evaluator.py: build_job).
    task = find_task("elementwise/axpy", FIXTURE_TASKS)
    drawn = [w.label for w in task.workloads(cpu=True).hidden.resolve(random.Random(11))]
    for text in {HIDDEN_FIXED, *drawn}:
        assert all(text not in json.dumps(r) for r in responses), f"{text} leaked"

    status, closed = call(server.port, "POST", "/close", {"episode_id": eb})
    assert status == 200 and closed["closed"]
    assert call(server.port, "GET", f"/state?episode_id={eb}")[0] == 404


def test_a_busy_episode_refuses_a_second_step(server: ServerThread) -> None:
    _, r = call(server.port, "POST", "/reset", {"task_id": "elementwise/axpy"})
    eid = r["episode_id"]
    slow = sleeping(0.3)
    first: dict[str, Any] = {}
    t = threading.Thread(
        target=lambda: first.update(
            zip(
                ("status", "body"),
                call(server.port, "POST", "/step", {"episode_id": eid, "action": {"code": slow}}),
            )
        )
    )
    t.start()
    deadline = time.monotonic() + 60
    while not call(server.port, "GET", f"/state?episode_id={eid}")[1].get("busy"):
        assert time.monotonic() < deadline and t.is_alive()
        time.sleep(0.02)
    status, busy = call(server.port, "POST", "/step", {"episode_id": eid, "action": {"code": AXPY}})
    t.join(120)
    assert status == 409 and busy["error"]["field"] == "episode_id"
    assert first["status"] == 200 and first["body"]["observation"]["turn"] == 1


@pytest.mark.parametrize(
    "method, path, body, status, field, words",
    [
        ("POST", "/reset", {}, 400, "task_id", "`task_id` is missing"),
        ("POST", "/reset", {"task_id": "elementwise/axpi"}, 400, "task_id", "unknown task"),
        (
            "POST",
            "/reset",
            {"task_id": "elementwise/axpy", "seed": "x"},
            400,
            "seed",
            "must be a non-negative integer",
        ),
        (
            "POST",
            "/reset",
            {"task_id": "elementwise/axpy", "max_turns": 0},
            400,
            "max_turns",
            "give 1 or more",
        ),
        (
            "POST",
            "/reset",
            {"task_id": "elementwise/axpy", "device": "cuda:0"},
            400,
            "device",
            "not served here",
        ),
        ("POST", "/step", {"action": {"code": AXPY}}, 400, "episode_id", "`episode_id` is missing"),
        (
            "POST",
            "/step",
            {"episode_id": "nope", "action": {"code": AXPY}},
            404,
            "episode_id",
            "POST /reset",
        ),
        (
            "POST",
            "/evaluate",
            {"task_id": "elementwise/axpy", "source": AXPY},
            400,
            "source",
            "`source` is not a field",
        ),
        ("POST", "/evaluate", {"task_id": "elementwise/axpy"}, 400, "code", "`code` is missing"),
        (
            "POST",
            "/evaluate",
            {"task_id": "elementwise/axpy", "code": 3},
            400,
            "code",
            "must be the candidate module's Python source",
        ),
        ("GET", "/reset", None, 405, None, "takes POST"),
        ("GET", "/nowhere", None, 404, None, "no endpoint /nowhere"),
    ],
)
def test_bad_requests_get_4xx_json_naming_the_field(
    server: ServerThread,
    method: str,
    path: str,
    body: Any,
    status: int,
    field: str | None,
    words: str,
) -> None:
    got, payload = call(server.port, method, path, body)
    assert (
        got == status
        and payload["error"]["field"] == field
        and words in payload["error"]["message"]
    ), payload


def test_bad_bodies(server: ServerThread) -> None:
    _, r = call(server.port, "POST", "/reset", {"task_id": "elementwise/axpy"})
    status, payload = call(
        server.port, "POST", "/step", {"episode_id": r["episode_id"], "action": {"source": AXPY}}
    )
    assert (
        status == 400
        and payload["error"]["field"] == "action.source"
        and "action.code" in payload["error"]["message"]
    )
    status, payload = call(server.port, "POST", "/reset", raw=b"{not json")
    assert status == 400 and "not valid JSON" in payload["error"]["message"]
    status, payload = call(server.port, "POST", "/reset", raw=b"[1, 2]")
    assert status == 400 and "send one JSON object" in payload["error"]["message"]


def test_token_required_off_loopback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        is_loopback("127.0.0.1")
        and is_loopback("::1")
        and is_loopback("localhost")
        and not is_loopback("0.0.0.0")
    )
    with pytest.raises(ValueError, match=r"refusing to serve on 0\.0\.0\.0 without a token"):
        RLServer(Arena(["cpu"]), host="0.0.0.0")
    monkeypatch.delenv("ARENA_SERVE_TOKEN", raising=False)
    assert main(["serve", "--host", "0.0.0.0", "--port", "0"]) == 2
    assert "without a token" in capsys.readouterr().err

    s = ServerThread(host="0.0.0.0", token="s3cret")
    try:
        assert call(s.port, "GET", "/health")[0] == 200  # health needs no token
        status, payload = call(s.port, "GET", "/tasks")
        assert status == 401 and "Authorization: Bearer" in payload["error"]["message"]
        assert call(s.port, "GET", "/tasks", token="wrong")[0] == 401
        assert call(s.port, "GET", "/tasks", token="s3cret")[0] == 200
    finally:
        s.close()


# --- the web stack: OpenAPI, limits, batches, recording, shutdown, the event stream ----------


def test_openapi_documents_every_endpoint(server: ServerThread) -> None:
    status, doc = call(server.port, "GET", "/openapi.json")
    assert status == 200 and doc["openapi"].startswith("3.")
    assert {
        "/health",
        "/reset",
        "/step",
        "/evaluate",
        "/state",
        "/close",
        "/tasks",
        "/schema",
    } <= set(doc["paths"])
    assert doc["components"]["schemas"]["reset"]["required"] == ["task_id"]
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    conn.request("GET", "/docs")
    page = conn.getresponse()
    assert (
        page.status == 200
        and page.getheader("content-type").startswith("text/html")
        and b"openapi.json" in page.read()
    )


def test_a_batch_goes_through_the_core_batch_api_in_order(
    server: ServerThread, monkeypatch: pytest.MonkeyPatch
) -> None:
    batches: list[int] = []
    real = server.arena.aevaluate_many

    async def spy(requests, reward=None):
        batches.append(len(requests))
        return await real(requests, reward)

    monkeypatch.setattr(server.arena, "aevaluate_many", spy)
    status, out = call(
        server.port,
        "POST",
        "/evaluate",
        {
            "candidates": [
                {"task_id": "elementwise/axpy", "code": AXPY, "seed": 3},
                {"task_id": "elementwise/axpy", "code": WRONG, "seed": 3},
            ]
        },
    )
    assert status == 200 and batches == [2]
    assert [r["outcome"] for r in out["results"]] == ["correct", "incorrect"]
    assert HIDDEN_FIXED not in json.dumps(out)
    status, bad = call(
        server.port,
        "POST",
        "/evaluate",
        {
            "candidates": [
                {"task_id": "elementwise/axpy", "code": AXPY},
                {"task_id": "elementwise/axpy"},
            ]
        },
    )
    assert status == 400 and bad["error"]["field"] == "candidates[1].code" and batches == [2]


def test_bodies_over_the_limit_are_refused_with_or_without_a_length(tmp_path: Path) -> None:
    # The door (arena_tui/web/guard.py) measures every body before any route reads it.
    with Store.open(tmp_path / "arena.db") as store:
        s = ServerThread(store=store, arena=False, limits=Limits(max_body=4096))
        try:
            big = json.dumps({"task_id": "elementwise/axpy", "code": "#" * 8000}).encode()
            status, payload = call(s.port, "POST", "/evaluate", raw=big)
            assert status == 413 and "more than the 4096 allowed" in payload["error"]["message"]
            status, payload = call(
                s.port, "POST", "/evaluate", raw=iter([big[:3000], big[3000:]]), chunked=True
            )
            assert status == 413 and "4096 bytes allowed" in payload["error"]["message"]
            status, _ = call(
                s.port,
                "POST",
                "/evaluate",
                raw=iter([b'{"task_id": ', b'"elementwise/axpy"}']),
                chunked=True,
            )
            assert (
                status == 404
            )  # a small chunked body passes the door (and this board-only server has no /evaluate)
        finally:
            s.close()


def _post_in_thread(port: int, path: str, body: Any) -> tuple[threading.Thread, dict[str, Any]]:
    got: dict[str, Any] = {}
    t = threading.Thread(
        target=lambda: got.update(zip(("status", "body"), call(port, "POST", path, body)))
    )
    t.start()
    return t, got


def _wait_until(predicate: Any, what: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def test_evaluations_past_the_queue_limit_get_429(
    server: ServerThread, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(server.server.rl, "max_queue", 1)
    t, first = _post_in_thread(
        server.port,
        "/evaluate",
        {"task_id": "elementwise/axpy", "code": sleeping(0.5), "visible_only": True},
    )
    _wait_until(
        lambda: call(server.port, "GET", "/health")[1]["evaluations"] == 1, "the first evaluation"
    )
    status, payload = call(
        server.port, "POST", "/evaluate", {"task_id": "elementwise/axpy", "code": AXPY}
    )
    t.join(120)
    assert status == 429 and "--max-queue" in payload["error"]["message"]
    assert first["status"] == 200 and first["body"]["outcome"] == "correct"


def test_full_evaluations_are_recorded_and_announced_on_the_event_stream(
    server: ServerThread,
) -> None:
    stream = socket.create_connection(("127.0.0.1", server.port), timeout=60)
    stream.sendall(b"GET /api/events HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n")
    seen = b""
    while b"event: hello" not in seen:
        seen += stream.recv(4096)
    assert b"200 OK" in seen and b"text/event-stream" in seen
    assert (
        call(
            server.port,
            "POST",
            "/evaluate",
            {"task_id": "elementwise/axpy", "code": WRONG, "visible_only": True},
        )[0]
        == 200
    )  # a draft: not kept
    status, _ = call(
        server.port,
        "POST",
        "/evaluate",
        {"task_id": "elementwise/axpy", "code": AXPY, "agent": "policy-7"},
    )
    assert status == 200
    while b"event: results" not in seen:
        seen += stream.recv(4096)
    stream.close()
    event = json.loads(seen.split(b"event: results\ndata: ")[1].split(b"\n")[0])
    [landed] = event["results"]
    assert (
        landed["agent"] == "policy-7"
        and landed["status"] == "passed"
        and landed["timing_kind"] == "cpu"
    )
    status, boards = call(server.port, "GET", "/api/boards")
    [entry] = [e for e in boards["boards"]["cpu"]["entries"] if e["agent"] == "policy-7"]
    assert [r["job_id"] for r in entry["result_list"]] == [landed["job_id"]] and entry[
        "family"
    ] == "elementwise"
    status, detail = call(server.port, "GET", f"/api/results/{landed['job_id']}")
    assert (
        status == 200
        and detail["source"] == AXPY
        and detail["result"]["stages"][2]["status"] == "passed"
    )
    assert HIDDEN_FIXED not in json.dumps(detail) and HIDDEN_FIXED not in json.dumps(boards)
    assert call(server.port, "GET", "/api/results/99999")[0] == 404
    store = server.server.feed.store
    assert (
        store.get_job(landed["job_id"]).state == "done"
        and store.get_run(landed["run_id"]).name == "serve"
    )


def test_an_episodes_final_evaluation_is_recorded_under_its_agent(server: ServerThread) -> None:
    _, r = call(
        server.port,
        "POST",
        "/reset",
        {"task_id": "elementwise/axpy", "max_turns": 1, "agent": "ep-agent", "seed": 5},
    )
    _, done = call(
        server.port, "POST", "/step", {"episode_id": r["episode_id"], "action": {"code": AXPY}}
    )
    assert done["done"] and done["reward"] > 0
    store = server.server.feed.store
    [row] = [
        x for x in store.recorded_since(None) if x["agent"] == "ep-agent"
    ]  # the final only: turns are drafts
    assert row["status"] == "passed" and store.get_job(row["job_id"]).variant == "episode"


def test_a_shutdown_lets_evaluations_finish_within_the_grace_and_cancels_the_rest(
    tmp_path: Path,
) -> None:
    with Store.open(tmp_path / "arena.db") as store:
        s = ServerThread(store=store)
        assert (
            call(
                s.port,
                "POST",
                "/evaluate",
                {"task_id": "elementwise/axpy", "code": AXPY, "visible_only": True},
            )[0]
            == 200
        )  # a warm harness
        quick, got_quick = _post_in_thread(
            s.port, "/evaluate", {"task_id": "elementwise/axpy", "code": sleeping(0.05), "seed": 1}
        )
        _wait_until(
            lambda: (
                call(s.port, "GET", "/health")[1]["evaluations"] == 1
                and len(s.arena.scheduler.running) == 1
            ),
            "the first evaluation to be running",
        )  # first in line: on the one slot (queued only, the second could overtake it)
        slow, got_slow = _post_in_thread(
            s.port, "/evaluate", {"task_id": "elementwise/axpy", "code": sleeping(60), "seed": 1}
        )
        _wait_until(
            lambda: call(s.port, "GET", "/health")[1]["evaluations"] == 2,
            "both evaluations to be queued",
        )
        threading.Timer(
            0.3,
            lambda: got_slow.setdefault(
                "during", call(s.port, "POST", "/reset", {"task_id": "elementwise/axpy"})
            ),
        ).start()
        s.close(grace_s=15.0)  # the quick one makes ~30 calls (hidden sets are half drawn now)
        quick.join(60)
        slow.join(60)
        assert got_quick["status"] == 200 and got_quick["body"]["outcome"] == "correct", (
            got_quick
        )  # finished within the grace
        assert (
            got_slow["status"] == 503 and "cancelled" in got_slow["body"]["error"]["message"]
        )  # outlasted it
        assert (
            got_slow["during"][0] == 503
            and "shutting down" in got_slow["during"][1]["error"]["message"]
        )  # nothing new while draining
        assert s.server.drained == (1, 1)
        [run] = store.list_runs()
        assert (
            run.status == "interrupted"
            and run.job_states == {"done": 1, "cancelled": 1}
            and run.result_statuses == {"passed": 1}
        )


def test_leaderboard_only_serves_the_board_and_no_evaluation(tmp_path: Path) -> None:
    with Store.open(tmp_path / "arena.db") as store:
        s = ServerThread(
            host="0.0.0.0", store=store, arena=False
        )  # public and read-only: no token needed
        try:
            status, boards = call(s.port, "GET", "/api/boards")
            assert status == 200 and boards["boards"] == {}
            status, bad = call(s.port, "GET", "/api/boards?by=country")
            assert (
                status == 400
                and bad["error"]["field"] == "by"
                and "model, vendor" in bad["error"]["message"]
            )
            for path in ("/reset", "/evaluate", "/step"):
                status, payload = call(
                    s.port, "POST", path, {"task_id": "elementwise/axpy", "code": AXPY}
                )
                assert status == 404 and "no endpoint" in payload["error"]["message"]
            conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=30)
            conn.request("GET", "/")
            page = conn.getresponse()
            assert page.status == 200 and b"static/leaderboard.js" in page.read()
            assert "/evaluate" not in call(s.port, "GET", "/openapi.json")[1]["paths"]
        finally:
            s.close()
