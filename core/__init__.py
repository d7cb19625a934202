"""Kernel Arena's engine: tasks, the gated evaluation, scoring, devices and events.

Nothing here imports a user interface or SSH code; front ends subscribe to events. The
subpackages are the layers, each importing only those below it (docs/architecture.md):
rl > orchestration > agents | store > evaluation > tasks | importers > devices > model >
harness; the harness imports nothing from `core` outside itself.
"""

__version__ = "0.1.0"
