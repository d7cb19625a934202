"""`arena hosts check`: connect to every host of the hosts file in parallel and show, per host,
its Python, torch and Triton versions, its devices and its sandbox mode, or one error saying what is wrong and
how to fix it. Exit 0 when every host is usable, 3 otherwise, 2 for a bad hosts file."""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from core.model.result import EXIT_BAD_INPUT, EXIT_INFRASTRUCTURE, EXIT_PASSED


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("hosts", help="remote hosts from the hosts file (docs/hosts.md)")
    hsub = p.add_subparsers(dest="hosts_command", metavar="SUBCOMMAND", required=True)
    check = hsub.add_parser(
        "check", help="connect to every host and show its Python, torch, Triton and devices"
    )
    check.add_argument(
        "--hosts",
        type=Path,
        help="the hosts file (default: ${XDG_CONFIG_HOME:-~/.config}/kernel-arena/hosts.yaml)",
    )
    check.add_argument(
        "--json", action="store_true", help="print one JSON list, one object per host"
    )
    check.set_defaults(func=check_command)


def check_command(args: argparse.Namespace, out: Console, err: Console) -> int:
    from remotes.hosts import HostsError, NoHostsFile, load_hosts

    try:
        hosts = load_hosts(args.hosts)
    except (HostsError, NoHostsFile) as exc:
        err.print(f"[red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
        return EXIT_BAD_INPUT
    if not hosts:
        err.print(
            f"[red]error:[/] {escape(str(args.hosts or 'the hosts file'))} lists no hosts: add one (docs/hosts.md)",
            soft_wrap=True,
        )
        return EXIT_BAD_INPUT

    from remotes.check import check_hosts

    reports = asyncio.run(check_hosts(hosts))
    if args.json:
        print(json.dumps([_report_json(r) for r in reports]))
    else:
        for r in reports:
            head = f"[bold]{escape(r.host.name)}[/] [dim]({escape(r.host.address)})[/]"
            if r.error is not None:
                out.print(
                    f"{head}  [red]{escape(r.error.kind.replace('_', ' '))}[/]", soft_wrap=True
                )
                out.print(
                    f"  [red]error:[/] {escape(str(r.error))}", highlight=False, soft_wrap=True
                )
                continue
            f = r.facts
            assert f is not None
            devices = ", ".join(
                f"{d['id']} ({d['model']})" if d.get("model") else d["id"] for d in f.devices
            )
            # (the connection itself logged the full warning on stderr)
            flag = (
                "  [yellow bold]HOST KEY NOT CHECKED (insecure_no_host_check)[/]"
                if r.insecure
                else ""
            )
            out.print(f"{head}  [green]ok[/]{flag}", soft_wrap=True)
            out.print(
                f"  Python {f.python} · torch {f.torch} · Triton {f.triton or 'not installed'}"
                f"{' · ROCm ' + f.hip if f.hip else ' · CUDA ' + f.cuda if f.cuda else ''}",
                highlight=False,
                soft_wrap=True,
            )
            out.print(f"  devices: {escape(devices)}", highlight=False, soft_wrap=True)
            if r.sandbox is not None:
                where = (
                    f" ({escape(r.sandbox.bwrap)}, {escape(r.sandbox.source or '')})"
                    if r.sandbox.bwrap and r.sandbox.sandboxed
                    else ""
                )
                colour = "green" if r.sandbox.sandboxed else "yellow"
                out.print(
                    f"  sandbox: [{colour}]{escape(r.sandbox.status)}[/]{where}",
                    highlight=False,
                    soft_wrap=True,
                )
    return EXIT_PASSED if all(r.ok for r in reports) else EXIT_INFRASTRUCTURE


def _report_json(r: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "name": r.host.name,
        "address": r.host.address,
        "ok": r.ok,
        "insecure_no_host_check": r.insecure,
    }
    if r.error is not None:
        return {**base, "error": {"kind": r.error.kind, "message": str(r.error)}}
    f = r.facts
    box = r.sandbox.to_json() if r.sandbox is not None else None
    return {
        **base,
        "python": f.python,
        "torch": f.torch,
        "triton": f.triton,
        "hip": f.hip,
        "cuda": f.cuda,
        "devices": f.devices,
        "sandbox": box,
    }
