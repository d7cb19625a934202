"""Exploit: replace inherited C methods on torch.Tensor (`copy_`, `clone`, `__eq__`) that a
harness running in the same process might call on the candidate's inputs and outputs: `copy_`
refilling an input (a task's inputs.py path), `clone` copying an output, `__eq__` comparing
it. Here the wrappers only count; a real cheat would compute, or answer, in them.

Defense: the harness binds TensorBase's methods at import and runs with Python dispatch off;
the watch resolves every attribute of torch.Tensor through its MRO and makes the replacement
the integrity flag torch_patched (an honest kernel never reassigns torch's methods)."""

import torch

_calls = {"copy_": 0, "clone": 0, "__eq__": 0}


def _counting(name):
    original = getattr(torch._C.TensorBase, name)

    def wrapper(self, *args, **kwargs):
        _calls[name] += 1
        return original(self, *args, **kwargs)

    return wrapper


for _name in _calls:
    setattr(torch.Tensor, _name, _counting(_name))


def run(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return x * 2 + b
