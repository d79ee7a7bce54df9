"""The PPO update: ``update_epochs`` passes of shuffled minibatches, each a gradient step, via ``lax.scan``."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax
from flax.training.train_state import TrainState
from jax import lax

from ppo_jax import distributions
from ppo_jax.losses import LossCoefficients, Minibatch, ppo_loss


def make_optimizer() -> optax.GradientTransformation:
    """Global-norm clip + Adam, with lr, max_grad_norm and eps injected into the optimizer state.

    The transformation is built from placeholder constants, so ``TrainState.tx``
    (a static field) never holds a tracer; the real, possibly traced, values
    are written into the state with ``set_hyperparams``.

    ``optax.flatten`` runs clip and Adam on one concatenated vector instead of a
    dozen small leaves: the same arithmetic in a few fused ops, which cut a
    minibatch step from about 214 to 161 us on a 2-core CPU.
    """

    def chain(learning_rate, max_grad_norm, eps):
        return optax.flatten(
            optax.chain(optax.clip_by_global_norm(max_grad_norm), optax.adam(learning_rate, eps=eps))
        )

    return optax.inject_hyperparams(chain)(learning_rate=1.0, max_grad_norm=1.0, eps=1.0)


def set_hyperparams(train_state: TrainState, **values) -> TrainState:
    """Overwrite injected optimizer hyperparameters (``learning_rate``, ``max_grad_norm``, ``eps``)."""
    opt_state = train_state.opt_state
    hyperparams = dict(opt_state.hyperparams)
    for name, value in values.items():
        hyperparams[name] = jnp.asarray(value, hyperparams[name].dtype)
    return train_state.replace(opt_state=opt_state._replace(hyperparams=hyperparams))


def update(
    train_state: TrainState, batch: Minibatch, cfg, coefs: LossCoefficients, key: jax.Array
) -> tuple[TrainState, dict[str, jax.Array]]:
    """Train on one rollout ``batch`` (every field ``[N, ...]``, N = num_envs*num_steps).

    Returns the new train state and diagnostics (scalars): the loss terms averaged
    over all epochs x minibatches, the pre-clip gradient norm, ``kl`` — the exact
    KL(pi_old || pi_new) over the batch after the update — and ``update_fraction``,
    the share of minibatch steps taken (below 1 only with ``early_stop_kl``: once a
    minibatch's approx KL exceeds ``target_kl``, it and every later step are skipped).
    """
    num_mb, mb_size = cfg.num_minibatches, cfg.minibatch_size
    grad_fn = jax.value_and_grad(ppo_loss, has_aux=True)

    def minibatch_step(carry, minibatch: Minibatch):
        train_state, stopped = carry
        (loss, metrics), grads = grad_fn(train_state.params, train_state.apply_fn, minibatch, cfg, coefs)
        metrics = {**metrics, "loss": loss, "grad_norm": optax.tree.norm(grads)}
        new_state = train_state.apply_gradients(grads=grads)
        if cfg.early_stop_kl:
            stopped = stopped | (metrics["approx_kl"] > cfg.target_kl)
            new_state = jax.tree.map(lambda old, new: jnp.where(stopped, old, new), train_state, new_state)
        metrics["update_fraction"] = 1.0 - stopped.astype(jnp.float32)
        return (new_state, stopped), metrics

    def epoch(carry, epoch_key: jax.Array):
        permutation = jax.random.permutation(epoch_key, cfg.batch_size)
        shuffled = jax.tree.map(lambda x: x[permutation].reshape((num_mb, mb_size) + x.shape[1:]), batch)
        return lax.scan(minibatch_step, carry, shuffled)

    (train_state, _), metrics = lax.scan(
        epoch, (train_state, jnp.array(False)), jax.random.split(key, cfg.update_epochs)
    )
    metrics = jax.tree.map(lambda m: m.mean(), metrics)
    new_dist, _ = train_state.apply_fn(train_state.params, batch.obs)
    metrics["kl"] = distributions.kl_divergence(batch.old_dist, new_dist).mean()
    return train_state, metrics
