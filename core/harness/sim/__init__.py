"""The harness's side of the simulated GPUs (`sim:<gpu>` devices): `count` counts what Triton
kernels do in the interpreter, `torch_ops` counts torch work, `host` finds host Python a kernel
calls, `aot` compiles for a GPU that is not here, `predict` is the workers' side of the
performance stage, `stage` the parent's, and `model` the pure time model. Part of the
stand-alone harness: imports nothing from `core` outside `core.harness`."""
