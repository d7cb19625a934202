"""The harness: the worker that runs ON the device, in its own processes.

It imports only the standard library, torch, triton, numpy and the task's own code, so that
this folder can be shipped to a remote box as it is. The engine hands it a resolved job (JSON:
the task's specs and sources, concrete workloads, seeds, limits): one line on a warm harness's
standard input, or a file, which the harness deletes once read; and reads its events from a
private file descriptor, never from the candidate's stdout.

Processes: a warm parent (imports torch and triton, never creates a GPU context) forks, before
it reads any job, a *zygote*; per evaluation it forks a *trusted* worker (the reference and the
baseline, never the candidate) and has the zygote fork a *candidate* worker, which receives
only its view of the job. They talk to the parent in JSON headers plus raw tensor bytes;
nothing from the candidate is ever unpickled. docs/integrity.md says what each piece defends.
"""
