"""Kernel Arena's engine: tasks, the gated evaluation, scoring, devices and events.

Nothing here imports a user interface or SSH code; front ends subscribe to events.
"""

__version__ = "0.1.0"
