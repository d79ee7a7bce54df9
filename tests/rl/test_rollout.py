"""Time limits on gymnax envs: a truncated step is not a termination and its value target bootstraps from V of the
final observation (the one before the auto-reset); a terminated step does not bootstrap.

Checked at the level where the mistake would matter: the advantages and value targets that ``train.step`` builds
and hands to the PPO update (captured there), from the rollout that ``train.step`` collects. The references are
independent of ppo_jax: Pendulum's and CartPole's equations of motion in NumPy (Pendulum-v1 and CartPole-v1 of
gymnax, i.e. of Gym), time limits counted by hand, and a NumPy GAE loop (Schulman et al. 2016, eq. 16, with
Pardo et al. 2018's time-limit bootstrap). The values are the network's own, evaluated on the hand-made
observations. The Brax counterpart (skipped without brax): tests/rl/test_brax_envs.py.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

import ppo_jax.rl.train as train_module
from ppo_jax import PPOConfig

GAMMA, LAMBDA = 0.9, 0.8


def capture_step(cfg: PPOConfig, seed: int, monkeypatch):
    """Run update 0 of ``cfg`` (jitted) with the PPO update stubbed out.

    Returns the rollout and the batch that ``train.step`` handed to the update (both ``[T, B, ...]``, numpy), and
    ``value(obs)``: the critic with the parameters the batch was built with.
    """
    traced, captured = [], []
    real_rollout = train_module.rollout

    def recording_rollout(runner, cfg, spec):
        runner, traj = real_rollout(runner, cfg, spec)
        traced.append(traj)
        return runner, traj

    def stub_update(train_state, batch, cfg, coefs, key):
        jax.debug.callback(lambda *args: captured.append(jax.device_get(args)), traced[-1], batch, train_state.params)
        return train_state, {"kl": jnp.zeros((), jnp.float32)}

    monkeypatch.setattr(train_module, "rollout", recording_rollout)
    monkeypatch.setattr(train_module, "update", stub_update)
    runner = train_module.init(cfg, jax.random.key(seed))
    jax.block_until_ready(jax.jit(lambda r: train_module.step(cfg, r, jnp.int32(0)))(runner))
    ((traj, batch, params),) = captured
    batch = jax.tree.map(lambda x: np.asarray(x).reshape((cfg.num_steps, cfg.num_envs) + x.shape[1:]), batch)
    np.testing.assert_array_equal(batch.obs, traj.obs)  # the batch is this rollout's (time-major, env-minor)

    def value(obs):
        return np.asarray(runner.train_state.apply_fn(params, jnp.asarray(obs, jnp.float32))[1], np.float64)

    return traj, batch, value


def gae_reference(rewards, values, next_values, terminations, dones):
    """Textbook loop, one env and one step at a time (float64): no bootstrap past a termination, no trace past a done."""
    T, B = rewards.shape
    advantages = np.zeros((T, B))
    for b in range(B):
        next_advantage = 0.0
        for t in reversed(range(T)):
            bootstrap = 0.0 if terminations[t, b] else GAMMA * next_values[t, b]
            delta = rewards[t, b] + bootstrap - values[t, b]
            next_advantage = delta + (0.0 if dones[t, b] else GAMMA * LAMBDA * next_advantage)
            advantages[t, b] = next_advantage
    return advantages, advantages + values


def pendulum_step(obs, action):
    """Gym's Pendulum-v1 (g=10, m=l=1, dt=0.05, |u| <= 2, |theta_dot| <= 8) from the observation (cos, sin, theta_dot)."""
    theta = np.arctan2(obs[..., 1], obs[..., 0])  # = angle_normalize(theta): what the reward and cos/sin see
    theta_dot = obs[..., 2]
    u = np.clip(action[..., 0], -2.0, 2.0)
    reward = -(theta**2 + 0.1 * theta_dot**2 + 0.001 * u**2)
    new_theta_dot = np.clip(theta_dot + (3 * 10.0 / 2 * np.sin(theta) + 3.0 * u) * 0.05, -8.0, 8.0)
    new_theta = theta + new_theta_dot * 0.05
    return np.stack([np.cos(new_theta), np.sin(new_theta), new_theta_dot], axis=-1), reward


def cartpole_step(obs, action):
    """Gym's CartPole-v1 (Euler, tau=0.02, force +-10) from the observation (x, x_dot, theta, theta_dot)."""
    x, x_dot, theta, theta_dot = (obs[..., i] for i in range(4))
    force = np.where(action == 1, 10.0, -10.0)
    total_mass, polemass_length, length, masspole = 1.1, 0.05, 0.5, 0.1
    temp = (force + polemass_length * theta_dot**2 * np.sin(theta)) / total_mass
    theta_acc = (9.8 * np.sin(theta) - np.cos(theta) * temp) / (
        length * (4.0 / 3.0 - masspole * np.cos(theta) ** 2 / total_mass)
    )
    x_acc = temp - polemass_length * theta_acc * np.cos(theta) / total_mass
    new = np.stack([x + 0.02 * x_dot, x_dot + 0.02 * x_acc, theta + 0.02 * theta_dot, theta_dot + 0.02 * theta_acc], -1)
    fallen = (np.abs(new[..., 0]) > 2.4) | (np.abs(new[..., 2]) > 12 * 2 * np.pi / 360)
    return new, fallen


def test_a_time_limit_is_truncation_and_bootstraps_from_the_final_observation(monkeypatch):
    # Pendulum-v1 never terminates and is cut at 200 steps: with 201 steps per env from a fresh reset, step t = 199
    # (the 200th) of both envs is truncated, and step 200 is the first of the next episode.
    cfg = PPOConfig(
        env="Pendulum-v1",
        num_envs=2,
        num_steps=201,
        total_timesteps=402,
        num_minibatches=1,
        update_epochs=1,
        gamma=GAMMA,
        gae_lambda=LAMBDA,
    )
    traj, batch, value = capture_step(cfg, 0, monkeypatch)
    T, B = 201, 2
    dones = np.zeros((T, B), bool)
    dones[199] = True
    terminations = np.zeros((T, B), bool)
    np.testing.assert_array_equal(traj.done, dones)
    np.testing.assert_array_equal(traj.terminated, terminations)  # truncation, not termination

    # What the critic sees after each step: the pendulum one step on from the observation, even at t = 199,
    # where the env itself moved on to a fresh episode (obs[200] is a new random start, far from the final one).
    next_obs, rewards = pendulum_step(np.asarray(traj.obs, np.float64), np.asarray(traj.action, np.float64))
    np.testing.assert_allclose(traj.next_obs, next_obs, atol=2e-5)
    np.testing.assert_allclose(traj.reward, rewards, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(traj.next_obs[:199], traj.obs[1:200])
    assert np.abs(traj.obs[200] - next_obs[199]).max(axis=-1).min() > 0.1

    v, v_next = value(traj.obs), value(next_obs)
    advantages, targets = gae_reference(rewards, v, v_next, terminations, dones)
    np.testing.assert_allclose(batch.advantage, advantages, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(batch.target, targets, rtol=1e-4, atol=1e-4)
    # At the truncated step the trace is cut and the target is r + gamma V(final observation), by hand:
    np.testing.assert_allclose(batch.target[199], rewards[199] + GAMMA * v_next[199], rtol=1e-5, atol=1e-5)
    # ... which neither common bug would give: no bootstrap (as if terminated), or V of the reset observation.
    assert np.abs(GAMMA * v_next[199]).min() > 1e-2
    assert np.abs(GAMMA * (v_next[199] - value(traj.obs[200]))).min() > 1e-2


def test_a_termination_does_not_bootstrap(monkeypatch):
    # CartPole-v1 with the initial (random) policy: the pole falls within a few dozen steps, long before the
    # 500-step limit, so every episode end in 64 steps is a termination; the reward is +1 at every step.
    cfg = PPOConfig(
        env="CartPole-v1",
        num_envs=2,
        num_steps=64,
        total_timesteps=128,
        num_minibatches=1,
        update_epochs=1,
        gamma=GAMMA,
        gae_lambda=LAMBDA,
    )
    traj, batch, value = capture_step(cfg, 0, monkeypatch)
    next_obs, fallen = cartpole_step(np.asarray(traj.obs, np.float64), np.asarray(traj.action))
    assert (fallen.sum(axis=0) >= 1).all(), "every env should see its pole fall"
    np.testing.assert_array_equal(traj.terminated, fallen)
    np.testing.assert_array_equal(traj.done, fallen)
    np.testing.assert_allclose(traj.next_obs, next_obs, atol=1e-5)  # the fallen state, not the reset one
    np.testing.assert_array_equal(traj.reward, np.ones((64, 2)))
    t, b = np.nonzero(fallen)
    assert (np.abs(traj.obs[t[t < 63] + 1, b[t < 63]]) <= 0.05).all()  # each next episode starts afresh (+-0.05)

    v, v_next = value(traj.obs), value(next_obs)
    advantages, targets = gae_reference(np.ones((64, 2)), v, v_next, fallen, fallen)
    np.testing.assert_allclose(batch.advantage, advantages, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(batch.target, targets, rtol=1e-4, atol=1e-4)
    # At a termination the target is the reward alone: 1 + 0 (A = 1 - V(s), target = A + V(s)).
    np.testing.assert_allclose(batch.target[t, b], 1.0, atol=1e-6)
    assert np.abs(GAMMA * v_next[t, b]).min() > 1e-2  # a bootstrap there would show
