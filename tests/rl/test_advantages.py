"""Control PPO's advantage table (``ppo_jax.rl.advantages.ADVANTAGES``): the default is GAE, and an estimator
registered from outside is the one a run computes with."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from ppo_jax import ConfigError, PPOConfig
from ppo_jax.gae import compute_gae
from ppo_jax.rl.advantages import ADVANTAGES, Estimator
from ppo_jax.rl.train import train

TINY = dict(env="CartPole-v1", total_timesteps=512, num_envs=2, num_steps=64, num_minibatches=2, update_epochs=2)


def _zero_advantage(rewards, values, next_values, terminations, dones, cfg):
    """Advantages 0 and targets V(s_t): the policy term has no gradient and the value loss starts at 0."""
    return 0.0 * values, values


def _gae_again(rewards, values, next_values, terminations, dones, cfg):
    return compute_gae(rewards, values, next_values, terminations, dones, gamma=cfg.gamma, gae_lambda=cfg.gae_lambda)


@pytest.fixture(scope="module", autouse=True)
def registered():
    ADVANTAGES.register("test_zero", Estimator(_zero_advantage, "zero advantages (test)"))
    ADVANTAGES.register("test_gae_again", Estimator(_gae_again, "GAE again (test)", reads=("gae_lambda",)))
    yield
    for name in ("test_zero", "test_gae_again"):
        ADVANTAGES.unregister(name)


def test_an_unknown_estimator_is_refused_with_the_choices():
    with pytest.raises(ConfigError, match="gae"):
        train(PPOConfig(**TINY, advantage="no_such_estimator"), jax.random.key(0))


def test_the_other_estimators_fields_are_inert():
    assert "gae_lambda" in PPOConfig(**TINY, advantage="test_zero").inert_fields()
    assert "gae_lambda" not in PPOConfig(**TINY).inert_fields()


def test_a_registered_estimator_is_what_the_run_uses():
    run = jax.jit(train)
    default = run(PPOConfig(**TINY), jax.random.key(0)).metrics
    again = run(PPOConfig(**TINY, advantage="test_gae_again"), jax.random.key(0)).metrics
    zero = run(PPOConfig(**TINY, advantage="test_zero"), jax.random.key(0)).metrics
    for name in ("policy_loss", "value_loss", "episode_return"):  # the same computation through the table
        np.testing.assert_array_equal(np.asarray(again[name]), np.asarray(default[name]))
    # targets = the rollout's V(s_t): the value loss starts at 0 and stays near it; GAE's targets are returns
    assert np.max(np.asarray(zero["value_loss"])) < 1e-5 < np.min(np.asarray(default["value_loss"]))
