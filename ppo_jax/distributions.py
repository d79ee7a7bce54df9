"""Action distributions: categorical (discrete) and diagonal Gaussian with state-independent log-std.

Written out rather than taken from a distribution library: four functions, each a
line of algebra, and no dependency. Shapes: ``[..., A]`` parameters, actions
``[...]`` (discrete, int32) or ``[..., A]`` (continuous, float32).
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


def sample(key: jax.Array, dist: PolicyDist) -> jax.Array:
    if dist.log_std is None:
        return jax.random.categorical(key, dist.loc, axis=-1)
    return dist.loc + jnp.exp(dist.log_std) * jax.random.normal(key, dist.loc.shape, dist.loc.dtype)


def mode(dist: PolicyDist) -> jax.Array:
    """The most likely action (argmax / mean): the deterministic policy."""
    if dist.log_std is None:
        return jnp.argmax(dist.loc, axis=-1)
    return dist.loc


def log_prob(dist: PolicyDist, action: jax.Array) -> jax.Array:
    """log pi(action); shape [...]."""
    if dist.log_std is None:
        logp = jax.nn.log_softmax(dist.loc, axis=-1)
        return jnp.take_along_axis(logp, action[..., None].astype(jnp.int32), axis=-1)[..., 0]
    z = (action - dist.loc) * jnp.exp(-dist.log_std)
    return jnp.sum(-0.5 * z**2 - dist.log_std - 0.5 * math.log(2 * math.pi), axis=-1)


def entropy(dist: PolicyDist) -> jax.Array:
    """Entropy H(pi); shape [...]."""
    if dist.log_std is None:
        logp = jax.nn.log_softmax(dist.loc, axis=-1)
        return -jnp.sum(jnp.exp(logp) * logp, axis=-1)
    per_dim = dist.log_std + 0.5 * math.log(2 * math.pi * math.e)
    return jnp.broadcast_to(jnp.sum(per_dim, axis=-1), dist.loc.shape[:-1])


def kl_divergence(p: PolicyDist, q: PolicyDist) -> jax.Array:
    """Exact KL(p || q) between two distributions of the same family; shape [...]."""
    if p.log_std is None:
        logp = jax.nn.log_softmax(p.loc, axis=-1)
        logq = jax.nn.log_softmax(q.loc, axis=-1)
        return jnp.sum(jnp.exp(logp) * (logp - logq), axis=-1)
    var_ratio = jnp.exp(2.0 * (p.log_std - q.log_std))
    mean_term = ((p.loc - q.loc) * jnp.exp(-q.log_std)) ** 2
    return 0.5 * jnp.sum(var_ratio + mean_term - 1.0 - 2.0 * (p.log_std - q.log_std), axis=-1)
