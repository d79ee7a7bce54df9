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
from ppo_jax.losses import OBJECTIVES, policy_loss, value_loss


class Minibatch(NamedTuple):
    """One minibatch, every field ``[M, ...]``."""

    obs: jax.Array  # [M, obs_dim]
    action: jax.Array  # [M] int32 or [M, A] float32
    log_prob: jax.Array  # [M] log pi_old(a|s)
    value: jax.Array  # [M] V_old(s)
    advantage: jax.Array  # [M]
    target: jax.Array  # [M] value target (GAE return)
    old_dist: distributions.PolicyDist | distributions.TanhGaussian  # pi_old(.|s): loc [M, A], log_std [M, A] or None


class LossCoefficients(NamedTuple):
    """The coefficients in effect in the loss, which may change during a run (schedules, adaptation), scalars."""

    clip_eps: jax.Array
    ent_coef: jax.Array
    kl_beta: jax.Array


def explained_variance(prediction: jax.Array, target: jax.Array) -> jax.Array:
    """1 - Var[target - prediction] / Var[target]; NaN when the target is constant."""
    var_target = jnp.var(target)
    return jnp.where(
        var_target > 0, 1.0 - jnp.var(target - prediction) / jnp.where(var_target > 0, var_target, 1.0), jnp.nan
    )


def sample_axes(dist):
    """``vmap`` axes of a distribution over samples: its loc's first axis, and its log-std's where it has one per sample."""
    per_sample_std = dist.log_std is not None and dist.log_std.ndim == dist.loc.ndim
    return type(dist)(0, 0 if per_sample_std else None)


def ppo_loss(
    params, apply_fn, batch: Minibatch, cfg, coefs: LossCoefficients
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """Total PPO loss ``policy + vf_coef * value - ent_coef * entropy`` on a minibatch, and diagnostics (scalars).

    ``cfg`` supplies the static switches (objective, norm_adv, clip_vloss) and
    vf_clip_eps, vf_coef, dual_clip_c; ``coefs`` the current clip_eps, ent_coef, kl_beta.
    """
    dist, value = apply_fn(params, batch.obs)
    return loss_from_outputs(dist, value, batch, cfg, coefs)


def loss_from_outputs(
    dist, value: jax.Array, batch: Minibatch, cfg, coefs: LossCoefficients
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """``ppo_loss`` given the network's outputs on ``batch.obs``: ``dist`` (loc ``[M, A]``) and ``value`` ``[M]``."""
    advantage = batch.advantage
    if cfg.norm_adv:
        advantage = (advantage - advantage.mean()) / (advantage.std() + 1e-8)
    uses_kl = OBJECTIVES[cfg.objective].uses_kl
    squashed = isinstance(dist, distributions.TanhGaussian)

    def noise(old_dist_i, action):
        """A tanh-Gaussian's entropy is estimated at the stored action's standard normal draw, reparameterized."""
        return distributions.standard_noise(old_dist_i, action) if squashed else None

    def per_sample(dist_i, old_dist_i, value_i, action, old_log_prob, old_value, adv, target):
        log_prob = distributions.log_prob(dist_i, action)
        log_ratio = log_prob - old_log_prob
        ratio = jnp.exp(log_ratio)
        kl = distributions.kl_divergence(old_dist_i, dist_i) if uses_kl else jnp.zeros_like(log_prob)
        return dict(
            policy_loss=policy_loss(
                cfg.objective,
                log_prob,
                old_log_prob,
                adv,
                kl,
                clip_eps=coefs.clip_eps,
                kl_beta=coefs.kl_beta,
                dual_clip_c=cfg.dual_clip_c,
            ),
            value_loss=value_loss(value_i, old_value, target, vf_clip_eps=cfg.vf_clip_eps, clip=cfg.clip_vloss),
            entropy=distributions.entropy(dist_i, noise=noise(old_dist_i, action)),
            approx_kl=(ratio - 1.0) - log_ratio,
            clip_fraction=(jnp.abs(ratio - 1.0) > coefs.clip_eps).astype(jnp.float32),
        )

    terms = jax.vmap(per_sample, in_axes=(sample_axes(dist), sample_axes(batch.old_dist), 0, 0, 0, 0, 0, 0))(
        dist, batch.old_dist, value, batch.action, batch.log_prob, batch.value, advantage, batch.target
    )
    metrics = {name: term.mean() for name, term in terms.items()}
    loss = metrics["policy_loss"] + cfg.vf_coef * metrics["value_loss"] - coefs.ent_coef * metrics["entropy"]
    metrics["explained_variance"] = explained_variance(value, batch.target)
    return loss, metrics
