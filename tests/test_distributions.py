"""Categorical, diagonal-Gaussian and tanh-squashed Gaussian log-probabilities and entropies against SciPy and quadrature."""

import jax
import numpy as np
from scipy import stats

from ppo_jax.distributions import (
    PolicyDist,
    TanhGaussian,
    entropy,
    env_action,
    kl_divergence,
    log_prob,
    mode,
    sample,
    standard_noise,
)


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


def squashed_log_density(u, mean, std):
    """float64 reference: density of a = tanh(u) by change of variables, log N(u) - log |d tanh/du|."""
    return (stats.norm(mean, std).logpdf(u) - np.log1p(-(np.tanh(u) ** 2))).sum(-1)


def test_tanh_gaussian_log_prob_includes_the_jacobian():
    mean = np.array([[0.3, -1.2], [0.0, 2.0]], np.float32)
    log_std = np.array([np.log(0.5), 0.2], np.float32)
    u = np.array([[0.9, -0.4], [-2.5, 3.0]], np.float32)
    dist = TanhGaussian(mean, log_std)
    reference = squashed_log_density(u.astype(np.float64), mean.astype(np.float64), np.exp(log_std.astype(np.float64)))
    np.testing.assert_allclose(log_prob(dist, u), reference, rtol=1e-5)
    # Deep in the saturated tail tanh(u) rounds to 1 in float32; the log-density stays finite and exact.
    far = np.array([[12.0, -11.0]], np.float32)
    exact = stats.norm(mean[0], np.exp(log_std)).logpdf(far[0]).sum() - (2 * np.log(2) - 2 * np.abs(far[0])).sum()
    np.testing.assert_allclose(log_prob(TanhGaussian(mean[:1], log_std), far), [exact], rtol=1e-4)


def test_tanh_gaussian_density_integrates_to_one_over_the_action():
    # log_prob is the density of the action a = tanh(u): integrate exp(log_prob) over a in (-1, 1) in 1-D.
    a = np.linspace(-1 + 1e-7, 1 - 1e-7, 400_001)
    u = np.arctanh(a).astype(np.float32)[:, None]
    density = np.exp(
        np.asarray(log_prob(TanhGaussian(np.full((a.size, 1), 0.7, np.float32), np.array([-0.3], np.float32)), u))
    )
    np.testing.assert_allclose(np.trapezoid(density, a), 1.0, atol=1e-3)


def test_tanh_gaussian_entropy_estimate_matches_quadrature():
    # H(tanh(u)) = -int p(a) log p(a) da by quadrature in u-space (float64), against the mean of the one-sample estimates.
    mean, log_std = 0.8, np.log(0.6)
    grid = np.linspace(mean - 12 * 0.6, mean + 12 * 0.6, 200_001)
    p_u = stats.norm(mean, 0.6).pdf(grid)
    reference = -np.trapezoid(p_u * squashed_log_density(grid[:, None], mean, 0.6), grid)
    noise = np.asarray(jax.random.normal(jax.random.key(3), (200_000, 1)))
    dist = TanhGaussian(np.full((200_000, 1), mean, np.float32), np.array([log_std], np.float32))
    np.testing.assert_allclose(np.mean(entropy(dist, noise)), reference, atol=5e-3)
    np.testing.assert_allclose(
        np.asarray(entropy(PolicyDist(dist.loc, dist.log_std)))[0], stats.norm(0, 0.6).entropy(), rtol=1e-6
    )


def test_tanh_gaussian_actions_kl_and_noise():
    low, high = np.array([-2.0, 0.0], np.float32), np.array([2.0, 1.0], np.float32)
    dist = TanhGaussian(np.zeros((1, 2), np.float32), np.zeros(2, np.float32))
    u = np.array([[0.5, -30.0]], np.float32)
    np.testing.assert_allclose(env_action(dist, u, low, high), [[2 * np.tanh(0.5), 0.0]], rtol=1e-6)
    np.testing.assert_allclose(env_action(PolicyDist(dist.loc, dist.log_std), u, low, high), [[0.5, 0.0]])
    np.testing.assert_array_equal(env_action(PolicyDist(np.zeros((1, 3)), None), np.array([2]), low, high), [2])
    # KL is invariant under the bijection tanh: the KL of the underlying Gaussians (closed form, 1-D).
    p, q = (
        TanhGaussian(np.array([[0.3]], np.float32), np.array([0.1], np.float32)),
        TanhGaussian(np.array([[-0.2]], np.float32), np.array([-0.4], np.float32)),
    )
    s_p, s_q = np.exp(0.1), np.exp(-0.4)
    reference = np.log(s_q / s_p) + (s_p**2 + 0.5**2) / (2 * s_q**2) - 0.5
    np.testing.assert_allclose(kl_divergence(p, q), [reference], rtol=1e-5)
    # The stored action's standard normal draw: (u - loc) / std.
    np.testing.assert_allclose(standard_noise(p, np.array([[1.0]], np.float32)), [[(1.0 - 0.3) / s_p]], rtol=1e-6)
