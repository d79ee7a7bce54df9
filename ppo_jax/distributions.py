"""Action distributions: categorical (discrete), diagonal Gaussian, tanh-squashed Gaussian.

Written out rather than taken from a distribution library: a few functions, each a
line of algebra, and no dependency. Shapes: ``[..., A]`` parameters, actions
``[...]`` (discrete, int32) or ``[..., A]`` (continuous, float32).

The Gaussian (``PolicyDist`` with a log-std) is the PPO paper's policy: its action
is clipped to the action bounds *at the env* and stored unclipped. The
tanh-squashed Gaussian (``TanhGaussian``, Brax PPO's and SAC's policy) acts with
``tanh(u)`` scaled to the bounds; what is stored is the pre-squash sample ``u``,
so the log-density of the acted action, ``log N(u) - sum log(1 - tanh(u)^2)``
(Haarnoja et al. 2018, eq. 21), never needs ``atanh`` of a saturated action.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp


class PolicyDist(NamedTuple):
    """``loc`` holds logits [..., A] (discrete) or the Gaussian mean [..., A]; ``log_std`` is [A] or None."""

    loc: jax.Array
    log_std: jax.Array | None


class TanhGaussian(NamedTuple):
    """The law of ``tanh(u)``, ``u ~ N(loc, exp(log_std)^2)``: ``loc`` [..., A], ``log_std`` [A] or [..., A].

    Samples, modes and the actions it is given are pre-squash values ``u``; ``env_action`` squashes them.
    """

    loc: jax.Array
    log_std: jax.Array


def _log_one_minus_tanh_sq(u: jax.Array) -> jax.Array:
    """``log(1 - tanh(u)^2) = 2 (log 2 - u - softplus(-2u))``, exact where tanh(u) rounds to +-1."""
    return 2.0 * (math.log(2.0) - u - jax.nn.softplus(-2.0 * u))


def sample(key: jax.Array, dist: PolicyDist) -> jax.Array:
    if dist.log_std is None:
        return jax.random.categorical(key, dist.loc, axis=-1)
    return dist.loc + jnp.exp(dist.log_std) * jax.random.normal(key, dist.loc.shape, dist.loc.dtype)


def mode(dist: PolicyDist | TanhGaussian) -> jax.Array:
    """The deterministic policy's action: argmax logits, the Gaussian mean (a TanhGaussian's pre-squash mean)."""
    if dist.log_std is None:
        return jnp.argmax(dist.loc, axis=-1)
    return dist.loc


def log_prob(dist: PolicyDist | TanhGaussian, action: jax.Array) -> jax.Array:
    """log pi(action); shape [...]. For ``TanhGaussian``, ``action`` is the pre-squash ``u`` and the
    result the log-density of ``tanh(u)`` in [-1, 1]^A (the Jacobian term included)."""
    if dist.log_std is None:
        logp = jax.nn.log_softmax(dist.loc, axis=-1)
        return jnp.take_along_axis(logp, action[..., None].astype(jnp.int32), axis=-1)[..., 0]
    z = (action - dist.loc) * jnp.exp(-dist.log_std)
    gaussian = jnp.sum(-0.5 * z**2 - dist.log_std - 0.5 * math.log(2 * math.pi), axis=-1)
    if isinstance(dist, TanhGaussian):
        return gaussian - jnp.sum(_log_one_minus_tanh_sq(action), axis=-1)
    return gaussian


def entropy(dist: PolicyDist | TanhGaussian, noise: jax.Array | None = None) -> jax.Array:
    """Entropy H(pi); shape [...].

    A tanh-squashed Gaussian has no closed form: ``H = H(N) + E[sum log(1 - tanh(u)^2)]``
    is estimated with one reparameterized sample ``u = loc + std * noise`` (``noise`` [..., A]
    standard normal, required), as Brax PPO does; its gradient flows through loc and log_std.
    """
    if dist.log_std is None:
        logp = jax.nn.log_softmax(dist.loc, axis=-1)
        return -jnp.sum(jnp.exp(logp) * logp, axis=-1)
    per_dim = dist.log_std + 0.5 * math.log(2 * math.pi * math.e)
    gaussian = jnp.broadcast_to(jnp.sum(per_dim, axis=-1), dist.loc.shape[:-1])
    if isinstance(dist, TanhGaussian):
        if noise is None:
            raise ValueError("the entropy of a TanhGaussian is estimated from a sample: pass noise")
        u = dist.loc + jnp.exp(dist.log_std) * noise
        return gaussian + jnp.sum(_log_one_minus_tanh_sq(u), axis=-1)
    return gaussian


def standard_noise(dist: PolicyDist | TanhGaussian, action: jax.Array) -> jax.Array:
    """The standard normal draw that made the continuous ``action`` from ``dist``: ``(action - loc) / std``."""
    return (action - dist.loc) * jnp.exp(-dist.log_std)


def env_action(dist: PolicyDist | TanhGaussian, action: jax.Array, low, high) -> jax.Array:
    """What the env receives for a sampled or modal ``action``: discrete as is; a Gaussian's clipped to
    ``[low, high]`` (the stored action stays unclipped); a TanhGaussian's ``tanh(u)`` scaled onto ``[low, high]``."""
    if dist.log_std is None:
        return action
    if isinstance(dist, TanhGaussian):
        return low + 0.5 * (jnp.tanh(action) + 1.0) * (high - low)
    return jnp.clip(action, low, high)


def kl_divergence(p: PolicyDist | TanhGaussian, q: PolicyDist | TanhGaussian) -> jax.Array:
    """Exact KL(p || q) between two distributions of the same family; shape [...].

    For tanh-squashed Gaussians it is the KL of the underlying Gaussians (KL is invariant under the
    bijection tanh)."""
    if p.log_std is None:
        logp = jax.nn.log_softmax(p.loc, axis=-1)
        logq = jax.nn.log_softmax(q.loc, axis=-1)
        return jnp.sum(jnp.exp(logp) * (logp - logq), axis=-1)
    var_ratio = jnp.exp(2.0 * (p.log_std - q.log_std))
    mean_term = ((p.loc - q.loc) * jnp.exp(-q.log_std)) ** 2
    return 0.5 * jnp.sum(var_ratio + mean_term - 1.0 - 2.0 * (p.log_std - q.log_std), axis=-1)
