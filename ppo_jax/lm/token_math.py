"""Reductions over response tokens: masked means, whitening, per-token log-probabilities.

Every function takes a bool ``mask`` of the data's shape (True: a response token)
and reads the other entries only through ``jnp.where``, so padding may hold inf or
NaN and still gets exactly zero gradient.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def token_log_probs(logits: jax.Array, tokens: jax.Array) -> jax.Array:
    """``log softmax(logits)[tokens]``: logits ``[..., V]``, tokens ``[...]`` -> ``[...]``."""
    return jnp.take_along_axis(jax.nn.log_softmax(logits, -1), tokens[..., None].astype(jnp.int32), -1)[..., 0]


def high_entropy_tokens(entropy: jax.Array, mask: jax.Array, share: jax.typing.ArrayLike) -> jax.Array:
    """``bool [...]``: the tokens of ``mask`` whose ``entropy`` is at or above the ``1 - share`` quantile of theirs.

    The top ``share`` of the response tokens by entropy, the "forking tokens" of Wang et
    al. (2025, "Beyond the 80/20 rule", arXiv:2506.01939), with the quantile interpolated
    linearly as ``torch.quantile`` in TRL's ``top_entropy_quantile``; ``share`` 1 keeps
    every token of ``mask``. ``share`` may be traced.
    """
    threshold = jnp.nanquantile(jnp.where(mask, entropy, jnp.nan), 1.0 - share)
    return mask & (entropy >= threshold)


def masked_mean(x: jax.Array, mask: jax.Array) -> jax.Array:
    """Mean of ``x`` over the True entries of ``mask`` (same shape); masked entries get zero gradient."""
    return jnp.where(mask, x, 0.0).sum() / jnp.maximum(mask.sum(), 1)


def whiten(x: jax.Array, mask: jax.Array, eps: jax.typing.ArrayLike) -> jax.Array:
    """``(x - mean) / (std + eps)`` with the mean and population std over the True entries of ``mask``; 0 elsewhere."""
    centred = x - masked_mean(x, mask)
    return jnp.where(mask, centred / (jnp.sqrt(masked_mean(centred**2, mask)) + eps), 0.0)


def masked_explained_variance(prediction: jax.Array, target: jax.Array, mask: jax.Array) -> jax.Array:
    """1 - Var[target - prediction] / Var[target] over the masked entries; NaN if the target is constant there."""

    def var(x):
        return masked_mean((x - masked_mean(x, mask)) ** 2, mask)

    var_target = var(target)
    return jnp.where(
        var_target > 0, 1.0 - var(target - prediction) / jnp.where(var_target > 0, var_target, 1.0), jnp.nan
    )
