"""Tasks: a task folder's `task.yaml` loaded and validated field by field into the nouns of
`core.model.task` (`spec`; its vocabulary `vocabulary`, the field reader and TaskError `fields`,
the larger sections `sections`), finding the bundled tasks or a folder's (`discovery`); a new task
folder from a template (`scaffold`); a new model's workloads added to every task it uses
(`model_config`); the manifest of bundled files (`manifest`). Above the devices (the manifest
hashes the device data), below the evaluation that runs tasks."""
