"""Running statistics for observation normalization and reward scaling, as pure state.

Huang et al. (2022), "The 37 Implementation Details of PPO", continuous-action
details 4-7 (gym's NormalizeObservation / NormalizeReward). One set of
statistics per training run, merged over all parallel envs at every step
(Chan et al. 1979 parallel variance update).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp


class RunningMeanStd(NamedTuple):
    mean: jax.Array  # [D] or []
    var: jax.Array  # [D] or []
    count: jax.Array  # [] float32


def init_stats(shape=()) -> RunningMeanStd:
    return RunningMeanStd(jnp.zeros(shape, jnp.float32), jnp.ones(shape, jnp.float32), jnp.asarray(1e-4, jnp.float32))


def update_stats(stats: RunningMeanStd, batch: jax.Array) -> RunningMeanStd:
    """Merge a batch ``[N, *shape]`` into the running mean and variance."""
    batch_mean = batch.mean(axis=0)
    batch_var = batch.var(axis=0)
    n = jnp.asarray(batch.shape[0], jnp.float32)
    delta = batch_mean - stats.mean
    total = stats.count + n
    mean = stats.mean + delta * n / total
    m2 = stats.var * stats.count + batch_var * n + delta**2 * stats.count * n / total
    return RunningMeanStd(mean, m2 / total, total)


def normalize(stats: RunningMeanStd, x: jax.Array, clip: jax.typing.ArrayLike) -> jax.Array:
    """``clip((x - mean) / sqrt(var + 1e-8), -clip, clip)``."""
    return jnp.clip((x - stats.mean) / jnp.sqrt(stats.var + 1e-8), -clip, clip)


class RewardScaler(NamedTuple):
    """Discounted return per env ``[B]`` and the running statistics of its variance."""

    discounted_return: jax.Array  # [B]
    stats: RunningMeanStd  # scalar statistics


def init_reward_scaler(num_envs: int) -> RewardScaler:
    return RewardScaler(jnp.zeros((num_envs,), jnp.float32), init_stats())


def scale_reward(
    scaler: RewardScaler, reward: jax.Array, done: jax.Array, *, gamma, clip
) -> tuple[RewardScaler, jax.Array]:
    """Divide ``reward [B]`` by the running std of the discounted return (no mean shift)."""
    discounted = scaler.discounted_return * gamma + reward
    stats = update_stats(scaler.stats, discounted)
    scaled = jnp.clip(reward / jnp.sqrt(stats.var + 1e-8), -clip, clip)
    return RewardScaler(jnp.where(done, 0.0, discounted), stats), scaled
