"""Critic-free advantages of sampled responses: group baselines (GRPO, Dr. GRPO, RLOO) and REINFORCE++.

The batch holds ``num_prompts`` prompts x ``G`` samples, contiguous: rows
``[i*G:(i+1)*G]`` answer prompt i. A response's return is ``R_i = sum_t r_{i,t}``
over its response tokens (the score on the last token, a KL-in-reward term, if
any, on every token). With the group's mean ``mean_g`` and sample std ``std_g``
(ddof = 1, as ``torch.std`` in TRL and verl):

| estimator               | advantage of token t of response i                | reference                              |
|-------------------------|---------------------------------------------------|----------------------------------------|
| ``grpo``                  | (R_i - mean_g) / (std_g + eps)                    | Shao et al. 2024, sec. 4.1.2           |
| ``drgrpo``                | R_i - mean_g                                      | Liu et al. 2025 (Dr. GRPO)             |
| ``rloo``                  | R_i - mean of the other G - 1 returns             | Ahmadian et al. 2024; Kool et al. 2019 |
| ``reinforce_pp``          | whiten(sum_{s >= t} r_{i,s})                      | Hu et al. 2025, arXiv:2501.03262       |
| ``reinforce_pp_baseline`` | whiten(R_i - mean_g)                              | Hu et al. 2025, arXiv:2501.03262       |

``whiten`` subtracts the mean and divides by (std + eps) over all response tokens
of the batch (population std; verl's ``masked_whiten`` uses the Bessel-corrected
variance and ``rsqrt(var + 1e-8)``). ``reinforce_pp`` needs no groups.

A group whose returns are all equal carries no signal (DAPO's dynamic sampling,
Yu et al. 2025, sec. 3.2, drops it): its ``R_i - mean_g`` is set to exactly 0, so
``grpo``, ``drgrpo`` and ``rloo`` give it advantage 0 (in floating point the mean
of equal numbers may differ from them by an ulp, which ``/ (0 + eps)`` would blow up).

Shapes: ``M = num_prompts * G`` rows, ``L`` response positions; ``mask [M, L]`` bool
marks response tokens, which alone enter every sum (``jnp.where``, so padding may
hold inf or NaN).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from ppo_jax.lm.sft import masked_mean

ADVANTAGE_ESTIMATORS = ("grpo", "drgrpo", "rloo", "reinforce_pp", "reinforce_pp_baseline")


def _by_group(returns: jax.Array, group_size: int) -> jax.Array:
    """``returns [M]`` -> ``[M // G, G]``, one prompt's samples per row."""
    if group_size < 2 or returns.shape[0] % group_size:
        raise ValueError(f"group_size {group_size} must be >= 2 and divide the batch of {returns.shape[0]} rows")
    return returns.reshape(-1, group_size)


def group_stats(returns: jax.Array, group_size: int) -> tuple[jax.Array, jax.Array]:
    """``(mean [M], std [M])`` of each row's group, broadcast back to its rows; std is the sample std (ddof = 1)."""
    grouped = _by_group(returns, group_size)
    mean, std = grouped.mean(-1), grouped.std(-1, ddof=1)
    return jnp.repeat(mean, group_size), jnp.repeat(std, group_size)


def zero_variance_groups(returns: jax.Array, group_size: int) -> jax.Array:
    """``bool [M]``: True on the rows of groups whose returns ``[M]`` are all equal."""
    grouped = _by_group(returns, group_size)
    return jnp.repeat(grouped.max(-1) == grouped.min(-1), group_size)


def sequence_returns(token_rewards: jax.Array, mask: jax.Array) -> jax.Array:
    """``R [M]``: the sum of ``token_rewards [M, L]`` over each row's response tokens."""
    return jnp.where(mask, token_rewards, 0.0).sum(-1)


def returns_to_go(token_rewards: jax.Array, mask: jax.Array) -> jax.Array:
    """``[M, L]``: ``sum_{s >= t} r_s`` over response tokens (gamma = 1), 0 on padding."""
    rewards = jnp.where(mask, token_rewards, 0.0)
    return jnp.where(mask, jnp.flip(jnp.cumsum(jnp.flip(rewards, -1), -1), -1), 0.0)


def whiten(x: jax.Array, mask: jax.Array, eps: jax.typing.ArrayLike) -> jax.Array:
    """``(x - mean) / (std + eps)`` with the mean and population std over the True entries of ``mask``; 0 elsewhere."""
    centred = x - masked_mean(x, mask)
    return jnp.where(mask, centred / (jnp.sqrt(masked_mean(centred**2, mask)) + eps), 0.0)


def advantages(
    estimator: str,
    token_rewards: jax.Array,
    mask: jax.Array,
    *,
    group_size: int,
    eps: jax.typing.ArrayLike,
) -> jax.Array:
    """Per-token advantages ``[M, L]`` of ``estimator`` (static), 0 on padding.

    Args:
      estimator: one of ``ADVANTAGE_ESTIMATORS``.
      token_rewards: ``[M, L]`` reward of each response token.
      mask: ``[M, L]`` bool, response tokens.
      group_size: G (static), samples per prompt; unused by ``reinforce_pp``.
      eps: the std guard of ``grpo`` and of the whitening; may be traced.
    """
    if estimator not in ADVANTAGE_ESTIMATORS:
        raise ValueError(f"unknown advantage estimator {estimator!r}; expected one of {ADVANTAGE_ESTIMATORS}")
    if estimator == "reinforce_pp":
        return whiten(returns_to_go(token_rewards, mask), mask, eps)
    returns = sequence_returns(token_rewards, mask)
    mean, std = group_stats(returns, group_size)
    centred = jnp.where(zero_variance_groups(returns, group_size), 0.0, returns - mean)
    if estimator == "grpo":
        sequence_advantage = centred / (std + eps)
    elif estimator == "rloo":  # R_i - (G mean - R_i) / (G - 1) = G / (G - 1) (R_i - mean)
        sequence_advantage = centred * group_size / (group_size - 1)
    else:  # drgrpo, reinforce_pp_baseline
        sequence_advantage = centred
    token_advantage = jnp.where(mask, sequence_advantage[:, None], 0.0)
    if estimator == "reinforce_pp_baseline":
        return whiten(token_advantage, mask, eps)
    return token_advantage
