"""``vmap_runs``: ``jax.vmap`` over a leading axis of runs, without the axis when there is only one run.

Every program that trains runs side by side (``ppo-jax train``'s seeds, a sweep's
(setting, seed) pairs) vmaps over them. Over a single run that vmap is not free on
XLA's CPU backend: the degenerate batch axis is simplified away, but layout
assignment then stores the loop-carried weight matrices transposed, and every
minibatch step transposes them back (the cost is in docs/benchmarks/). ``vmap_runs`` calls
the function unbatched for one run and restores the axis on its outputs, so
callers keep one calling convention. Results agree with the vmapped program to
float tolerance (the kernels differ), not bit for bit.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp


def vmap_runs(fn: Callable, in_axes: Sequence[int | None]) -> Callable:
    """``jax.vmap(fn, in_axes)`` with outputs batched on axis 0, unbatched when the run axis has size 1.

    Args:
      fn: the per-run function of positional arguments.
      in_axes: per positional argument, 0 (batched over runs on its leading axis) or
        None (shared by every run).
    """
    in_axes = tuple(in_axes)
    if any(axis not in (0, None) for axis in in_axes) or all(axis is None for axis in in_axes):
        raise ValueError(
            f"vmap_runs maps leading axes: in_axes must be 0 or None per argument, one 0 at least; got {in_axes}"
        )
    batched = jax.vmap(fn, in_axes=in_axes)

    def call(*args):
        if len(args) != len(in_axes):
            raise TypeError(f"expected {len(in_axes)} positional arguments (in_axes {in_axes}), got {len(args)}")
        sizes = {
            leaf.shape[0] for arg, axis in zip(args, in_axes, strict=True) if axis == 0 for leaf in jax.tree.leaves(arg)
        }
        if sizes != {1}:
            return batched(*args)
        one_run = [
            arg if axis is None else jax.tree.map(lambda x: x[0], arg) for arg, axis in zip(args, in_axes, strict=True)
        ]
        return jax.tree.map(_add_run_axis, fn(*one_run))

    return call


def _add_run_axis(x):
    """``x`` with a leading axis of size 1, as ``jax.vmap`` returns it (a Python scalar becomes an array)."""
    return (x if hasattr(x, "ndim") else jnp.asarray(x))[None]
