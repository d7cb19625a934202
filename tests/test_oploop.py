"""The op loop every harness worker runs (core/harness/oploop.py): one handler per op, one reply
per request, whatever the handler does; and a timed round's parameters (timing.Round)."""

from __future__ import annotations

import socket
import threading

import pytest

from core.harness import channel, oploop, timing


def _serve(handlers, child=None, **kwargs):
    """A worker's loop in a thread; the parent's end of its channel."""
    parent, child = socket.socketpair() if child is None else (None, child)
    thread = threading.Thread(
        target=oploop.serve,
        args=(child, oploop.dispatch(handlers)),
        kwargs={"error": lambda exc: {"ok": False, "error": str(exc)}, **kwargs},
        daemon=True,
    )
    thread.start()
    return parent, thread


def _ask(conn, header, payload=None):
    channel.send(conn, header, payload)
    return channel.recv(conn, 5.0)


def test_each_op_goes_to_its_handler_and_every_request_gets_one_reply():
    parent, child = socket.socketpair()

    def answer_itself(msg, _payload):  # e.g. a reply that a descriptor follows
        channel.send(child, {"ok": True, "self": msg["n"]})

    def fail(_msg, _payload):
        raise ValueError("the task's reference failed")

    handlers = {
        "echo": lambda msg, payload: ({"ok": True, "n": msg["n"]}, bytes(payload or b"")),
        "note": lambda _msg, _payload: None,  # takes no reply
        "fail": fail,
        "own": answer_itself,
    }
    seen = []
    _, thread = _serve(handlers, child, after=lambda op, reply: seen.append(op))
    assert _ask(parent, {"op": "echo", "n": 1}, b"xyz") == ({"ok": True, "n": 1}, bytearray(b"xyz"))
    channel.send(parent, {"op": "note"})  # nothing comes back: the next reply is the next op's
    assert _ask(parent, {"op": "fail"})[0] == {"ok": False, "error": "the task's reference failed"}
    assert _ask(parent, {"op": "own", "n": 2})[0] == {"ok": True, "self": 2}
    assert _ask(parent, {"op": "nope"})[0] == {"ok": False, "error": "unknown op nope"}
    assert _ask(parent, {"op": "exit"})[0] == {"ok": True}
    thread.join(5)
    assert not thread.is_alive()
    # `after` sees every reply the loop sends, errors too, and none a handler sent itself
    assert seen == ["echo", "fail", "nope"]


def test_the_loop_ends_when_the_parent_closes_the_channel():
    parent, thread = _serve({})
    parent.close()
    thread.join(5)
    assert not thread.is_alive()


def test_a_round_is_read_from_a_time_request():
    msg = {"budget_ms": 10.0, "min_calls": 3, "max_calls": 50, "first_index": 7, "graph": False}
    rnd = timing.Round.from_request(msg)
    assert rnd == timing.Round(10.0, 3, 50, 7, False, sync_each_call=False)
    assert [rnd.calls_for(ms) for ms in (100.0, 1.0, 0.0)] == [3, 10, 50]
    with pytest.raises(KeyError):
        timing.Round.from_request({"budget_ms": 10.0})


def test_an_error_reply_leads_with_the_code_that_raised_not_the_harness(tmp_path):
    """A candidate's exception reaches it through the op loop and the import machinery; the
    reply's traceback starts at the candidate's own line, as if it had run on its own, and a
    syntax error is its file, line and caret."""
    from core.harness import worker_tools

    raising = tmp_path / "crash.py"
    raising.write_text("def helper():\n    raise ValueError('my kernel')\n\nhelper()\n")
    broken = tmp_path / "syntax.py"
    broken.write_text("def run(x)\n    return x\n")
    # The handler as the harness runs it: a frame in core/harness that calls the candidate.
    handler = "def handle(path, name):\n    try:\n        import_file(path, name)\n    except Exception as exc:\n        return error_reply(exc)\n"
    scope = {"import_file": worker_tools.import_file, "error_reply": worker_tools.error_reply}
    exec(compile(handler, str(worker_tools.HARNESS_DIR / "oploop.py"), "exec"), scope)

    reply = scope["handle"](raising, "crash_mod")
    lines = reply["traceback"].splitlines()
    assert lines[0] == "Traceback (most recent call last):" and "crash.py" in lines[1], lines
    assert "core/harness" not in reply["traceback"] and "importlib" not in reply["traceback"]
    assert lines[-1] == "ValueError: my kernel" and reply["error"] == "ValueError: my kernel"

    reply = scope["handle"](broken, "syntax_mod")
    assert reply["traceback"].lstrip().startswith(f'File "{broken}", line 1'), reply["traceback"]
    assert "Traceback" not in reply["traceback"] and "core/harness" not in reply["traceback"]
