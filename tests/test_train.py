"""train(cfg, key): vmap over settings and seeds equals separate runs; no retrace; determinism."""

import chex
import jax
import numpy as np
import pytest

from ppo_jax import PPOConfig, train
from ppo_jax.config import TRACED_FIELDS
from ppo_jax.train import METRIC_NAMES

TINY = dict(total_timesteps=1024, num_envs=4, num_steps=32, num_minibatches=2, update_epochs=2)


def assert_outputs_close(a, b):
    for name in METRIC_NAMES:
        np.testing.assert_allclose(a.metrics[name], b.metrics[name], rtol=2e-4, atol=1e-5, err_msg=name)
    chex.assert_trees_all_close(a.train_state.params, b.train_state.params, rtol=2e-4, atol=1e-5)


@pytest.fixture(scope="module")
def jitted_train():
    return jax.jit(train)


def test_output_shapes(jitted_train):
    cfg = PPOConfig(**TINY)
    out = jitted_train(cfg, jax.random.key(0))
    assert set(out.metrics) == set(METRIC_NAMES)
    for name, value in out.metrics.items():
        assert value.shape == (cfg.num_updates,), name
    assert np.isfinite(out.metrics["policy_loss"]).all()
    # Linear annealing: lr_u = lr * (1 - u / num_updates).
    expected_lr = 2.5e-4 * (1 - np.arange(cfg.num_updates) / cfg.num_updates)
    np.testing.assert_allclose(out.metrics["learning_rate"], expected_lr, rtol=1e-6)


def test_determinism(jitted_train):
    cfg = PPOConfig(**TINY)
    a = jax.device_get(jitted_train(cfg, jax.random.key(3)))
    b = jax.device_get(jitted_train(cfg, jax.random.key(3)))
    for name in METRIC_NAMES:
        np.testing.assert_array_equal(a.metrics[name], b.metrics[name], err_msg=name)
    chex.assert_trees_all_equal(a.train_state.params, b.train_state.params)
    c = jax.device_get(jitted_train(cfg, jax.random.key(4)))
    assert not np.array_equal(a.metrics["policy_loss"], c.metrics["policy_loss"])


@pytest.mark.parametrize(
    "cfg",
    [
        PPOConfig(**TINY),
        # Continuous actions with observation normalization and reward scaling on.
        PPOConfig(**TINY, env="Pendulum-v1", normalize_obs=True, normalize_reward=True),
    ],
    ids=["cartpole", "pendulum-normalized"],
)
def test_vmap_over_seeds_equals_separate_runs(jitted_train, cfg):
    keys = jax.random.split(jax.random.key(7), 3)
    batched = jax.jit(jax.vmap(train, in_axes=(None, 0)))(cfg, keys)
    for i in range(3):
        single = jitted_train(cfg, keys[i])
        assert_outputs_close(jax.tree.map(lambda x: x[i], batched), single)


def test_vmap_over_settings_equals_separate_runs(jitted_train):
    settings = [
        PPOConfig(**TINY, lr=1e-3, clip_eps=0.1, ent_coef=0.0, gae_lambda=0.8),
        PPOConfig(**TINY, lr=3e-4, clip_eps=0.2, ent_coef=0.01, gae_lambda=0.95),
        PPOConfig(**TINY, lr=1e-4, clip_eps=0.3, ent_coef=0.05, gamma=0.9, vf_coef=1.0),
    ]
    stacked = jax.tree.map(lambda *xs: np.stack(xs), *settings)
    keys = jax.random.split(jax.random.key(11), 3)
    batched = jax.jit(jax.vmap(train))(stacked, keys)
    for i, cfg in enumerate(settings):
        assert_outputs_close(jax.tree.map(lambda x: x[i], batched), jitted_train(cfg, keys[i]))
    # The settings really differ: distinct learning-rate curves.
    np.testing.assert_allclose(batched.metrics["learning_rate"][:, 0], [1e-3, 3e-4, 1e-4], rtol=1e-6)


def test_traced_leaves_do_not_retrace():
    @jax.jit
    @chex.assert_max_traces(n=1)
    def run(cfg, key):
        return train(cfg, key).metrics["loss"]

    base = PPOConfig(**TINY)
    key = jax.random.key(0)
    run(base, key)
    alternatives = dict(
        lr=1e-3, clip_eps=0.3, vf_clip_eps=0.5, ent_coef=0.0, vf_coef=1.0, gamma=0.9, gae_lambda=0.5,
        max_grad_norm=1.0, adam_eps=1e-8, obs_clip=5.0, reward_clip=5.0, kl_beta=3.0, kl_target=0.03,
        dual_clip_c=2.0, target_kl=0.05, clip_kl_target=0.02,
    )
    assert set(alternatives) == set(TRACED_FIELDS)
    for name, value in alternatives.items():
        run(base.replace(**{name: value}), key)  # raises AssertionError on a second trace
