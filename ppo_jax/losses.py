"""The PPO objective, written per sample and vmapped over the minibatch.

Schulman et al. (2017), "Proximal Policy Optimization Algorithms": eq. 7
(clipped surrogate) and eq. 9 (total objective L^CLIP - c1 L^VF + c2 S). The
loss minimised here is its negation: ``-L_clip + c1 * L_vf - c2 * H``.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from ppo_jax import distributions


def clipped_surrogate_loss(
    log_prob: jax.Array,
    old_log_prob: jax.Array,
    advantage: jax.Array,
    *,
    clip_eps: jax.typing.ArrayLike,
) -> jax.Array:
    """Per-sample ``-min(r A, clip(r, 1-eps, 1+eps) A)`` with ``r = exp(log_prob - old_log_prob)``.

    The ``min`` takes the pessimistic side: for A > 0 the objective stops growing
    once r > 1 + eps (zero gradient), for A < 0 once r < 1 - eps; on the other
    side of the range the unclipped term is smaller and keeps its gradient.
    Same shape as the inputs.
    """
    ratio = jnp.exp(log_prob - old_log_prob)
    unclipped = ratio * advantage
    clipped = jnp.clip(ratio, 1.0 - clip_eps, 1.0 + clip_eps) * advantage
    return -jnp.minimum(unclipped, clipped)


def value_loss(
    value: jax.Array,
    old_value: jax.Array,
    target: jax.Array,
    *,
    vf_clip_eps: jax.typing.ArrayLike,
    clip: bool,
) -> jax.Array:
    """Per-sample ``0.5 (V - target)^2``; with ``clip``, the max with the loss of
    ``old_value + clip(V - old_value, -eps, eps)`` (Huang et al. 2022, detail 9)."""
    loss = 0.5 * (value - target) ** 2
    if not clip:
        return loss
    clipped_value = old_value + jnp.clip(value - old_value, -vf_clip_eps, vf_clip_eps)
    return jnp.maximum(loss, 0.5 * (clipped_value - target) ** 2)


class Minibatch(NamedTuple):
    """One minibatch, every field ``[M, ...]``."""

    obs: jax.Array  # [M, obs_dim]
    action: jax.Array  # [M] int32 or [M, A] float32
    log_prob: jax.Array  # [M] log pi_old(a|s)
    value: jax.Array  # [M] V_old(s)
    advantage: jax.Array  # [M]
    target: jax.Array  # [M] value target (GAE return)


def explained_variance(prediction: jax.Array, target: jax.Array) -> jax.Array:
    """1 - Var[target - prediction] / Var[target]; NaN when the target is constant."""
    var_target = jnp.var(target)
    return jnp.where(var_target > 0, 1.0 - jnp.var(target - prediction) / jnp.where(var_target > 0, var_target, 1.0), jnp.nan)


def ppo_loss(params, apply_fn, batch: Minibatch, cfg) -> tuple[jax.Array, dict[str, jax.Array]]:
    """Total PPO loss on a minibatch and its diagnostics (all scalars).

    ``cfg`` supplies clip_eps, vf_clip_eps, ent_coef, vf_coef (traced) and
    norm_adv, clip_vloss (static).
    """
    dist, value = apply_fn(params, batch.obs)
    advantage = batch.advantage
    if cfg.norm_adv:
        advantage = (advantage - advantage.mean()) / (advantage.std() + 1e-8)

    def per_sample(dist_i, value_i, action, old_log_prob, old_value, adv, target):
        log_prob = distributions.log_prob(dist_i, action)
        log_ratio = log_prob - old_log_prob
        ratio = jnp.exp(log_ratio)
        return dict(
            policy_loss=clipped_surrogate_loss(log_prob, old_log_prob, adv, clip_eps=cfg.clip_eps),
            value_loss=value_loss(value_i, old_value, target, vf_clip_eps=cfg.vf_clip_eps, clip=cfg.clip_vloss),
            entropy=distributions.entropy(dist_i),
            approx_kl=(ratio - 1.0) - log_ratio,
            clip_fraction=(jnp.abs(ratio - 1.0) > cfg.clip_eps).astype(jnp.float32),
        )

    dist_axes = distributions.PolicyDist(0, None)
    terms = jax.vmap(per_sample, in_axes=(dist_axes, 0, 0, 0, 0, 0, 0))(
        dist, value, batch.action, batch.log_prob, batch.value, advantage, batch.target
    )
    metrics = {name: term.mean() for name, term in terms.items()}
    loss = metrics["policy_loss"] + cfg.vf_coef * metrics["value_loss"] - cfg.ent_coef * metrics["entropy"]
    metrics["explained_variance"] = explained_variance(value, batch.target)
    return loss, metrics
