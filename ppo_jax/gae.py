"""Generalized Advantage Estimation with termination kept apart from truncation.

Schulman et al. (2016), "High-Dimensional Continuous Control Using Generalized
Advantage Estimation", eq. 16, with the time-limit treatment of Pardo et al.
(2018), "Time Limits in Reinforcement Learning": a truncated episode is
bootstrapped from the value of its final observation; only a true termination
cuts the bootstrap.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

GAE_UNROLL = 16
"""Steps of the reverse scan per loop trip: the same arithmetic in 1/16 of the trips (tests/test_gae.py checks the values)."""


def compute_gae(
    rewards: jax.Array,
    values: jax.Array,
    next_values: jax.Array,
    terminations: jax.Array,
    dones: jax.Array,
    *,
    gamma: jax.typing.ArrayLike,
    gae_lambda: jax.typing.ArrayLike,
) -> tuple[jax.Array, jax.Array]:
    """Advantages and value targets over a time-major batch.

    Args:
      rewards: ``[T, B]`` reward of step t.
      values: ``[T, B]`` V(s_t).
      next_values: ``[T, B]`` V of the observation that followed step t: V(s_{t+1}),
        or V(final observation) where the episode ended at step t.
      terminations: ``[T, B]`` 1 where step t reached a terminal state (no bootstrap).
      dones: ``[T, B]`` 1 where the episode ended at step t, by termination or
        truncation (the lambda-trace does not cross into the next episode).
      gamma: discount; scalar (may be traced).
      gae_lambda: GAE lambda; scalar (may be traced).

    Returns:
      ``(advantages, returns)``, both ``[T, B]`` and under ``stop_gradient``, with
        delta_t = r_t + gamma * (1 - terminations_t) * next_values_t - values_t,
        A_t = delta_t + gamma * lambda * (1 - dones_t) * A_{t+1},  A_T = 0,
        returns_t = A_t + values_t.
    """
    rewards, values, next_values = (jnp.asarray(x, jnp.float32) for x in (rewards, values, next_values))
    not_term = 1.0 - jnp.asarray(terminations, jnp.float32)
    not_done = 1.0 - jnp.asarray(dones, jnp.float32)
    deltas = rewards + gamma * not_term * next_values - values
    trace = gamma * gae_lambda * not_done

    def step(next_advantage, x):
        delta, decay = x
        advantage = delta + decay * next_advantage
        return advantage, advantage

    _, advantages = lax.scan(step, jnp.zeros_like(deltas[0]), (deltas, trace), reverse=True, unroll=GAE_UNROLL)
    advantages = lax.stop_gradient(advantages)
    return advantages, lax.stop_gradient(advantages + values)
