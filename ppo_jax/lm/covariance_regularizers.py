"""Clip-Cov and KL-Cov: restrain the few tokens whose log-prob/advantage covariance drives entropy collapse.

Cui et al. (2025), "The Entropy Mechanism of Reinforcement Learning for Reasoning
Language Models", sec. 5. Under policy gradient the entropy falls at a rate set by
the covariance between a token's log-probability and its advantage; a small
fraction of tokens with large covariance dominates it. Over the N response tokens
of the batch, token i's centred product is

    Cov_i = (log pi(y_i) - mean_j log pi(y_j)) * (A_i - mean_j A_j)

- ``clip_cov``: pick ``floor(r N)`` tokens uniformly at random among those with
  ``cov_low <= Cov_i <= cov_high`` and detach their policy gradient (their loss
  becomes 0). Defaults of the authors' recipes (``recipe/dapo/*_clip_cov.sh``):
  r = 2e-4, cov_low = 1, cov_high = 5, with the PPO range widened to eps_low = eps_high = 1.
  ``cov_expected_count`` rounds r N stochastically instead (a mean of r N tokens, so the share is r at any N:
  the authors' 2e-4 of a few hundred tokens per minibatch is then 0 tokens in most minibatches, not 1).
- ``kl_cov``: the ``floor(k N)`` tokens of largest Cov_i get the penalty
  ``beta |log pi - log pi_old|``. Recipe defaults: k = 2e-3 (Qwen2.5-7B) or 2e-4
  (32B; their ``k_percent`` is in per cent), beta = 1; their KL-Cov keeps the
  unclipped surrogate r A (no PPO clip).

As in the authors' code (PRIME-RL/Entropy-Mechanism-of-RL, ``core_algos.py``) the
count is at least 1 when the fraction is positive, the covariance is a constant
(no gradient), and Clip-Cov skips tokens the PPO clip already zeroes (``exclude``).

The fractions and bounds may be traced: the count is a traced integer, so the
selection ranks tokens by a sort and keeps ranks below the count (no Python int).
``COVARIANCE_REGULARIZERS`` is the table (``cfg.cov_reg``); each entry says which
config fields it reads, which one is its fraction and whether it draws random tokens.

Shapes: ``[M, L]``; ``mask [M, L]`` bool marks response tokens.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp

from ppo_jax.lm.token_math import masked_mean
from ppo_jax.registry import Registry


def token_covariance(log_prob: jax.Array, advantage: jax.Array, mask: jax.Array) -> jax.Array:
    """``Cov_i [M, L]``: centred log-prob times centred advantage, means over response tokens; 0 elsewhere, no gradient."""
    log_prob, advantage = jax.lax.stop_gradient(log_prob), jax.lax.stop_gradient(advantage)
    centred_log_prob = log_prob - masked_mean(log_prob, mask)
    centred_advantage = advantage - masked_mean(advantage, mask)
    return jnp.where(mask, centred_log_prob * centred_advantage, 0.0)


def selection_count(fraction: jax.typing.ArrayLike, mask: jax.Array, key: jax.Array | None = None) -> jax.Array:
    """int32 scalar: ``floor(fraction * N)`` (N response tokens), at least 1 when ``fraction > 0`` (the authors' rule);
    with ``key``, ``floor(fraction * N + u)``, u ~ U[0, 1): a count whose mean is ``fraction * N`` (stochastic
    rounding), so the share picked is ``fraction`` at any batch size."""
    if key is not None:
        return jnp.floor(fraction * mask.sum() + jax.random.uniform(key)).astype(jnp.int32)
    count = jnp.floor(fraction * mask.sum()).astype(jnp.int32)
    return jnp.where(jnp.asarray(fraction) > 0, jnp.maximum(count, 1), 0)


def _count_key(key: jax.Array, expected_count: bool) -> jax.Array | None:
    return jax.random.fold_in(key, 1) if expected_count else None


def _largest(scores: jax.Array, count: jax.Array) -> jax.Array:
    """bool, shape of ``scores``: the ``count`` largest entries (ties to the earlier index)."""
    flat = scores.reshape(-1)
    order = jnp.argsort(-flat, stable=True)
    rank = jnp.zeros_like(order).at[order].set(jnp.arange(flat.size))
    return (rank < count).reshape(scores.shape)


def clip_cov_selection(
    cov: jax.Array,
    mask: jax.Array,
    key: jax.Array,
    *,
    fraction: jax.typing.ArrayLike,
    cov_low: jax.typing.ArrayLike,
    cov_high: jax.typing.ArrayLike,
    exclude: jax.Array | None = None,
    expected_count: bool = False,
) -> jax.Array:
    """bool ``[M, L]``: Clip-Cov's tokens, ``min(selection_count, eligible)`` drawn uniformly among the eligible.

    Eligible: response tokens with ``cov_low <= cov <= cov_high``, not in ``exclude``
    (``[M, L]`` bool, e.g. tokens the PPO clip already zeroes; they still count in N). ``expected_count`` (static):
    the count is stochastically rounded (``selection_count`` with a key).
    """
    eligible = mask & (cov >= cov_low) & (cov <= cov_high)
    if exclude is not None:
        eligible = eligible & ~exclude
    priority = jnp.where(eligible, jax.random.uniform(key, cov.shape), -1.0)
    return _largest(priority, selection_count(fraction, mask, _count_key(key, expected_count))) & eligible


def kl_cov_selection(
    cov: jax.Array,
    mask: jax.Array,
    *,
    fraction: jax.typing.ArrayLike,
    key: jax.Array | None = None,
    expected_count: bool = False,
) -> jax.Array:
    """bool ``[M, L]``: KL-Cov's tokens, the ``selection_count`` response tokens of largest ``cov`` (with
    ``expected_count``, a stochastically rounded count drawn with ``key``)."""
    count = selection_count(fraction, mask, _count_key(key, expected_count))
    return _largest(jnp.where(mask, cov, -jnp.inf), count) & mask


def _clip_cov(
    cov, per_token_loss, log_prob, old_log_prob, mask, key, *, fraction, cov_low, cov_high, kl_coef, exclude,
    expected_count,
):  # fmt: skip
    selected = clip_cov_selection(
        cov, mask, key, fraction=fraction, cov_low=cov_low, cov_high=cov_high, exclude=exclude,
        expected_count=expected_count,
    )  # fmt: skip
    return jnp.where(selected, 0.0, per_token_loss), selected


def _kl_cov(
    cov, per_token_loss, log_prob, old_log_prob, mask, key, *, fraction, cov_low, cov_high, kl_coef, exclude,
    expected_count,
):  # fmt: skip
    selected = kl_cov_selection(cov, mask, fraction=fraction, key=key, expected_count=expected_count)
    penalty = kl_coef * jnp.abs(jnp.where(mask, log_prob - old_log_prob, 0.0))
    return jnp.where(selected, per_token_loss + penalty, per_token_loss), selected


class Regularizer(NamedTuple):
    fn: Callable | None
    """``fn(cov, per_token_loss, log_prob, old_log_prob, mask, key, *, fraction, cov_low, cov_high, kl_coef,
    exclude, expected_count) -> (per-token loss [M, L], selected [M, L] bool)``; None: the loss is left as it is."""
    doc: str
    reference: str = ""
    reads: tuple[str, ...] = ()
    fraction_field: str = ""
    """The config field holding its share of tokens."""
    draws_tokens: bool = False
    """Picks tokens at random (needs a key per minibatch)."""


COVARIANCE_REGULARIZERS: Registry[Regularizer] = Registry("cov_reg", "covariance regularizer")
COVARIANCE_REGULARIZERS.register("none", Regularizer(None, "no covariance regularizer"))
COVARIANCE_REGULARIZERS.register(
    "clip_cov",
    Regularizer(
        _clip_cov,
        "detach the gradient of a few random tokens of covariance in [cov_low, cov_high]",
        "Cui et al. 2025, sec. 5",
        ("clip_cov_fraction", "clip_cov_low", "clip_cov_high", "cov_expected_count"),
        "clip_cov_fraction",
        True,
    ),
)
COVARIANCE_REGULARIZERS.register(
    "kl_cov",
    Regularizer(
        _kl_cov,
        "penalise |log pi - log pi_old| on the tokens of largest covariance",
        "Cui et al. 2025, sec. 5",
        ("kl_cov_fraction", "kl_cov_coef", "cov_expected_count"),
        "kl_cov_fraction",
    ),
)


def covariance_regularized_loss(
    regularizer: str,
    per_token_loss: jax.Array,
    log_prob: jax.Array,
    old_log_prob: jax.Array,
    advantage: jax.Array,
    mask: jax.Array,
    key: jax.Array,
    *,
    fraction: jax.typing.ArrayLike,
    cov_low: jax.typing.ArrayLike,
    cov_high: jax.typing.ArrayLike,
    kl_coef: jax.typing.ArrayLike,
    already_clipped: jax.Array | None = None,
    expected_count: bool = False,
) -> tuple[jax.Array, jax.Array]:
    """``(per-token loss [M, L], selected [M, L] float32)`` after ``regularizer`` (static).

    ``none`` returns ``per_token_loss``; ``clip_cov`` sets the selected tokens' loss
    to 0 (``fraction`` is r; ``already_clipped`` is passed as ``exclude``);
    ``kl_cov`` adds ``kl_coef * |log_prob - old_log_prob|`` on the selected tokens
    (``fraction`` is k; ``cov_low``, ``cov_high`` unused; ``key`` only with ``expected_count``: the count is then
    stochastically rounded, ``selection_count``). Masked tokens keep loss 0.
    """
    entry = COVARIANCE_REGULARIZERS[regularizer]
    per_token_loss = jnp.where(mask, per_token_loss, 0.0)
    if entry.fn is None:
        return per_token_loss, jnp.zeros(mask.shape, jnp.float32)
    cov = token_covariance(log_prob, advantage, mask)
    loss, selected = entry.fn(
        cov,
        per_token_loss,
        log_prob,
        old_log_prob,
        mask,
        key,
        fraction=fraction,
        cov_low=cov_low,
        cov_high=cov_high,
        kl_coef=kl_coef,
        exclude=already_clipped,
        expected_count=expected_count,
    )
    return loss, selected.astype(jnp.float32)
