"""task.yaml as the importers write it: `yaml.dump(spec, Dumper=Dumper)` writes a `Flow` mapping
(and a `Flow.list` sequence) on one line, as a person writes workloads and shapes."""

from __future__ import annotations

import yaml


class Flow(dict):
    """A mapping (or, through `list`, a sequence) written on one line: workloads, shapes."""

    class list(list):
        pass


class Dumper(yaml.SafeDumper):
    pass


Dumper.add_representer(
    Flow, lambda d, v: d.represent_mapping("tag:yaml.org,2002:map", v.items(), flow_style=True)
)
Dumper.add_representer(
    Flow.list, lambda d, v: d.represent_sequence("tag:yaml.org,2002:seq", v, flow_style=True)
)
