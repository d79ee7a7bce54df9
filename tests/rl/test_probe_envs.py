"""Probe environments: the learned value and policy must reach their analytic answers."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ppo_jax import PPOConfig
from ppo_jax.rl.build_network import make_network
from ppo_jax.rl.train import train

PROBE = dict(total_timesteps=16_384, num_envs=8, num_steps=16, num_minibatches=2, update_epochs=4, lr=3e-3)


def trained(cfg, seed=0):
    out = jax.jit(train)(cfg, jax.random.key(seed))
    network = make_network(cfg)
    return lambda obs: network.apply(out.train_state.params, jnp.asarray(obs, jnp.float32))


def test_constant_reward_value_is_one():
    # r = 1 and the episode ends: V = 1.
    apply = trained(PPOConfig(env="Probe-ConstantReward", **PROBE))
    _, value = apply([[0.0]])
    np.testing.assert_allclose(value, [1.0], atol=0.05)


def test_observation_dependent_value():
    # r = obs in {-1, +1} and the episode ends: V(obs) = obs.
    apply = trained(PPOConfig(env="Probe-ObsDependentReward", **PROBE))
    _, value = apply([[-1.0], [1.0]])
    np.testing.assert_allclose(value, [-1.0, 1.0], atol=0.1)


def test_discounted_two_step_value():
    # r = 0 at the first step, 1 at the second (terminal): V(obs 0) = gamma, V(obs 1) = 1.
    gamma = 0.5
    apply = trained(PPOConfig(env="Probe-DiscountedTwoStep", gamma=gamma, gae_lambda=0.95, **PROBE))
    _, value = apply([[0.0], [1.0]])
    np.testing.assert_allclose(value, [gamma, 1.0], atol=0.06)


def test_action_dependent_reward_policy_and_value():
    # r = +1 for action 1, -1 for action 0: pi(1) -> 1 and V -> 1.
    apply = trained(PPOConfig(env="Probe-ActionReward", ent_coef=0.0, **PROBE))
    dist, value = apply([[0.0]])
    prob_action_one = jax.nn.softmax(dist.loc)[0, 1]
    assert prob_action_one > 0.95
    np.testing.assert_allclose(value, [1.0], atol=0.15)


@pytest.mark.parametrize("lr_schedule", ["linear", "constant"])
def test_continuous_action_mean_reaches_optimum(lr_schedule):
    # r = -(a - 0.5)^2: the Gaussian mean -> 0.5.
    apply = trained(PPOConfig(env="Probe-ContinuousAction", ent_coef=0.0, lr_schedule=lr_schedule, **PROBE))
    dist, _ = apply([[0.0]])
    np.testing.assert_allclose(dist.loc[0, 0], 0.5, atol=0.1)


def test_time_limit_is_bootstrapped_not_terminal():
    # r = 1 forever, cut by a 5-step time limit, obs constant. Bootstrapping the
    # truncation from V(final obs) gives V = 1 / (1 - gamma) = 2 for gamma = 0.5.
    # Treating the limit as termination would give the mean of the 5-step
    # truncated returns, (1.9375 + 1.875 + 1.75 + 1.5 + 1) / 5 = 1.6125.
    apply = trained(PPOConfig(env="Probe-TimeLimit", gamma=0.5, **PROBE))
    _, value = apply([[0.0]])
    np.testing.assert_allclose(value, [2.0], atol=0.1)
