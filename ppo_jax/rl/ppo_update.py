"""The PPO update of one rollout batch: ``minibatch_epochs`` on the PPO loss, then the exact KL it caused."""

from __future__ import annotations

import jax
from flax.training.train_state import TrainState

from ppo_jax import distributions
from ppo_jax.minibatch_epochs import minibatch_epochs
from ppo_jax.rl.ppo_loss import LossCoefficients, Minibatch, ppo_loss
from ppo_jax.rl.sequences import Sequences, forward, sequence_loss


def update(
    train_state: TrainState, batch: Minibatch | Sequences, cfg, coefs: LossCoefficients, key: jax.Array
) -> tuple[TrainState, dict[str, jax.Array]]:
    """Train on one rollout ``batch``: transitions (every field ``[N, ...]``, N = num_envs*num_steps, shuffled
    and split by transition) or, for a recurrent network, ``Sequences`` (split by env).

    Returns the new train state and diagnostics (scalars): the loss terms averaged
    over all epochs x minibatches, the pre-clip gradient norm, ``kl`` — the exact
    KL(pi_old || pi_new) over the batch after the update — and ``update_fraction``,
    the share of minibatch steps taken (below 1 only with ``early_stop_kl``: once a
    minibatch's approx KL exceeds ``target_kl``, it and every later step are skipped).
    """
    apply_fn = train_state.apply_fn
    loss = sequence_loss if isinstance(batch, Sequences) else ppo_loss
    train_state, metrics = minibatch_epochs(
        train_state,
        batch,
        lambda params, minibatch: loss(params, apply_fn, minibatch, cfg, coefs),
        key,
        num_minibatches=cfg.num_minibatches,
        update_epochs=cfg.update_epochs,
        stop=(lambda m: m["approx_kl"] > cfg.target_kl) if cfg.early_stop_kl else None,
    )
    if isinstance(batch, Sequences):
        new_dist, _, steps = forward(train_state.params, apply_fn, batch)
        old_dist = steps.old_dist
    else:
        (new_dist, _), old_dist = apply_fn(train_state.params, batch.obs), batch.old_dist
    metrics["kl"] = distributions.kl_divergence(old_dist, new_dist).mean()
    return train_state, metrics
