"""The loop over updates inside a training program, shared by every engine: ``scan_updates``.

An engine is three pure functions (``ppo_jax.task_contract``): ``init(cfg, key, shared)``
-> carry, ``step(cfg, carry, update_idx, shared)`` -> (carry, metrics) and
``finish(cfg, carry, metrics)`` -> output. A whole run is ::

    carry, metrics = scan_updates(step, init(cfg, key, shared), 0, num_updates, num_updates=num_updates)

and a segment of ``num`` updates from ``first`` (``ppo_jax.segments``) is the same
scan with ``first`` traced, so one compiled program serves every segment of a run.

Every update's metrics get one more, computed here for every engine:
``non_finite`` (``ppo_jax.final_values.NON_FINITE``), 1.0 when after that update
the ``loss`` metric or any floating-point leaf of the checked training state
(``checked(carry)``; default the whole carry: parameters, optimizer state,
normalization statistics, env state) is NaN or infinite, else 0.0. It is one
reduction per leaf per update that only reads the carry: the other metrics and
the training state are those of the program without it (compared bit for bit
on CPU: PPO and RLHF runs, a sweep).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import jax
import jax.numpy as jnp
from jax import lax

from ppo_jax.final_values import NON_FINITE
from ppo_jax.progress import report_update


def scan_updates(
    step: Callable,
    carry,
    first,
    num: int,
    *,
    num_updates: int,
    masked: bool = False,
    on_update: Callable | None = None,
    report_every: int = 1,
    checked: Callable | None = None,
):
    """Updates ``first .. first + num - 1`` of a run of ``num_updates``: ``lax.scan`` over ``step(carry, update_idx)``.

    Args:
      step: ``step(carry, update_idx) -> (carry, metrics)``, metrics a dict of scalars.
      carry: the training state before update ``first``.
      first: the first update's index (an int, or a traced int32 scalar).
      num: updates in this scan (static).
      num_updates: updates in the whole run (schedules and ``report_update`` use it).
      masked: the scan may run past the run's end (the last, shorter segment of a
        run cut into equal segments): an update at or past ``num_updates`` leaves
        the carry unchanged and gives NaN metrics (``lax.cond`` on the unbatched
        counter). Without it the program is exactly the unmasked scan.
      on_update, report_every: see ``ppo_jax.progress.report_update``.
      checked: ``checked(carry)`` -> the part of the carry that must stay finite
        (``Task.checked_state``: PPO leaves out the episode returns that are NaN
        until an episode ends); None: all of it.

    Returns:
      ``(carry, metrics)``, ``metrics[name]`` of shape ``[num]``: the step's
      metrics and ``non_finite`` (see the module docstring).
    """

    def body(carry, update_idx):
        carry, metrics = step(carry, update_idx)
        metrics = {**metrics, NON_FINITE: non_finite(carry if checked is None else checked(carry), metrics)}
        report_update(on_update, update_idx, metrics, num_updates=num_updates, every=report_every)
        return carry, metrics

    def guarded(carry, update_idx):
        shapes = jax.eval_shape(body, carry, update_idx)[1]

        def skip(carry, update_idx):
            return carry, jax.tree.map(lambda s: jnp.full(s.shape, _blank(s.dtype), s.dtype), shapes)

        return lax.cond(update_idx < num_updates, body, skip, carry, update_idx)

    indices = first + jnp.arange(num, dtype=jnp.int32)
    return lax.scan(guarded if masked else body, carry, indices)


def _blank(dtype):
    """What a skipped update reports: NaN for a float metric, 0 for a count."""
    return jnp.nan if jnp.issubdtype(dtype, jnp.inexact) else 0


def non_finite(state, metrics: dict) -> jax.Array:
    """float32 1.0 if ``metrics["loss"]`` (when there is one) or any inexact leaf of ``state`` is NaN or infinite, else 0.0."""
    checks = [jnp.isfinite(x).all() for x in jax.tree.leaves(state) if jnp.issubdtype(x.dtype, jnp.inexact)]
    if "loss" in metrics:
        checks.append(jnp.isfinite(metrics["loss"]).all())
    finite = functools.reduce(jnp.logical_and, checks, jnp.bool_(True))
    return jnp.where(finite, 0.0, 1.0).astype(jnp.float32)
