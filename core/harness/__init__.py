"""The harness: the worker that runs ON the device, in its own processes.

It imports only the standard library, torch, triton, numpy and the task's own files, so that
this folder can be shipped to a remote box as it is. The engine hands it a resolved job file
(JSON: the task's specs, concrete workloads, seeds, limits) and reads its events from a
private file descriptor, never from the candidate's stdout.

Processes: a warm parent (imports torch and triton, never creates a GPU context) forks, per
evaluation, a *candidate* worker (imports the candidate) and a *trusted* worker (imports the
reference and the baseline, never the candidate). They talk to the parent over pipes in JSON
headers plus raw tensor payloads; nothing from the candidate is ever unpickled outside
`torch.load(weights_only=True)`.
"""
