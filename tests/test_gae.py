"""compute_gae against a slow NumPy loop and a case worked out by hand."""

import jax
import numpy as np
import pytest

from ppo_jax.gae import compute_gae


def gae_reference(rewards, values, next_values, terminations, dones, gamma, lam):
    """Textbook loop, one env and one step at a time (float64)."""
    T, B = rewards.shape
    advantages = np.zeros((T, B))
    for b in range(B):
        next_advantage = 0.0
        for t in reversed(range(T)):
            bootstrap = 0.0 if terminations[t, b] else gamma * next_values[t, b]
            delta = rewards[t, b] + bootstrap - values[t, b]
            if dones[t, b]:
                next_advantage = 0.0
            next_advantage = delta + gamma * lam * next_advantage
            advantages[t, b] = next_advantage
    return advantages, advantages + values


@pytest.mark.parametrize("gamma,lam", [(0.99, 0.95), (0.9, 0.0), (0.97, 1.0), (1.0, 0.5)])
def test_gae_matches_numpy_loop(gamma, lam):
    rng = np.random.default_rng(0)
    T, B = 37, 5
    rewards = rng.normal(size=(T, B))
    values = rng.normal(size=(T, B))
    next_values = rng.normal(size=(T, B))
    terminations = rng.random((T, B)) < 0.1
    truncations = (rng.random((T, B)) < 0.1) & ~terminations
    dones = terminations | truncations
    assert terminations.any() and truncations.any()

    adv, ret = jax.jit(compute_gae)(
        rewards, values, next_values, terminations, dones, gamma=np.float32(gamma), gae_lambda=np.float32(lam)
    )
    ref_adv, ref_ret = gae_reference(rewards, values, next_values, terminations, dones, gamma, lam)
    np.testing.assert_allclose(adv, ref_adv, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ret, ref_ret, rtol=1e-5, atol=1e-5)


def test_gae_by_hand_truncation_bootstraps_termination_does_not():
    # One env, T = 3, gamma = 0.5, lambda = 0.5 (gamma * lambda = 0.25).
    #   t=0: r=1, V=2, V(next)=4, continues
    #   t=1: r=0, V=4, V(final obs)=8, truncated (time limit): bootstrap from 8, cut the trace
    #   t=2: r=3, V=1, V(next)=6, terminated: no bootstrap
    # deltas:  d0 = 1 + 0.5*4 - 2 = 1;  d1 = 0 + 0.5*8 - 4 = 0;  d2 = 3 + 0 - 1 = 2
    # A2 = 2;  A1 = d1 + 0.25*(1-done1)*A2 = 0 (trace cut);  A0 = d0 + 0.25*A1 = 1
    # returns = A + V = [3, 4, 3]
    rewards = np.array([[1.0], [0.0], [3.0]])
    values = np.array([[2.0], [4.0], [1.0]])
    next_values = np.array([[4.0], [8.0], [6.0]])
    terminations = np.array([[0], [0], [1]])
    dones = np.array([[0], [1], [1]])
    adv, ret = compute_gae(rewards, values, next_values, terminations, dones, gamma=0.5, gae_lambda=0.5)
    np.testing.assert_allclose(adv[:, 0], [1.0, 0.0, 2.0])
    np.testing.assert_allclose(ret[:, 0], [3.0, 4.0, 3.0])


def test_gae_outputs_stop_gradient():
    rewards = np.ones((4, 2), np.float32)
    dones = np.zeros((4, 2), np.float32)

    def total_advantage(values):
        adv, ret = compute_gae(rewards, values, values, dones, dones, gamma=0.9, gae_lambda=0.9)
        return adv.sum() + ret.sum()

    grad = jax.grad(total_advantage)(np.ones((4, 2), np.float32))
    np.testing.assert_array_equal(grad, 0.0)
