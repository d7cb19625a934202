"""The store's error: what it cannot do, with why and what to do (the CLI prints it, exit 2)."""

from __future__ import annotations


class StoreError(Exception):
    """The store cannot do what was asked; the message says why and what to do."""


class UnknownRunError(StoreError, LookupError):
    """A run id (or prefix of one) that no run in the store has."""

    def __init__(self, run_id: str):
        super().__init__(f"unknown run `{run_id}`: see `arena runs list`")
        self.run_id = run_id


class StorageFault(StoreError):
    """The disk under the store failed a write (full, read-only, an I/O error): an
    infrastructure fault, not bad input. Nothing of that write was kept; what was committed
    before it is."""


class RunOwnedError(StoreError):
    """The run is being executed by another live process (its lease, core/store/leases.py)."""
