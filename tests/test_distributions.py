"""Categorical and diagonal-Gaussian log-probabilities and entropies against SciPy."""

import jax
import numpy as np
from scipy import stats

from ppo_jax.distributions import PolicyDist, entropy, log_prob, mode, sample


def test_categorical():
    logits = np.array([[1.0, 2.0, 0.5], [0.0, 0.0, 0.0]], np.float32)
    probs = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    dist = PolicyDist(logits, None)
    actions = np.array([1, 2])
    np.testing.assert_allclose(log_prob(dist, actions), np.log(probs[[0, 1], actions]), rtol=1e-6)
    np.testing.assert_allclose(entropy(dist), [stats.entropy(p) for p in probs], rtol=1e-6)
    np.testing.assert_array_equal(mode(dist), [1, 0])
    draws = sample(jax.random.key(0), PolicyDist(np.tile(logits[:1], (20_000, 1)), None))
    np.testing.assert_allclose(np.bincount(draws, minlength=3) / 20_000, probs[0], atol=0.01)


def test_diagonal_gaussian():
    mean = np.array([[0.5, -1.0]], np.float32)
    log_std = np.array([0.0, np.log(2.0)], np.float32)
    dist = PolicyDist(mean, log_std)
    action = np.array([[1.0, 0.0]], np.float32)
    reference = stats.norm(0.5, 1.0).logpdf(1.0) + stats.norm(-1.0, 2.0).logpdf(0.0)
    np.testing.assert_allclose(log_prob(dist, action), [reference], rtol=1e-6)
    np.testing.assert_allclose(entropy(dist), [stats.norm(0, 1).entropy() + stats.norm(0, 2).entropy()], rtol=1e-6)
    draws = sample(jax.random.key(1), PolicyDist(np.tile(mean, (20_000, 1)), log_std))
    np.testing.assert_allclose(draws.mean(0), mean[0], atol=0.05)
    np.testing.assert_allclose(draws.std(0), [1.0, 2.0], atol=0.05)
