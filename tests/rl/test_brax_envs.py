"""Brax tasks behind the env interface: our own time limit and auto-reset, truncation bootstrapping, learning.

References are independent of the wrapper: the raw Brax env (no wrappers) replayed with the same actions, and a
NumPy GAE loop. Skipped without the ``[brax]`` extra; CI installs it. That vmap over settings and seeds equals
separate runs is the task contract's (tests/test_task_contract.py): a Brax env is one more pure step function.
"""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip("brax", reason='Brax tasks need the optional extra: pip install -e ".[brax]"')

from ppo_jax import PPOConfig  # noqa: E402
from ppo_jax.final_values import final_value  # noqa: E402
from ppo_jax.gae import compute_gae  # noqa: E402
from ppo_jax.rl.brax_envs import BraxParams  # noqa: E402
from ppo_jax.rl.envs import make_env  # noqa: E402
from ppo_jax.rl.rollout import rollout  # noqa: E402
from ppo_jax.rl.train import init, train  # noqa: E402

ENV = "brax/inverted_pendulum"  # the cheapest Brax task; spring, the default backend, compiles fastest


@pytest.fixture(scope="module")
def spec():
    return make_env(ENV)


def test_time_limit_truncates_with_the_final_observation_and_resets_fresh(spec):
    env, raw, params = spec.env, spec.env.env, BraxParams(max_steps_in_episode=3)
    step = jax.jit(env.step)
    obs, state = jax.jit(env.reset)(jax.random.key(0), params)
    raw_state = jax.jit(raw.reset)(jax.random.key(0))
    raw_step = jax.jit(raw.step)
    action = jnp.array([0.1])
    for t in range(3):
        obs, state, reward, terminated, truncated, info = step(jax.random.key(10 + t), state, action, params)
        raw_state = raw_step(raw_state, action)
        np.testing.assert_array_equal(info["final_observation"], raw_state.obs)
        assert float(reward) == float(raw_state.reward)
        assert not bool(terminated) and bool(truncated) == (t == 2)
        if t < 2:
            np.testing.assert_array_equal(obs, raw_state.obs)
    # After the limit: a fresh reset from the step's key, the step count back to 0.
    np.testing.assert_array_equal(obs, env.reset(jax.random.key(12), params)[0])
    assert int(state.steps) == 0 and not np.array_equal(obs, raw_state.obs)


def test_termination_is_not_truncation_and_each_episode_starts_afresh(spec):
    env, params = spec.env, spec.env.default_params
    step = jax.jit(env.step)
    obs, state = env.reset(jax.random.key(1), params)
    starts = [np.asarray(obs)]
    ends = 0
    for t in range(400):  # full force one way: the pole falls (|angle| > 0.2) within a few dozen steps
        obs, state, _, terminated, truncated, info = step(jax.random.key(100 + t), state, jnp.array([1.0]), params)
        if bool(terminated):
            assert not bool(truncated)
            assert abs(float(info["final_observation"][1])) > 0.2  # obs = (cart, angle, velocities)
            starts.append(np.asarray(obs))
            ends += 1
            if ends == 2:
                break
    assert ends == 2
    assert not np.array_equal(starts[1], starts[2])  # Brax's AutoResetWrapper would restart from one cached state


def test_rollout_bootstraps_a_time_limit_from_the_final_observation(spec):
    # A 5-step time limit and a 5-step rollout: every env is truncated at its last step.
    cfg = PPOConfig(env=ENV, num_envs=2, num_steps=5, total_timesteps=10, num_minibatches=1, gamma=0.9, gae_lambda=0.8)
    short = spec._replace(params=BraxParams(max_steps_in_episode=5))
    runner = init(cfg, jax.random.key(7))
    first_states = runner.env_state.brax
    after, traj = jax.jit(lambda r: rollout(r, cfg, short))(runner)
    traj = jax.device_get(traj)
    assert not traj.terminated.any() and traj.done[-1].all() and not traj.done[:-1].any()

    # Reference: replay the raw Brax env (no wrapper) with the same actions.
    raw_step = jax.jit(jax.vmap(spec.env.env.step))
    raw_state, raw_obs = first_states, []
    for t in range(5):
        raw_state = raw_step(raw_state, jnp.clip(traj.action[t], -1.0, 1.0))
        raw_obs.append(np.asarray(raw_state.obs))
    np.testing.assert_array_equal(traj.next_obs, np.stack(raw_obs))  # the final observation, not the reset one
    assert not np.array_equal(np.asarray(after.obs), raw_obs[-1])  # while the envs themselves were reset

    apply = runner.train_state.apply_fn
    params = runner.train_state.params
    values = np.asarray(apply(params, jnp.asarray(traj.obs))[1], np.float64)
    final_values = np.asarray(apply(params, jnp.asarray(np.stack(raw_obs)))[1], np.float64)
    advantage = np.zeros(2)
    expected = np.zeros((5, 2))
    for t in reversed(range(5)):  # GAE, Schulman et al. 2016 eq. 16; a truncated step bootstraps and cuts the trace
        delta = traj.reward[t] + 0.9 * final_values[t] - values[t]
        advantage = delta + 0.9 * 0.8 * (1.0 - traj.done[t]) * advantage
        expected[t] = advantage
    _, next_values = apply(params, jnp.asarray(traj.next_obs))
    advantages, _ = compute_gae(
        jnp.asarray(traj.reward),
        jnp.asarray(traj.value),
        next_values,
        jnp.asarray(traj.terminated),
        jnp.asarray(traj.done),
        gamma=cfg.gamma,
        gae_lambda=cfg.gae_lambda,
    )
    np.testing.assert_allclose(advantages, expected, rtol=1e-5, atol=1e-5)
    assert np.abs(expected[-1] - (traj.reward[-1] - values[-1])).min() > 1e-3  # the bootstrap term is not zero


@pytest.mark.slow
def test_inverted_pendulum_learns_to_balance():
    # Reward 1 per step upright, 1000 at most; a random policy scores about 25. Seen here at 393k steps
    # (2 seeds, Brax's spring pipeline): tanh-Gaussian with observation normalization 651 and 691, the
    # plain Gaussian 395-611. Threshold 300 on each seed leaves a wide margin.
    cfg = PPOConfig(
        env=ENV,
        action_dist="tanh_gaussian",
        normalize_obs=True,
        total_timesteps=393_216,
        num_envs=16,
        num_steps=64,
        lr=1e-3,
    )
    out = jax.jit(jax.vmap(train, in_axes=(None, 0)))(cfg, jax.random.split(jax.random.key(0), 2))
    returns = final_value(np.asarray(out.metrics["episode_return"]), 0.05)
    assert (returns > 300).all(), returns


def test_mjx_on_the_cpu_warns_about_the_scheduler_hang(monkeypatch, spec):
    from ppo_jax.rl import train as train_module
    from ppo_jax.rl.brax_envs import SCHEDULER_FLAG
    from ppo_jax.rl.train import check

    monkeypatch.setattr(train_module, "env_spec", lambda cfg: spec)  # building MJX's model takes ~20 s; not the point
    monkeypatch.setenv("XLA_FLAGS", "")
    with pytest.warns(UserWarning, match="XLA_FLAGS=--xla_cpu_enable_concurrency_optimized_scheduler=false"):
        check(PPOConfig(env=ENV, brax_backend="mjx"))
    monkeypatch.setenv("XLA_FLAGS", SCHEDULER_FLAG)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check(PPOConfig(env=ENV, brax_backend="mjx"))


def test_an_env_first_built_inside_jit_is_usable_after_it():
    # make_brax_env is cached: built first inside a trace, its arrays must not be that trace's tracers
    # (they were, and the next use raised UnexpectedTracerError).
    from ppo_jax.rl.brax_envs import make_brax_env

    make_brax_env.cache_clear()
    try:
        inside = jax.jit(lambda key: make_brax_env(ENV).reset(key, BraxParams())[0])(jax.random.key(0))
        after = jax.jit(lambda key: make_brax_env(ENV).reset(key, BraxParams())[0])(jax.random.key(0))
        np.testing.assert_array_equal(inside, after)
    finally:
        make_brax_env.cache_clear()  # the other tests' env, built anew outside any trace
