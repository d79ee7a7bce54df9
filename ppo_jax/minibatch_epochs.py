"""Epochs of shuffled minibatches, one gradient step each, via ``lax.scan``: the update loop every task shares."""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import optax
from flax.training.train_state import TrainState
from jax import lax


def minibatch_epochs(
    train_state: TrainState,
    batch,
    loss_fn: Callable,
    key: jax.Array,
    *,
    num_minibatches: int,
    update_epochs: int,
    stop: Callable[[dict], jax.Array] | None = None,
) -> tuple[TrainState, dict[str, jax.Array]]:
    """``update_epochs`` passes over ``batch`` in ``num_minibatches`` shuffled minibatches.

    Args:
      train_state: parameters and optimizer.
      batch: a pytree whose leaves share a leading axis ``[N, ...]`` (N divisible by
        ``num_minibatches``): transitions, or whole sequences.
      loss_fn: ``loss_fn(params, minibatch) -> (loss, metrics)``, metrics a flat dict of scalars.
      key: shuffles each epoch (one permutation of the N rows per epoch).
      stop: optional ``stop(metrics) -> bool``; once true at a minibatch step, that
        step and every later one of this call are skipped (early stopping on KL).

    Returns:
      The new train state and the metrics averaged over all epochs x minibatches,
      plus ``loss``, ``grad_norm`` (pre-clip global norm) and ``update_fraction``
      (the share of steps taken: 1 unless ``stop`` fired).
    """
    size = jax.tree.leaves(batch)[0].shape[0]
    mb_size = size // num_minibatches
    grad_fn = jax.value_and_grad(loss_fn, has_aux=True)

    def minibatch_step(carry, minibatch):
        train_state, stopped = carry
        (loss, metrics), grads = grad_fn(train_state.params, minibatch)
        metrics = {**metrics, "loss": loss, "grad_norm": optax.tree.norm(grads)}
        new_state = train_state.apply_gradients(grads=grads)
        if stop is not None:
            stopped = stopped | stop(metrics)
            new_state = jax.tree.map(lambda old, new: jnp.where(stopped, old, new), train_state, new_state)
        metrics["update_fraction"] = 1.0 - stopped.astype(jnp.float32)
        return (new_state, stopped), metrics

    def epoch(carry, epoch_key):
        permutation = jax.random.permutation(epoch_key, size)
        shuffled = jax.tree.map(lambda x: x[permutation].reshape((num_minibatches, mb_size) + x.shape[1:]), batch)
        return lax.scan(minibatch_step, carry, shuffled)

    (train_state, _), metrics = lax.scan(epoch, (train_state, jnp.array(False)), jax.random.split(key, update_epochs))
    return train_state, jax.tree.map(jnp.mean, metrics)
