"""The integer values a fake pass knows, for the ops whose cost depends on them (sim_torch).

A `sim:` device counts a pure PyTorch call on fake tensors (sim_torch.count_fake): no memory,
no values. Most ops cost what their shapes say, but a grouped matrix product
(`torch._grouped_mm`) reads only the groups its `offs` gives rows: at decode, 24 rows routed
to 24 of 128 experts read 24 experts' weights, not 128. Its cost depends on `offs`'s values.

So the fake pass keeps, beside each fake integer tensor it can, the real tensor of its values:
the call's integer inputs are made as the real run makes them (sim_gpu_inputs, the same seed:
the same routing), and every op whose inputs are all known and whose outputs are small integer
tensors is run again on the real values (a cumsum of expert counts, a cast to int32, a view).
The fake tensors stay fake: code that reads values on the host (`.tolist()`, `.item()`, a
data-dependent shape) raises in the fake pass as before, and the candidate sees nothing of
this. What is known is used for billing only.

The real run of the same call (GPU-sized CPU tensors) knows by the same rule (`KnownInts.of_run`):
its integer inputs, and what integer ops make of them, never a tensor the fake pass could not
know (counts from `histc` over floats, an index a Triton kernel wrote). Both count alike, so a
pure PyTorch call is not flagged for its fake pass and real run differing
(sim_checked.fake_pass_problem) where the two would only have known different things.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.utils._pytree as pytree
from torch.utils._python_dispatch import _disable_current_modes
from torch.utils.weak import WeakIdKeyDictionary

# Integer tensors larger than this (elements; an op's outputs together) are data, not structure
# (an mxfp4 expert's packed weights): never known, so never kept alive nor followed.
MAX_NUMEL = 1 << 22


def is_fake(t: torch.Tensor) -> bool:
    return type(t).__name__ == "FakeTensor" or t.device.type == "meta"


def integral(t: torch.Tensor) -> bool:
    return not (t.dtype.is_floating_point or t.dtype.is_complex)


class KnownInts:
    """Fake integer tensor -> the real CPU tensor of its values, followed op by op (`after`)."""

    def __init__(self) -> None:
        self.values: WeakIdKeyDictionary = WeakIdKeyDictionary()
        self.real = False  # a real run's: its own tensors, known by provenance (`of_run`)

    @classmethod
    def of_run(cls, args: list[Any]) -> KnownInts:
        """A real run's knowledge: its integer inputs, and then what `after` follows from them."""
        known = cls()
        known.real = True
        for t in args:
            if isinstance(t, torch.Tensor) and integral(t) and t.numel() <= MAX_NUMEL:
                known.values[t] = t
        return known

    def seed(self, fakes: list[Any], reals: list[Any]) -> None:
        """The call's inputs: each fake integer tensor of `fakes` gets the real tensor at the
        same place of `reals` (made by sim_gpu_inputs) where shape and dtype agree."""
        for fake, real in zip(fakes, reals):
            if (
                isinstance(fake, torch.Tensor)
                and isinstance(real, torch.Tensor)
                and is_fake(fake)
                and not is_fake(real)
                and integral(fake)
                and fake.numel() <= MAX_NUMEL
                and fake.shape == real.shape
                and fake.dtype == real.dtype
            ):
                self.values[fake] = real

    def of(self, t: Any) -> torch.Tensor | None:
        """The values of `t`: itself where it is real, what is known of a fake one, else None."""
        if not isinstance(t, torch.Tensor):
            return None
        if not is_fake(t) and not self.real:
            return t
        return self.values.get(t)

    def after(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> None:
        """Follow one op of the fake pass: run it again on the known values where every tensor
        it reads is known and all it returns are small integer tensors; otherwise what it
        wrote in place is no longer known."""
        outs = [t for t in pytree.tree_leaves(out) if isinstance(t, torch.Tensor)]
        if not self._followable(func, outs):
            self._forget_written(func, args, kwargs)
            return
        real = self._real_arguments(args, kwargs)
        if real is None:
            self._forget_written(func, args, kwargs)
            return
        if self.real:  # the op ran on the values themselves: its outputs are known as they are
            for t in outs:
                self.values[t] = t
            return
        with _disable_current_modes():  # on real CPU tensors, outside the fake mode
            got = func(*real[0], **real[1])
        reals = [t for t in pytree.tree_leaves(got) if isinstance(t, torch.Tensor)]
        if len(reals) != len(outs):
            return
        for fake, value in zip(outs, reals):
            if is_fake(fake):
                self.values[fake] = value

    def _followable(self, func: Any, outs: list[torch.Tensor]) -> bool:
        # A seeded random op would draw from the candidate's generator a second time.
        if torch.Tag.nondeterministic_seeded in getattr(func, "tags", ()):
            return False
        return (
            bool(outs)
            and all((self.real or is_fake(t)) and integral(t) for t in outs)
            and sum(t.numel() for t in outs) <= MAX_NUMEL
        )

    def _real_arguments(
        self, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[tuple[Any, ...], dict[str, Any]] | None:
        leaves, spec = pytree.tree_flatten((args, kwargs))
        real = []
        for leaf in leaves:
            if isinstance(leaf, torch.Tensor):
                leaf = self.of(leaf)
                if leaf is None:
                    return None
            real.append(leaf)
        real_args, real_kwargs = pytree.tree_unflatten(real, spec)
        return tuple(real_args), dict(real_kwargs)

    def _forget_written(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """An op not followed that writes a known tensor in place: that tensor, and every
        known tensor sharing its values' storage (its views), is no longer known."""
        if not len(self.values):
            return
        for t in _written_arguments(func, args, kwargs):
            value = self.values.get(t)
            if value is None:
                continue
            storage = value.untyped_storage().data_ptr()
            for key, known in list(self.values.items()):
                if known.untyped_storage().data_ptr() == storage:
                    del self.values[key]


def _written_arguments(
    func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> list[torch.Tensor]:
    """The tensors an op writes in place (its schema's written arguments, `out=` included)."""
    schema = getattr(func, "_schema", None)
    if schema is None:
        return []
    found = []
    for i, arg in enumerate(schema.arguments):
        if arg.alias_info is None or not arg.alias_info.is_write:
            continue
        value = kwargs.get(arg.name) if arg.kwarg_only or i >= len(args) else args[i]
        found += [t for t in pytree.tree_leaves(value) if isinstance(t, torch.Tensor)]
    return found
