"""Moved to core.rl.adapters; its modules are kept importable here, with a DeprecationWarning
(core/moved.py)."""
