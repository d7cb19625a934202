"""Tasks: a task folder's `task.yaml` loaded and validated field by field, the FLOP and byte
formulas, discovery of the bundled tasks (`spec`); a new task folder from a template
(`scaffold`); a new model's workloads added to every task it uses (`model_config`); the
manifest of bundled files (`manifest`). Above the devices (formulas need no device, but the
manifest hashes the device data), below the evaluation that runs tasks."""
