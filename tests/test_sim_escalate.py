"""`sim:h200?escalate=1.0&to=cuda:0`: a prediction whose speedup band straddles the decision is
measured on the GPU instead; one the band decides keeps its prediction. The options are parsed
with the id, once (core/devices/ids.py), and bad ones are one clear error."""

from __future__ import annotations

import asyncio

import pytest

from core.devices.device import DeviceError, parse_device
from core.devices.ids import DeviceId, Escalation
from core.evaluation import escalate
from core.model.result import Result, WorkloadFigures


def _result(speedups_and_bands, kind="predicted", status="passed") -> Result:
    workloads = [
        WorkloadFigures(
            label=f"w{i}",
            axes={"T": i},
            hidden=False,
            mode="predicted" if kind == "predicted" else "graph",
            candidate={"median_us": 1.0},
            baseline={"median_us": s},
            speedup=s,
            roofline_us=None,
            sol_fraction=None,
            band=b,
        )
        for i, (s, b) in enumerate(speedups_and_bands)
    ]
    speedup = 1.0
    for s, _ in speedups_and_bands:
        speedup *= s ** (1 / len(speedups_and_bands))
    return Result(
        task_id="norm/add_rmsnorm",
        candidate_sha256="0" * 64,
        device={"id": "sim:h200"},
        timing_kind=kind,
        status=status,
        failed_stage=None,
        stages=[],
        workloads=workloads,
        speedup=speedup,
        sol_fraction=None,
        sol_source=None,
        points=0,
        integrity_flags=[],
        review_notes=[],
        versions={},
    )


def test_the_options_are_parsed_with_the_id_and_left_out_of_the_device(monkeypatch):
    monkeypatch.delenv("ARENA_ESCALATE_TO", raising=False)
    parsed = DeviceId.parse("sim:h200?escalate=1.05&to=cuda:1")
    assert parsed.local == "sim:h200" and parsed.bare == "sim:h200"
    assert parsed.escalation() == Escalation(1.05, "cuda:1")
    assert parse_device("sim:h200?escalate=1.05&to=cuda:1").id == "sim:h200"
    assert DeviceId.parse("sim:h200?escalate=1").escalation() == Escalation(1.0, None)
    monkeypatch.setenv("ARENA_ESCALATE_TO", "cuda:3")
    assert DeviceId.parse("sim:h200?escalate=1").escalation() == Escalation(1.0, "cuda:3")
    assert DeviceId.parse("sim:h200").escalation() is None


@pytest.mark.parametrize(
    "device_id,says",
    [
        ("sim:h200?escalate=fast", "not a speedup"),
        ("sim:h200?escalate=-1", "not a speedup"),
        ("sim:h200?escalte=1", "unknown option `escalte`"),
        ("cuda:0?escalate=1", "takes no options"),
        ("sim:h200?to=cuda:0", "`to` without `escalate`"),
        ("sim:h200?escalate=1&to=sim:b200", "name a GPU of this machine"),
    ],
)
def test_bad_options_are_one_clear_error(device_id, says):
    with pytest.raises(DeviceError, match=says):
        parse_device(device_id)


def test_only_a_band_that_straddles_the_decision_is_undecided():
    assert escalate.undecided(_result([(1.1, 0.2), (1.0, 0.2)]), 1.0) is not None
    assert escalate.undecided(_result([(1.5, 0.2), (1.6, 0.2)]), 1.0) is None, "clearly faster"
    assert escalate.undecided(_result([(0.5, 0.2)]), 1.0) is None, "clearly slower"
    assert escalate.undecided(_result([(1.5, 0.2)]), 1.4) is not None, "another decision"
    assert escalate.undecided(_result([(1.1, 0.2)], kind="measured"), 1.0) is None
    assert escalate.undecided(_result([(1.1, 0.2)], status="failed"), 1.0) is None


def test_an_undecided_prediction_is_measured_on_the_gpu_and_says_why(monkeypatch):
    measured = _result([(1.07, None)], kind="measured")
    calls = []

    class FakeGPU:
        async def aevaluate(self, task, candidate, **kwargs):
            calls.append((task, candidate, kwargs))
            return measured

    import threading

    monkeypatch.setattr(escalate, "_gpu", lambda device: (FakeGPU(), threading.Lock()))
    predicted = _result([(1.1, 0.3)])
    got = asyncio.run(
        escalate.escalated(predicted, Escalation(1.0, "cuda:0"), "task", "c.py", seed=7)
    )
    assert got is measured and calls == [("task", "c.py", {"seed": 7})]
    assert any("straddles the decision at 1x" in n and "cuda:0" in n for n in got.review_notes)
    decided = _result([(2.0, 0.3)])
    assert asyncio.run(escalate.escalated(decided, Escalation(1.0, "cuda:0"), "t", "c")) is decided
    assert len(calls) == 1, "a prediction its band decides is not measured"


def test_without_a_gpu_named_the_prediction_stays_and_says_so():
    predicted = _result([(1.1, 0.3)])
    got = asyncio.run(escalate.escalated(predicted, Escalation(1.0, None), "t", "c"))
    assert got is predicted and any("no GPU is named" in n for n in got.review_notes)
