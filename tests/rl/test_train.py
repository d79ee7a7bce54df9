"""train(cfg, key) of PPO: output shapes, the learning-rate schedule, determinism with final parameters.

vmap over settings and seeds, retracing and on_update: tests/test_task_contract.py (every task)."""

import chex
import jax
import numpy as np
import pytest

from ppo_jax import PPOConfig
from ppo_jax.rl.task import METRIC_NAMES
from ppo_jax.rl.train import train

TINY = dict(total_timesteps=1024, num_envs=4, num_steps=32, num_minibatches=2, update_epochs=2)


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


def test_report_every_calls_back_after_every_kth_update_and_the_last():
    calls = []
    cfg = PPOConfig(**TINY)  # 8 updates
    out = jax.jit(
        lambda c, k: train(c, k, on_update=lambda u, m: calls.append((int(u), float(m["loss"]))), report_every=3)
    )(cfg, jax.random.key(2))
    jax.effects_barrier()
    assert sorted(u for u, _ in calls) == [2, 5, 7]  # after updates 3, 6 and the last (8)
    for u, loss in calls:
        assert loss == float(out.metrics["loss"][u])
