"""Per-token rewards and advantages of a response: the KL penalty on every token, the score on the last.

Ziegler et al. (2019), eq. 2; Stiennon et al. (2020), eq. 1; Ouyang et al. (2022),
eq. 2: the reward of a sequence is ``r_RM - beta * sum_t log(pi(a_t|s_t) / pi_ref(a_t|s_t))``.
Spread over tokens (as in their implementations), response token t earns
``-beta * (log pi(a_t) - log pi_ref(a_t))`` and the last response token (the EOS,
or the last one at the maximum length) also earns the sequence score ``r_RM``.
The score is placed, not broadcast: GAE (Schulman et al. 2016) carries it back to
earlier tokens through the critic. ``advantage="broadcast"`` instead gives every
token the sequence-level advantage ``sum_t gamma^t r_t - V(s_0)`` (the whole
response's return minus the critic's value of the prompt).

The end of a response is a termination (the sequence is complete and scored), not
a time-limit truncation: nothing is bootstrapped past it, and padding positions
(after the end) have reward, value, advantage and target 0.

Shapes: batch-major ``[B, L]`` (sequences x response positions); ``mask [B, L]``
is ``task.response_mask`` (True up to and including the first EOS).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from ppo_jax.gae import compute_gae


def kl_rewards(
    log_prob: jax.Array, ref_log_prob: jax.Array, mask: jax.Array, *, beta: jax.typing.ArrayLike
) -> jax.Array:
    """``-beta * (log_prob - ref_log_prob)`` on response tokens, 0 on padding; ``[B, L]``."""
    return jnp.where(mask, -beta * (log_prob - ref_log_prob), 0.0)


def last_index(mask: jax.Array) -> jax.Array:
    """``[B]`` int32: the position of each response's last token (its EOS, or L - 1)."""
    return mask.sum(-1).astype(jnp.int32) - 1


def place_score(score: jax.Array, mask: jax.Array) -> jax.Array:
    """``[B, L]``: ``score [B]`` on each response's last token, 0 elsewhere."""
    return jax.nn.one_hot(last_index(mask), mask.shape[-1], dtype=jnp.float32) * score[:, None]


def token_rewards(
    score: jax.Array, log_prob: jax.Array, ref_log_prob: jax.Array, mask: jax.Array, *, beta: jax.typing.ArrayLike
) -> jax.Array:
    """Total reward per response token ``[B, L]``: the KL reward on every token plus the score on the last."""
    return kl_rewards(log_prob, ref_log_prob, mask, beta=beta) + place_score(score, mask)


def advantages(
    rewards: jax.Array,
    values: jax.Array,
    mask: jax.Array,
    *,
    gamma: jax.typing.ArrayLike,
    gae_lambda: jax.typing.ArrayLike,
    critic_lambda: jax.typing.ArrayLike | None = None,
    mode: str = "gae",
) -> tuple[jax.Array, jax.Array]:
    """``(advantages, value targets)``, both ``[B, L]``, 0 on padding.

    Args:
      rewards: ``[B, L]`` from ``token_rewards``.
      values: ``[B, L]`` V(s_t), the critic before response token t.
      mask: ``[B, L]`` response tokens.
      gamma, gae_lambda: scalars, may be traced.
      critic_lambda: the lambda of the value targets (None: gae_lambda). VC-PPO
        (Yuan et al. 2025) decouples them: 1.0 for the critic (Monte Carlo
        targets, no bias from an untrained critic), 0.95 for the actor.
      mode: ``"gae"`` (per-token GAE) or ``"broadcast"`` (the sequence's return
        minus V(s_0) on every token); the value targets are the GAE returns in both.
    """
    values = jnp.where(mask, values, 0.0)
    next_values = jnp.concatenate([values[:, 1:], jnp.zeros_like(values[:, :1])], axis=1)
    ended = jnp.arange(mask.shape[-1]) >= last_index(mask)[:, None]  # the last token and the padding after it

    def gae(lam):  # time-major [L, B] inside
        adv, targets = compute_gae(rewards.T, values.T, next_values.T, ended.T, ended.T, gamma=gamma, gae_lambda=lam)
        return adv.T, targets.T

    adv, targets = gae(gae_lambda)
    if critic_lambda is not None:
        targets = gae(critic_lambda)[1]
    if mode == "broadcast":
        discount = gamma ** jnp.arange(mask.shape[-1], dtype=jnp.float32)
        sequence_adv = (rewards * discount).sum(-1) - values[:, 0]
        adv = jnp.broadcast_to(sequence_adv[:, None], mask.shape)
    elif mode != "gae":
        raise ValueError(f"unknown advantage mode {mode!r}")
    return jnp.where(mask, adv, 0.0), jnp.where(mask, targets, 0.0)
