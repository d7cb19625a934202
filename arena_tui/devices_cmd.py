"""`arena devices`: this machine's CPU and GPUs, and every remote host's devices, with vendor,
architecture, memory and the peaks speed of light is measured against."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from arena_tui.tables import Col, fitted
from core.devices.device import SIM_GPUS, DeviceInfo, ProbeError, local_device_ids, probe, sim_info
from core.model.result import EXIT_BAD_INPUT, EXIT_INFRASTRUCTURE, EXIT_PASSED


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "devices", help="list this machine's devices and every remote host's, with their peaks"
    )
    p.add_argument(
        "--hosts", type=Path, help="the hosts file (default: ~/.config/kernel-arena/hosts.yaml)"
    )
    p.add_argument("--json", action="store_true", help="print one JSON list")
    p.add_argument(
        "--ray",
        metavar="ADDRESS",
        help="list what the Ray cluster at ADDRESS offers instead (auto, ray://head:10001; docs/ray.md)",
    )
    p.set_defaults(func=run)


def _row(info: DeviceInfo) -> dict[str, Any]:
    peaks = info.sol_peaks
    return {
        **info.to_json(),
        "timing_kind": info.timing_kind,
        "bf16_tflops": peaks.bf16_tflops if peaks else None,
        "hbm_tbps": peaks.hbm_tbps if peaks else None,
        "peaks_source": peaks.source if peaks else None,
    }


def _remote_devices(hosts: Path | None, err: Console) -> tuple[list[DeviceInfo], list[str]]:
    try:
        from remotes import list_devices, load_hosts  # asyncssh only when hosts are asked for
    except ImportError:
        return [], []
    try:
        host_list = load_hosts(hosts)
    except FileNotFoundError:
        return [], []
    if not host_list:
        return [], []
    return list_devices(host_list)


def _ray_devices(args: argparse.Namespace, out: Console, err: Console) -> int:
    """The Ray cluster's devices by vendor and type, with the slots a run gets there."""
    from core.devices.device import DeviceError
    from core.orchestration.ray_executor import offers

    try:
        found = offers(args.ray)
    except DeviceError as exc:  # no `ray` package, or the cluster cannot be reached
        err.print(f"[red]error:[/] {escape(str(exc))}", soft_wrap=True)
        return EXIT_BAD_INPUT
    if args.json:
        print(json.dumps([{**o.__dict__, "slots": int(o.count)} for o in found]))
        return EXIT_PASSED
    table = Table(header_style="bold", title=f"Ray cluster {args.ray}")
    for col in ("id", "vendor", "type"):
        table.add_column(col, no_wrap=True)
    for col in ("count", "nodes"):
        table.add_column(col, justify="right", no_wrap=True)
    for o in found:
        table.add_row(escape(o.id), o.vendor or "–", escape(o.kind), f"{o.count:g}", str(o.nodes))
    out.print(table)
    out.print(
        "[dim]one evaluation per GPU, or per CPU on ray:cpu; `arena run --ray ADDRESS` with these ids in `devices` (docs/ray.md).[/]"
    )
    return EXIT_PASSED


def run(args: argparse.Namespace, out: Console, err: Console) -> int:
    if getattr(args, "ray", None):
        return _ray_devices(args, out, err)
    rows: list[DeviceInfo] = []
    problems: list[str] = []
    try:
        ids = local_device_ids()
    except ProbeError as exc:
        problems.append(str(exc))
        ids = ["cpu"]
    for device_id in ids:
        try:
            rows.append(probe(device_id))
        except ProbeError as exc:
            problems.append(str(exc))
    rows += [sim_info(f"sim:{gpu}") for gpu in SIM_GPUS]  # always here: they run on this CPU
    remote, remote_problems = _remote_devices(args.hosts, err)
    rows += remote
    problems += remote_problems
    if args.json:
        print(json.dumps([_row(r) for r in rows]))
    else:
        cols = [
            Col("id", whole=True),
            Col("device"),
            Col("units", number=True, drop=2),
            Col("memory", number=True),
            Col("TFLOP/s", number=True),
            Col("TB/s", number=True),
            Col("peaks", drop=1),
            Col("timing", whole=True),
        ]
        cells = []
        for info in rows:
            r = _row(info)
            source = (
                f"{info.peaks_key} ({r['peaks_source']})"
                if info.peaks_key
                else ("–" if info.type == "cpu" else "no entry")
            )
            cells.append(
                [
                    escape(info.id),
                    escape(f"{info.vendor} {info.model} [{info.arch}]"),
                    str(info.units or "?"),
                    f"{info.memory_gb:.0f} GB" if info.memory_gb else "–",
                    f"{r['bf16_tflops']:g}" if r["bf16_tflops"] else "–",
                    f"{r['hbm_tbps']:g}" if r["hbm_tbps"] else "–",
                    escape(source),
                    info.timing_kind,
                ]
            )
        table = fitted(out.width, cols, cells)
        out.print(table)
        out.print(
            "[dim]TFLOP/s: dense bf16; TB/s: memory bandwidth; peaks: the entry of the peaks table and its source (docs/devices.md).[/]"
        )
        out.print("[dim]cpu: Triton runs in its interpreter; its times are shown, never ranked.[/]")
        out.print(
            "[dim]sim:<gpu>: correctness on this CPU, times predicted for the GPU (docs/simulation.md); never mixed with measured ones.[/]"
        )
    for problem in problems:
        err.print(f"[red]error:[/] {escape(problem)}", soft_wrap=True)
    return EXIT_INFRASTRUCTURE if problems else EXIT_PASSED
