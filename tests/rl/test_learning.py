"""Learning tests: fixed seeds, thresholds with margin (about a minute each on 2 CPU cores)."""

import jax
import numpy as np
import pytest

from ppo_jax import PPOConfig
from ppo_jax.final_values import final_value
from ppo_jax.rl.train import train

pytestmark = pytest.mark.slow


def final_returns(cfg: PPOConfig, seeds: int = 4) -> np.ndarray:
    keys = jax.random.split(jax.random.key(0), seeds)
    out = jax.jit(jax.vmap(train, in_axes=(None, 0)))(cfg, keys)
    return final_value(np.asarray(out.metrics["episode_return"]), 0.05)


def test_cartpole_reaches_475_with_the_standard_hyperparameters():
    # Standard config: 4 envs x 128 steps, 4 epochs, 4 minibatches, lr 2.5e-4,
    # clip 0.2, entropy 0.01, gamma 0.99, lambda 0.95. Seen here: 500 on all 4 seeds.
    cfg = PPOConfig(env="CartPole-v1", total_timesteps=500_000)
    returns = final_returns(cfg)
    assert (returns >= 475).sum() >= 3, returns


def test_pendulum_improves_well_past_random():
    # A random policy scores about -1200. Seen here at 300k steps: -154 to -188 on 4 seeds;
    # at 200k steps the mean curve is near -170. Threshold -500 leaves a wide margin.
    cfg = PPOConfig(
        env="Pendulum-v1",
        total_timesteps=200_000,
        num_envs=8,
        num_steps=256,
        num_minibatches=32,
        update_epochs=10,
        lr=1e-3,
        ent_coef=0.0,
        normalize_obs=True,
        normalize_reward=True,
    )
    returns = final_returns(cfg)
    assert (returns > -500).sum() >= 3 and returns.mean() > -600, returns
