"""Can a candidate's worker map the trusted worker's GPU memory? On a GPU, one process each:

    PYTHONPATH=. python3 tests/gpu/check_shared_memory.py

The trusted side (not dumpable, as trusted_worker.py makes itself) creates a region both ways
the harness knows: a CUDA IPC handle (torch's `_share_cuda_`) and an exported allocation
(cuda_vmm.py, the descriptor sent over a Unix socket). The candidate side first isolates itself
as a candidate's worker does (isolation.py: its own mount namespace, every capability dropped),
then maps each, reads what the trusted side wrote and writes its answer back, which the trusted
side checks. Prints one line per kind and exits 1 if the exported allocation failed.
"""

from __future__ import annotations

import ctypes
import json
import multiprocessing as mp
import os
import socket
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

NBYTES = 3 << 20  # over one 2 MiB granule


def consumer(sock: socket.socket, hide: str) -> None:
    import torch

    from core.harness import isolation, shared_region

    device = torch.device("cuda:0")
    torch.empty(1, device=device)  # the context first, as a candidate's worker starts it
    why = isolation.isolate([hide], [], as_root=os.geteuid() == 0)
    if os.geteuid() == 0:
        isolation.drop_all()  # as root the worker drops its privileges next (worker_process.py)
    sock.sendall(f"isolated: {why or 'yes'}\n".encode())
    for _ in range(2):
        data, fds, _, _ = socket.recv_fds(sock, 1 << 16, 1)
        desc = json.loads(data)
        try:
            region = shared_region.attach_region(desc, fds, device)
            got = int(region.base[:NBYTES].to(torch.int64).sum())
            region.base[:16].fill_(7)
            torch.cuda.synchronize()
            del region
            sock.sendall(f"ok {got}\n".encode())
        except Exception as exc:  # noqa: BLE001 - reported to the trusted side
            first = str(exc).splitlines()[0] if str(exc) else ""  # one line per answer
            sock.sendall(f"failed {type(exc).__name__}: {first[:200]}\n".encode())


def main() -> int:
    import torch

    from core.harness import cuda_vmm

    ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0, as the trusted worker
    device = torch.device("cuda:0")
    ours, theirs = socket.socketpair()
    hide = tempfile.mkdtemp()
    proc = mp.get_context("spawn").Process(target=consumer, args=(theirs, hide))
    proc.start()
    reader = ours.makefile("r")
    print(reader.readline().strip(), flush=True)

    legacy = torch.empty(NBYTES, dtype=torch.uint8, device=device).fill_(1)
    dev, handle, size, offset, ref, ref_off, event, event_sync = (
        legacy.untyped_storage()._share_cuda_()
    )
    ipc = {
        "kind": "cuda_ipc", "nbytes": NBYTES, "device": int(dev), "handle": bytes(handle).hex(),
        "size": int(size), "offset": int(offset), "ref_handle": bytes(ref).hex(),
        "ref_offset": int(ref_off), "event": None if event is None else bytes(event).hex(),
        "event_sync": bool(event_sync),
    }  # fmt: skip
    exported, fd = cuda_vmm.export(NBYTES, device)
    exported.fill_(1)
    torch.cuda.synchronize()
    vmm = {"kind": "cuda_vmm", "nbytes": int(exported.numel())}
    failed = False
    for name, desc, base, fds in (
        ("CUDA IPC handle", ipc, legacy, []),
        ("exported allocation", vmm, exported, [fd]),
    ):
        message = json.dumps(desc).encode()  # one message, its descriptor with it
        socket.send_fds(ours, [message], fds) if fds else ours.sendall(message)
        answer = reader.readline().strip()
        wrote = int(base[:16].sum()) == 16 * 7 if answer.startswith("ok") else False
        right = answer == f"ok {NBYTES}" and wrote
        print(f"{name}: {answer}; read and written back: {'yes' if right else 'no'}", flush=True)
        failed |= name == "exported allocation" and not right
    os.close(fd)
    proc.join(30)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
