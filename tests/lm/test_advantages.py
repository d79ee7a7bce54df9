"""Critic-free advantages (GRPO, Dr. GRPO, RLOO, pass@k, REINFORCE++, REINFORCE++-baseline) against NumPy loops on a hand batch."""

from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ppo_jax.lm.advantages import ESTIMATORS, estimate, group_stats, zero_variance_groups

ADVANTAGE_ESTIMATORS = ESTIMATORS.where(lambda estimator: not estimator.needs_critic)


def advantages(estimator, token_rewards, mask, *, group_size, eps):
    """The estimator's advantages ``[M, L]`` through the table (no critic: no values, no targets)."""
    adv, targets = estimate(estimator, token_rewards, mask, None, SimpleNamespace(group_size=group_size, adv_eps=eps))
    assert targets is None
    return adv


advantages_jit = jax.jit(advantages, static_argnames=("estimator", "group_size"))
G, L, EPS = 3, 4, np.float32(1e-6)
LENGTHS = [4, 2, 3, 1, 4, 2]  # response tokens per row; rows 0-2 answer prompt 0, rows 3-5 prompt 1
MASK = np.array([[t < n for t in range(L)] for n in LENGTHS])
NAN = np.nan  # padding holds NaN: it must not leak into any sum
# Prompt 0: a KL-like reward on every token and a score on the last. Prompt 1: every row's return is 0.75
# exactly (dyadic numbers), a zero-variance group.
TOKEN_REWARDS = np.array(
    [
        [-0.1, 0.2, -0.3, 1.0],
        [0.05, -0.4, NAN, NAN],
        [0.3, -0.2, 0.5, NAN],
        [0.75, NAN, NAN, NAN],
        [0.25, 0.25, 0.125, 0.125],
        [0.5, 0.25, NAN, NAN],
    ],
    np.float32,
)


def numpy_advantages(estimator):
    returns = [float(np.sum(TOKEN_REWARDS[i, :n], dtype=np.float64)) for i, n in enumerate(LENGTHS)]
    expected = np.zeros((len(LENGTHS), L))
    for i, n in enumerate(LENGTHS):
        group = returns[i // G * G : i // G * G + G]
        others = [r for j, r in enumerate(group) if j != i % G]
        if estimator == "grpo":
            value = (returns[i] - np.mean(group)) / (np.std(group, ddof=1) + EPS)
        elif estimator == "rloo":
            value = returns[i] - np.mean(others)
        elif estimator == "grpo_passk":  # only the best (the first among ties) moves, by its lead over the second
            best = int(np.argmax(group))
            lead = sorted(group)[-1] - sorted(group)[-2]
            value = lead / (np.std(group, ddof=1) + EPS) if i % G == best else 0.0
        elif estimator == "reinforce_pp":  # return-to-go, whitened below
            expected[i, :n] = [np.sum(TOKEN_REWARDS[i, t:n], dtype=np.float64) for t in range(n)]
            continue
        else:  # drgrpo, reinforce_pp_baseline
            value = returns[i] - np.mean(group)
        expected[i, :n] = value
    if estimator.startswith("reinforce_pp"):
        tokens = expected[MASK]
        expected[MASK] = (tokens - tokens.mean()) / (tokens.std() + EPS)
    return expected


@pytest.mark.parametrize("estimator", ADVANTAGE_ESTIMATORS)
def test_advantages_match_a_numpy_loop(estimator):
    got = np.asarray(advantages_jit(estimator, TOKEN_REWARDS, MASK, group_size=G, eps=EPS))
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, numpy_advantages(estimator), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(got[~MASK], 0.0)
    if estimator in ("grpo", "drgrpo", "rloo", "grpo_passk"):
        np.testing.assert_array_equal(got[3:], 0.0)  # the zero-variance group


def test_passk_advantage_moves_only_a_group_best_that_leads():
    # groups of 4 with one reward on the last token: [1, 0, 0, 0] (one right: it leads by 1), [1, 1, 0, 0] (a tie
    # at the top: nothing moves), [0, 0.5, 1, 0.5]
    returns = np.array([1, 0, 0, 0, 1, 1, 0, 0, 0, 0.5, 1, 0.5], np.float32)
    rewards, mask = np.stack([np.zeros_like(returns), returns], -1), np.ones((12, 2), bool)
    got = np.asarray(advantages_jit("grpo_passk", rewards, mask, group_size=4, eps=EPS))
    expected = np.zeros(12)
    expected[0] = 1 / (np.std([1, 0, 0, 0], ddof=1) + EPS)
    expected[10] = 0.5 / (np.std([0, 0.5, 1, 0.5], ddof=1) + EPS)
    np.testing.assert_allclose(got, np.repeat(expected[:, None], 2, 1), rtol=1e-6)


def test_equal_returns_give_exactly_zero_even_when_their_float_mean_is_off():
    # 0.1 is not dyadic: the float32 mean of three 0.1s may differ from 0.1 by an ulp, then / (0 + eps) is O(0.01).
    rewards = jnp.array([[0.1, 0.0], [0.0, 0.1], [0.1, 0.0], [1.0, 0.0], [0.0, 0.0], [0.25, 0.0]])
    mask = jnp.array([[True, False], [True, True], [True, True], [True, False], [True, True], [True, False]])
    np.testing.assert_array_equal(
        zero_variance_groups(jnp.array([0.1, 0.1, 0.1, 1.0, 0.0, 0.25]), 3), [1, 1, 1, 0, 0, 0]
    )
    for estimator in ("grpo", "drgrpo", "rloo"):
        got = np.asarray(advantages_jit(estimator, rewards, mask, group_size=3, eps=EPS))
        np.testing.assert_array_equal(got[:3], 0.0)
        assert np.abs(got[3:][np.asarray(mask[3:])]).min() > 0.1


def test_group_stats_use_the_sample_std():
    returns = np.array([1.0, 0.0, 0.5, 2.0, 2.0, 5.0], np.float32)
    mean, std = group_stats(jnp.asarray(returns), 3)
    np.testing.assert_allclose(mean, np.repeat([0.5, 3.0], 3), rtol=1e-6)
    np.testing.assert_allclose(std, np.repeat([np.std(returns[:3], ddof=1), np.std(returns[3:], ddof=1)], 3), rtol=1e-6)


def test_bad_group_size_or_estimator_raises():
    with pytest.raises(ValueError, match="group_size"):
        group_stats(jnp.zeros(6), 4)
    with pytest.raises(ValueError, match="group_size"):
        advantages("rloo", TOKEN_REWARDS, MASK, group_size=1, eps=EPS)
    with pytest.raises(ValueError, match="unknown advantage estimator"):
        advantages("gpro", TOKEN_REWARDS, MASK, group_size=G, eps=EPS)
