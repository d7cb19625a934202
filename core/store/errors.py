"""The store's error: what it cannot do, with why and what to do (the CLI prints it, exit 2)."""

from __future__ import annotations


class StoreError(Exception):
    """The store cannot do what was asked; the message says why and what to do."""


class UnknownRunError(StoreError, LookupError):
    """A run id (or prefix of one) that no run in the store has."""

    def __init__(self, run_id: str):
        super().__init__(f"unknown run `{run_id}`: see `arena runs list`")
        self.run_id = run_id
