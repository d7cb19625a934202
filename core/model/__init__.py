"""The nouns every layer shares: the task (`task`) and its workloads (`workload`), with the
arithmetic of their formulas (`formulas`), the result of an evaluation (`result`), the versioned
event schema that flows to every front end (`events`), an attempt's outcome (`outcome`), the
candidate (`candidate`), the statuses as str-valued enums (`statuses`) and where the arena keeps
its data (`paths`). Nothing here imports another part of `core` but the harness's protocol: these
are the bottom layer, imported by everything above and importing nothing from it."""
