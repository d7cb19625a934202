"""Tasks: a task folder's `task.yaml` loaded and validated field by field (`spec`), its FLOP and
byte formulas (`formulas`), finding the bundled tasks or a folder's (`discovery`); a new task
folder from a template (`scaffold`); a new model's workloads added to every task it uses
(`model_config`); the manifest of bundled files (`manifest`). Above the devices (the manifest
hashes the device data), below the evaluation that runs tasks."""
