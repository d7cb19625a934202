"""The event schema: what the harness writes is what the engine parses."""

from __future__ import annotations

import pytest

from core.model import events


def test_harness_events_parse_into_typed_events():
    line = '{"v": 1, "type": "stage_finished", "stage": "compile", "status": "passed", "seconds": 0.5, "log": "ok"}'
    event = events.parse(line)
    assert isinstance(event, events.StageFinished)
    assert event.stage == "compile" and event.status == "passed"
    assert events.parse(events.to_json(event)) == event


def test_other_versions_and_types_are_rejected():
    with pytest.raises(events.EventError, match="schema version"):
        events.parse('{"v": 2, "type": "stage_started", "stage": "compile"}')
    with pytest.raises(events.EventError, match="unknown event type"):
        events.parse('{"v": 1, "type": "verdict", "passed": true}')
    with pytest.raises(events.EventError, match="not JSON"):
        events.parse("PASSED")
