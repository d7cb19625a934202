"""Where a graph round's timing events lie (docs/fidelity.md, "Where the offset comes from").
By default a graph round is timed by events around each replay, so its time includes what the
graph's launch costs the device; `ARENA_TIMING_EVENTS=inside` records the pair as the graph's
first and last nodes instead, a setting for measuring whether the offset between an
evaluation's two processes lies in the launch. What the GPU does with it is measured by
`sh bench/h200_wave.sh $OUT 60`; here, the capture and the times read (the request both sides
read and the engine's setting: tests/test_timing_placement.py)."""

from __future__ import annotations

import pytest

from core.harness import timing
from tests.test_timing_placement import _Recorder


class _NamedEvents(_Recorder):
    """The recorder, with each event made by name and each pair's elapsed time its own."""

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        super().install(monkeypatch)
        log = self.log
        made = iter(range(1000))

        class Events:
            def __init__(self, device_type: str) -> None:
                pass

            def new(self) -> str:
                return f"around{next(made)}"

            def record(self, event: str) -> None:
                log.append(f"record {event}")

            def elapsed_ms(self, start: str, end: str) -> float:
                return 0.002 if start.startswith("inside") else 0.005

        monkeypatch.setattr(timing, "_Events", Events)
        monkeypatch.setattr(
            timing, "_event_new", lambda cls, **kw: f"inside{next(made)} {sorted(kw.items())}"
        )
        monkeypatch.setattr(timing, "_event_record", lambda e, s: log.append(f"record {e}"))


@pytest.mark.parametrize("inside", [False, True])
def test_an_inside_round_times_its_calls_by_the_graphs_own_first_and_last_nodes(
    monkeypatch: pytest.MonkeyPatch, inside: bool
) -> None:
    import torch

    calls = _NamedEvents()
    calls.install(monkeypatch)

    def fn(x: torch.Tensor) -> torch.Tensor:
        calls.log.append("call")
        return x + 1

    timed = calls.time_graph_round(fn, events_inside=inside)
    assert timed["times_us"] == ([2.0, 2.0] if inside else [5.0, 5.0])
    capture = calls.log.index("capture")
    recorded = calls.log[capture + 1 : capture + 4]
    if inside:  # external timing events: record nodes in the graph, around the one call
        pair = "[('enable_timing', True), ('external', True)]"
        assert recorded[0].startswith("record inside") and recorded[0].endswith(pair)
        assert recorded[1] == "call" and recorded[2].startswith("record inside")
    else:
        assert "record inside" not in " ".join(calls.log)
        assert recorded[0] == "call"
    # the events around each replay are recorded either way, so both settings cost the same
    assert sum(e.startswith("record around") for e in calls.log) == 4
