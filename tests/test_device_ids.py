"""Device ids are parsed in one place (core.devices.ids): every layer agrees on what an id means.

The drift this pins down: an attempt whose submission could not be scored on a host's simulated
GPU (`box1/sim:h200`) was labelled `measured` by the agents' runner while the leaderboard, the
scheduler and the workspace read it as a simulated GPU."""

from __future__ import annotations

import pytest

from core.agents.runner import unscorable
from core.agents.workspace import vendor_of
from core.devices.device import parse_device
from core.devices.ids import DeviceId, gpus_in, local_part, timing_kind_of
from core.model.statuses import TimingKind
from core.orchestration.scheduler import capacity

IDS = {
    "cpu": "cpu",
    "box1/cpu": "cpu",
    "cuda:0": "measured",
    "cuda:0-3": "measured",
    "xpu:1": "measured",
    "box1/cuda:2": "measured",
    "ray:H200": "measured",
    "sim:h200": "predicted",
    "box1/sim:h200": "predicted",
    "sim:mi300x": "predicted",
}


@pytest.mark.parametrize("device_id,kind", IDS.items())
def test_every_layer_gives_an_id_the_same_timing_kind(device_id, kind, tmp_path):
    assert timing_kind_of(device_id) == kind == TimingKind(kind).value
    result = unscorable("elementwise/axpy", device_id, tmp_path / "missing.py", "no file")
    assert result.timing_kind == kind  # the failed result an attempt records
    assert (capacity(device_id, cpu_slots=5) == 5) == (
        kind in ("cpu", "predicted")
    )  # CPU-run devices share slots


def test_a_local_id_parses_to_the_same_timing_kind_as_its_device():
    for device_id in ("cpu", "sim:h200", "cuda:1", "cuda:0-3", "xpu:0"):
        assert parse_device(device_id).type == DeviceId.parse(device_id).kind
        assert timing_kind_of(device_id) == timing_kind_of(f"box9/{device_id}")


def test_the_parts_of_an_id():
    assert DeviceId.parse(" box1/cuda:0-3 ") == DeviceId("box1", "cuda:0-3")
    assert (
        local_part("box1/sim:h200") == "sim:h200"
        and DeviceId.parse("box1/sim:h200").sim_gpu == "h200"
    )
    assert DeviceId.parse("cuda:3").host is None and DeviceId.parse("cuda:3").sim_gpu is None
    assert [gpus_in(d) for d in ("cuda:0-3", "box1/cuda:2-3", "cuda:2", "sim:h200", "cpu")] == [
        4,
        2,
        1,
        1,
        1,
    ]
    assert vendor_of("box1/sim:mi300x") == vendor_of("sim:mi300x") == "amd"
