"""Importers: other benchmarks' task sets written as arena task folders.

Each importer reads a checkout the user supplies (nothing of another benchmark is bundled),
writes one task folder per problem it can convert into a folder the user names, and returns an
`ImportReport` that lists what it converted and, for everything else, why not. Converted tasks
are ordinary task folders: `arena tasks validate --tasks-dir OUT`, `arena eval --tasks-dir OUT`,
agents and run files use them like the bundled ones. Everything an importer had to derive
rather than read (hidden workloads, tolerances, FLOP and byte counts) is named in the task's
`provenance` section. docs/interop.md says how each set runs here and what differs from home.
"""

from core.importers.report import Converted, ImportReport, Skipped

__all__ = ["Converted", "ImportReport", "Skipped"]
