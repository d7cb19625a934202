"""Moved to core.rl.env; kept importable here, with a DeprecationWarning (core/moved.py)."""

from core.moved import stand_in

__getattr__ = stand_in(__name__, "core.rl.env")
