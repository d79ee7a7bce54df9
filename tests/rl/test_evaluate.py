"""Evaluation of final parameters (``ppo_jax.rl.evaluate``) against episodes played by hand in a Python loop."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ppo_jax.rl.build_network import make_network
from ppo_jax.rl.config import PPOConfig
from ppo_jax.rl.envs import make_env
from ppo_jax.rl.evaluate import evaluate, play_episodes, random_policy, random_policy_returns
from ppo_jax.rl.normalization import RunningMeanStd, init_stats


def init_params(cfg: PPOConfig, seed: int = 0):
    return make_network(cfg).init(jax.random.key(seed), jnp.zeros((make_env(cfg.env).obs_dim,), jnp.float32))


def test_truncated_episodes_are_played_to_the_time_limit():
    cfg = PPOConfig(env="Probe-TimeLimit")  # +1 per step, never terminates, truncated after 5 steps
    out = jax.jit(evaluate, static_argnums=4)(cfg, init_params(cfg), init_stats((1,)), jax.random.key(1), 3)
    for returns, lengths in ((out.stochastic, out.stochastic_length), (out.deterministic, out.deterministic_length)):
        np.testing.assert_array_equal(returns, [5.0] * 3)
        np.testing.assert_array_equal(lengths, [5.0] * 3)


def test_deterministic_continuous_policy_takes_the_clipped_mean():
    cfg = PPOConfig(env="Probe-ContinuousAction")
    params = init_params(cfg)
    out = evaluate(cfg, params, init_stats((1,)), jax.random.key(0), 4)
    mean = float(make_network(cfg).apply(params, jnp.zeros((1,)))[0].loc[0])
    expected = -((np.clip(mean, -2.0, 2.0) - 0.5) ** 2)
    np.testing.assert_allclose(out.deterministic, [expected] * 4, rtol=1e-5)
    assert np.std(np.asarray(out.stochastic)) > 0  # sampled actions differ


def test_deterministic_cartpole_matches_a_python_loop_with_frozen_normalization():
    cfg = PPOConfig(env="CartPole-v1", normalize_obs=True)
    spec = make_env(cfg.env)
    params = init_params(cfg, seed=3)
    stats = RunningMeanStd(jnp.array([0.1, -0.2, 0.05, 0.3]), jnp.array([0.5, 2.0, 0.1, 1.5]), jnp.float32(100.0))
    key = jax.random.key(7)
    out = evaluate(cfg, params, stats, key, 2)

    apply = jax.jit(make_network(cfg).apply)
    step, reset_env = jax.jit(spec.env.step), jax.jit(spec.env.reset)
    reset_key, _ = jax.random.split(key)
    for i, reset in enumerate(jax.random.split(reset_key, 2)):
        obs, state = reset_env(reset, spec.params)
        total, steps = 0.0, 0
        while True:
            seen = np.clip((np.asarray(obs) - np.asarray(stats.mean)) / np.sqrt(np.asarray(stats.var) + 1e-8), -10, 10)
            action = int(np.argmax(np.asarray(apply(params, jnp.asarray(seen, jnp.float32))[0].loc)))
            obs, state, reward, terminated, truncated, _ = step(jax.random.key(steps), state, action, spec.params)
            total, steps = total + float(reward), steps + 1
            if bool(terminated) or bool(truncated):
                break
        assert out.deterministic[i] == total and out.deterministic_length[i] == steps


def test_play_episodes_runs_any_policy_function_and_clips_continuous_actions():
    spec = make_env("Probe-ContinuousAction")  # r = -(a - 0.5)^2, one step, actions in [-2, 2]
    calls = []

    def policy(obs, key):
        calls.append(obs.shape)
        return jnp.full((obs.shape[0], 1), 5.0)  # outside the box: clipped to 2.0

    returns, lengths = jax.jit(lambda k: play_episodes(spec, policy, k, 3))(jax.random.key(0))
    assert calls == [(3, 1)]  # traced once, with the observations of all 3 episodes
    np.testing.assert_allclose(returns, [-((2.0 - 0.5) ** 2)] * 3, rtol=1e-6)
    np.testing.assert_array_equal(lengths, [1.0] * 3)


def test_random_policy_is_uniform_over_the_actions():
    # Probe-ActionReward: one step, +1 for action 1, -1 for action 0. 400 episodes: the share of
    # action 1 has standard deviation 0.025 around 1/2.
    returns = random_policy_returns("Probe-ActionReward", jax.random.key(2), 400)
    assert returns.shape == (400,) and returns.dtype == np.float64 and set(returns.tolist()) == {-1.0, 1.0}
    assert abs(np.mean(returns == 1.0) - 0.5) < 0.1
    spec = make_env("Probe-ContinuousAction")
    actions = random_policy(spec)(jnp.zeros((2000, 1)), jax.random.key(3))
    assert actions.shape == (2000, 1) and float(actions.min()) >= -2.0 and float(actions.max()) <= 2.0
    np.testing.assert_allclose(np.mean(np.asarray(actions) < 0.0), 0.5, atol=0.05)  # uniform on [-2, 2]
