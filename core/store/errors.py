"""The store's error: what it cannot do, with why and what to do (the CLI prints it, exit 2)."""

from __future__ import annotations


class StoreError(Exception):
    """The store cannot do what was asked; the message says why and what to do."""
