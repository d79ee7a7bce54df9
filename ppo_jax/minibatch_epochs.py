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
    micro_batches: int = 1,
    totals: Callable | None = None,
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
      micro_batches: gradient accumulation: each minibatch is cut into this many equal micro-batches (it divides
        the minibatch size), run one after another by ``lax.scan``; the step applies the mean of their gradients
        once, and the metrics are the mean of theirs. That is the minibatch's gradient when the minibatch's loss
        is the mean of the micro-batches' losses: a mean over rows is, a mean over tokens of rows of differing
        lengths is not, unless ``totals`` supplies the minibatch's denominators.
      totals: optional ``totals(minibatch) -> pytree``, computed once on the whole minibatch (its data only: no
        gradient flows through it) and passed on, ``loss_fn(params, micro_batch, totals)``; the loss must then
        return ``micro_batches`` times the micro-batch's share of the minibatch's loss (its sums over the
        denominators in ``totals``), so that the mean over micro-batches is the minibatch's loss.

    Returns:
      The new train state and the metrics averaged over all epochs x minibatches,
      plus ``loss``, ``grad_norm`` (pre-clip global norm) and ``update_fraction``
      (the share of steps taken: 1 unless ``stop`` fired).
    """
    size = jax.tree.leaves(batch)[0].shape[0]
    mb_size = size // num_minibatches
    grad_fn = jax.value_and_grad(loss_fn, has_aux=True)

    if mb_size % micro_batches:
        raise ValueError(f"micro_batches {micro_batches} does not divide the minibatch of {mb_size} rows")

    def gradient(params, minibatch):
        extra = () if totals is None else (jax.tree.map(lax.stop_gradient, totals(minibatch)),)
        if micro_batches == 1:
            return grad_fn(params, minibatch, *extra)
        micro = jax.tree.map(lambda x: x.reshape((micro_batches, mb_size // micro_batches) + x.shape[1:]), minibatch)

        def accumulate(summed, micro_batch):
            out, grads = grad_fn(params, micro_batch, *extra)
            return jax.tree.map(lambda total, g: total + g.astype(jnp.float32), summed, grads), out

        zeros = jax.tree.map(lambda p: jnp.zeros(p.shape, jnp.float32), params)
        summed, outs = lax.scan(accumulate, zeros, micro)
        grads = jax.tree.map(lambda total, p: (total / micro_batches).astype(p.dtype), summed, params)
        return jax.tree.map(lambda x: x.mean(0), outs), grads

    def minibatch_step(carry, minibatch):
        train_state, stopped = carry
        (loss, metrics), grads = gradient(train_state.params, minibatch)
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
