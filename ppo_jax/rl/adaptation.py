"""Coefficients adapted over a run: the adaptive KL penalty and the adaptive clip range (schedules: ``ppo_jax.schedules``).

The adapted values live in ``AdaptedCoefficients``, carried in the training state, so
they work under ``vmap`` (each setting and seed adapts its own).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from ppo_jax.losses import OBJECTIVES

ADAPTIVE_CLIP_RANGE = (0.01, 0.5)
"""Bounds of clip_eps under adaptive_clip."""


class AdaptedCoefficients(NamedTuple):
    """Adapted coefficients, scalars: the base clip range and the KL penalty beta."""

    clip_eps: jax.Array
    kl_beta: jax.Array


def init_coefficients(cfg) -> AdaptedCoefficients:
    return AdaptedCoefficients(jnp.asarray(cfg.clip_eps, jnp.float32), jnp.asarray(cfg.kl_beta, jnp.float32))


def adapt_kl_beta(beta: jax.Array, kl: jax.Array, kl_target) -> jax.Array:
    """PPO paper, sec. 4: halve beta if KL < d_targ / 1.5, double it if KL > 1.5 d_targ."""
    beta = jnp.where(kl < kl_target / 1.5, beta / 2.0, beta)
    return jnp.where(kl > kl_target * 1.5, beta * 2.0, beta)


def adapt_clip_eps(clip_eps: jax.Array, kl: jax.Array, kl_target) -> jax.Array:
    """Shrink eps by 1.5 if KL > 1.5 target, grow it by 1.5 if KL < target / 1.5; kept in ADAPTIVE_CLIP_RANGE."""
    clip_eps = jnp.where(kl > kl_target * 1.5, clip_eps / 1.5, clip_eps)
    clip_eps = jnp.where(kl < kl_target / 1.5, clip_eps * 1.5, clip_eps)
    return jnp.clip(clip_eps, *ADAPTIVE_CLIP_RANGE)


def adapt(coefs: AdaptedCoefficients, kl: jax.Array, cfg) -> AdaptedCoefficients:
    """The coefficients for the next update, given the KL(pi_old || pi_new) this update produced."""
    clip_eps, kl_beta = coefs
    if OBJECTIVES[cfg.objective].adapts_beta:
        kl_beta = adapt_kl_beta(kl_beta, kl, cfg.kl_target)
    if cfg.adaptive_clip:
        clip_eps = adapt_clip_eps(clip_eps, kl, cfg.clip_kl_target)
    return AdaptedCoefficients(clip_eps, kl_beta)
