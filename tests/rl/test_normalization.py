"""Running statistics and reward scaling against NumPy over the whole stream."""

import numpy as np

from ppo_jax.rl.normalization import init_reward_scaler, init_stats, normalize, scale_reward, update_stats


def test_running_mean_var_equals_numpy_over_all_batches():
    rng = np.random.default_rng(0)
    batches = [rng.normal(3.0, 2.0, size=(n, 5)) for n in (4, 1, 16, 7)]
    stats = init_stats((5,))
    for batch in batches:
        stats = update_stats(stats, batch.astype(np.float32))
    everything = np.concatenate(batches)
    # The prior (mean 0, var 1, count 1e-4) weighs 1e-4 / 28 of the result: negligible at this tolerance.
    np.testing.assert_allclose(stats.mean, everything.mean(0), rtol=1e-4)
    np.testing.assert_allclose(stats.var, everything.var(0), rtol=1e-4)
    np.testing.assert_allclose(stats.count, len(everything) + 1e-4, rtol=1e-6)


def test_normalize_clips():
    stats = init_stats((2,))._replace(mean=np.array([1.0, 0.0], np.float32), var=np.array([4.0, 1.0], np.float32))
    out = normalize(stats, np.array([[3.0, 50.0]], np.float32), 10.0)
    np.testing.assert_allclose(out, [[1.0, 10.0]], rtol=1e-6)


def test_reward_scaling_matches_a_manual_loop():
    # Reference: gym's NormalizeReward, one env at a time, written out.
    rng = np.random.default_rng(1)
    T, B, gamma = 50, 3, 0.9
    rewards = rng.normal(1.0, 3.0, size=(T, B)).astype(np.float32)
    dones = rng.random((T, B)) < 0.1

    returns = np.zeros(B)
    history = []
    expected = np.zeros((T, B))
    for t in range(T):
        returns = returns * gamma + rewards[t]
        history.append(returns.copy())
        var = np.concatenate(history).var() * len(np.concatenate(history)) / (len(np.concatenate(history)) + 1e-4)
        expected[t] = np.clip(rewards[t] / np.sqrt(var + 1e-8), -10, 10)
        returns = np.where(dones[t], 0.0, returns)

    scaler = init_reward_scaler(B)
    got = np.zeros((T, B))
    for t in range(T):
        scaler, got[t] = scale_reward(scaler, rewards[t], dones[t], gamma=gamma, clip=10.0)
    np.testing.assert_allclose(got, expected, rtol=2e-3)
