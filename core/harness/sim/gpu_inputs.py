"""Inputs at GPU size on the CPU for a `sim:` device's counted call (sim_predict) and the
trusted worker's reference at the same size (sim_reference): drawn values made at memory speed,
and a task's own generator run with its large random fills made cheap (CheapFills)."""

from __future__ import annotations

import math
import mmap
import weakref
from collections.abc import Callable
from typing import Any, ClassVar

import torch
import torch.utils._pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

from core.harness import inputs

TILE = 1 << 16  # random values drawn per input; a GPU-sized input repeats them
UNTOUCHED_BYTES = (
    64 << 20
)  # a floating-point input larger than this keeps only its first TILE values, past FILL_BUDGET
FILL_BUDGET = (
    2 << 30
)  # bytes of such large inputs per workload that are filled all the same (drawn values, repeated)


def gpu_inputs(
    specs: list[dict[str, Any]],
    workload: dict[str, Any],
    seed: int,
    custom: Any,
    fill_floats: bool = True,
) -> list[Any]:
    """Inputs at GPU size on the CPU. Drawing hundreds of MB of random bf16 on two cores takes
    minutes, so each tensor repeats one block of `TILE` values drawn as its spec says: values of
    the right distribution and range (indices stay valid), made at memory speed. A floating-point
    tensor above `UNTOUCHED_BYTES` (a KV cache) keeps only its first block: the rest stays the
    fresh zero pages the allocator mapped, never written, so it costs nothing; counting needs its
    addresses, not its values. A task's own generator (inputs.py) builds structure (block
    tables, routing) and is called as it is, with its random fills made cheap and its large
    floating-point tensors left unwritten the same way (CheapFills). `fill_floats=False` (a fake
    pass wants only the integer inputs' values: sim_known) leaves every floating-point tensor
    with its first block: the same draws, hence the same integers, without filling the floats
    (integer tensors are still made whole: packed mxfp4 weights cost their bytes again)."""
    gen = torch.Generator("cpu").manual_seed(seed)
    if custom is not None:
        with CheapFills():
            return list(custom(dict(workload["axes"]), gen))
    made: list[Any] = []
    budget = FILL_BUDGET
    for spec in specs:
        if spec.get("shape") is None:
            made.append(spec["value"])
            continue
        shape = tuple(workload["shapes"][spec["name"]])
        t = untouched(shape, inputs.dtype_of(spec["dtype"]))
        flat = t.view(-1)
        inputs._fill(flat[: min(TILE, flat.numel())], spec, gen)
        nbytes = t.numel() * t.element_size()
        # Drawn values everywhere, large tensors too, while the workload's budget lasts: a
        # kernel must not tell the counted call from a real one by the zero pages of an
        # unwritten weight. Past the budget (KV caches of gigabytes), the rest stays unwritten.
        if t.dtype.is_floating_point and not fill_floats:
            pass
        elif not (t.dtype.is_floating_point and nbytes > UNTOUCHED_BYTES) or nbytes <= budget:
            _repeat_prefix(flat, min(TILE, flat.numel()))
            if t.dtype.is_floating_point and nbytes > UNTOUCHED_BYTES:
                budget -= nbytes
        made.append(t)
    return made


def drawn_share(
    share: Callable[..., Any] | None,
    specs: list[dict[str, Any]],
    workload: dict[str, Any],
    seed: int,
    custom: Any,
) -> float | None:
    """What a task's reference.py says of the inputs a `sim:` device's counted call was given
    (the same ones: `gpu_inputs` at the same seed): `bytes_share(axes, inputs)`, the share of
    its byte formula they need any implementation to move (a padding token moves nothing, so a
    batch of three tokens with one padded needs about two thirds). None where the task has no
    `bytes_share` or it gave no share in [0, 1] (the formula stands). Run by the trusted worker
    (the candidate's never loads reference.py): the candidate cannot choose it."""
    if share is None:
        return None
    found = share(dict(workload["axes"]), gpu_inputs(specs, workload, seed, custom))
    if isinstance(found, torch.Tensor) and found.numel() == 1:
        found = found.item()
    if isinstance(found, bool) or not isinstance(found, (int, float)) or not 0 <= found <= 1:
        return None
    return float(found)


def untouched(shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    """An uninitialised tensor; a large floating-point one on fresh anonymous pages, so that
    what is never written reads zero and costs no memory. `torch.empty` gives that only where
    the C allocator maps each large block anew (glibc does, past its mmap threshold); in a long
    process it can hand back a block freed earlier, garbage included."""
    numel = math.prod(shape)
    nbytes = numel * torch.empty((), dtype=dtype).element_size()
    if not (dtype.is_floating_point and nbytes > UNTOUCHED_BYTES):
        return torch.empty(shape, dtype=dtype)
    pages = mmap.mmap(-1, nbytes)  # the tensor keeps the mapping alive (torch.frombuffer)
    return torch.frombuffer(pages, dtype=dtype, count=numel).view(shape)


def _repeat_prefix(flat: torch.Tensor, done: int) -> None:
    """Copy the first `done` values over the rest of `flat`, doubling: log2(n / done) copies."""
    n = flat.numel()
    while done < n:
        step = min(done, n - done)
        flat[done : done + step].copy_(flat[:step])
        done += step


class CheapFills(TorchDispatchMode):
    """While a task's own input generator runs at GPU size, large floating-point tensors are
    never computed: their values are not needed for counting (their addresses are), and a
    generator that quantizes a few GB of expert weights spends a minute on two cores making them.

    - A random fill (normal_, uniform_, ...) of a large contiguous tensor, or a random factory
      (randn, rand, ...) of one, draws `TILE` values and repeats them; a floating-point tensor
      above `UNTOUCHED_BYTES` keeps only its first `TILE` values and is otherwise never written
      (a paged KV cache of gigabytes costs nothing). Such a tensor is *unwritten*.
    - An op that reads an unwritten tensor, or writes only floating-point tensors above
      `UNTOUCHED_BYTES`, and whose outputs are all floating point is not run: a large output is
      left unwritten, a small one (a scale derived from unwritten weights) is zeros, and an
      unwritten tensor written in place stays as it is.
    - Everything else runs as written, so the generator's structure (lengths, block tables,
      routing, integer indices; even those derived from unwritten values) is real."""

    FILLS = (
        "normal_",
        "uniform_",
        "random_",
        "exponential_",
        "log_normal_",
        "cauchy_",
        "geometric_",
        "bernoulli_",
    )
    FACTORIES: ClassVar[dict[str, str]] = {
        "randn": "normal_",
        "rand": "uniform_",
        "randn_like": "normal_",
        "rand_like": "uniform_",
    }

    def __init__(self) -> None:
        super().__init__()
        # storage address -> the tensors seen holding it, weakly: a freed tensor's address may be
        # reused by a new, written one, and unwritten intermediates must be freed as they would be
        self.unwritten: dict[int, list[weakref.ref[torch.Tensor]]] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        kwargs = kwargs or {}
        name = func.overloadpacket.__name__
        target = args[0] if args else None
        if (
            name in self.FILLS
            and isinstance(target, torch.Tensor)
            and target.numel() > 4 * TILE
            and target.is_contiguous()
        ):
            return self._fill(target, lambda flat: func(flat, *args[1:], **kwargs))
        if getattr(func, "is_view", False):
            out = func(*args, **kwargs)
            if any(self._is_unwritten(t) for t in _tensors(args, kwargs)):
                for t in pytree.tree_leaves(out):
                    if isinstance(t, torch.Tensor):
                        self._remember(t)
            return out
        meta = _meta_outputs(func, args, kwargs)
        if meta is None:
            return func(*args, **kwargs)
        outs = [t for t in pytree.tree_leaves(meta) if isinstance(t, torch.Tensor)]
        if (
            name in self.FACTORIES
            and len(outs) == 1
            and outs[0].dtype.is_floating_point
            and outs[0].numel() > 4 * TILE
        ):
            return self._factory(func, args, kwargs, outs[0], self.FACTORIES[name])
        reads_unwritten = any(self._is_unwritten(t) for t in _tensors(args, kwargs))
        all_large = bool(outs) and all(_large_float(t) for t in outs)
        if (
            not outs
            or not all(t.dtype.is_floating_point for t in outs)
            or not (reads_unwritten or all_large)
        ):
            return func(*args, **kwargs)
        if _writes_in_place(func):
            mutated = _mutated(func, args, kwargs)
            if mutated is None:
                return func(*args, **kwargs)
            if not self._is_unwritten(mutated):
                self._forget(mutated)
            return mutated
        return pytree.tree_map(lambda m: self._blank(m) if isinstance(m, torch.Tensor) else m, meta)

    def _fill(self, target: torch.Tensor, draw: Callable[[torch.Tensor], Any]) -> torch.Tensor:
        flat = target.view(-1)
        draw(flat[:TILE])
        if _large_float(target):
            self._remember(target)
        else:
            _repeat_prefix(flat, TILE)
        return target

    def _factory(
        self,
        func: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        meta: torch.Tensor,
        fill: str,
    ) -> torch.Tensor:
        out = _like(meta)
        gen = kwargs.get("generator")
        return self._fill(out, lambda flat: getattr(flat, fill)(generator=gen))

    def _blank(self, meta: torch.Tensor) -> torch.Tensor:
        out = _like(meta)
        if _large_float(out):
            self._remember(out)
        else:
            out.zero_()
        return out

    def _forget(self, t: torch.Tensor) -> None:
        """A written tensor that an op skipped here would have written: its values are now
        unspecified (unwritten if large, else zeros)."""
        if _large_float(t):
            self._remember(t)
        else:
            t.zero_()

    def _remember(self, t: torch.Tensor) -> None:
        self.unwritten.setdefault(t.untyped_storage().data_ptr(), []).append(weakref.ref(t))

    def _is_unwritten(self, t: torch.Tensor) -> bool:
        if t.device.type != "cpu":
            return False
        address = t.untyped_storage().data_ptr()
        alive = [r for r in self.unwritten.get(address, []) if r() is not None]
        if alive:
            self.unwritten[address] = alive
        else:
            self.unwritten.pop(address, None)
        return bool(alive)


def _like(meta: torch.Tensor) -> torch.Tensor:
    """A CPU tensor of `meta`'s shape, strides and dtype (`untouched` where it is contiguous)."""
    if meta.is_contiguous():
        return untouched(tuple(meta.shape), meta.dtype)
    return torch.empty_strided(meta.shape, meta.stride(), dtype=meta.dtype)


def _large_float(t: torch.Tensor) -> bool:
    return t.dtype.is_floating_point and t.numel() * t.element_size() > UNTOUCHED_BYTES


def _tensors(args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[torch.Tensor]:
    return [t for t in pytree.tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]


def _meta_outputs(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """What `func` would return (shapes, strides, dtypes) computed on meta tensors, or None
    where there is no meta kernel."""

    def to_meta(value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            return torch.empty_strided(
                value.shape, value.stride(), dtype=value.dtype, device="meta"
            )
        if isinstance(value, torch.Generator):
            return None
        return value

    meta_kwargs = {k: to_meta(v) for k, v in kwargs.items()}
    if "device" in meta_kwargs:
        meta_kwargs["device"] = torch.device("meta")
    try:
        return func(*pytree.tree_map(to_meta, args), **meta_kwargs)
    except Exception:  # noqa: BLE001 - no meta kernel: the op runs for real
        return None


def _writes_in_place(func: Any) -> bool:
    return any(a.alias_info is not None and a.alias_info.is_write for a in func._schema.arguments)


def _mutated(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> torch.Tensor | None:
    """The one tensor an in-place or `out=` op writes and returns; None for ops that write
    several (they run for real)."""
    schema = func._schema
    written = [a for a in schema.arguments if a.alias_info is not None and a.alias_info.is_write]
    if len(written) != 1 or len(schema.returns) != 1:
        return None
    first = written[0]
    index = next(i for i, a in enumerate(schema.arguments) if a is first)
    value = kwargs.get(first.name) if first.kwarg_only or index >= len(args) else args[index]
    return value if isinstance(value, torch.Tensor) else None
