"""Clip-Cov and KL-Cov (Cui et al. 2025): the token covariance against NumPy, the selections on hand cases, traced fractions."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ppo_jax.lm.covariance_regularizers import (
    clip_cov_selection,
    covariance_regularized_loss,
    kl_cov_selection,
    selection_count,
    token_covariance,
)

TRACES = {"clip_cov": 0, "kl_cov": 0}


@jax.jit
def clip_cov(cov, mask, key, fraction, exclude):
    TRACES["clip_cov"] += 1
    return clip_cov_selection(cov, mask, key, fraction=fraction, cov_low=1.0, cov_high=5.0, exclude=exclude)


@jax.jit
def kl_cov(cov, mask, fraction):
    TRACES["kl_cov"] += 1
    return kl_cov_selection(cov, mask, fraction=fraction)


@functools.partial(jax.jit, static_argnames="regularizer")
def regularized(regularizer, per_token_loss, log_prob, old_log_prob, advantage, mask, key, fraction):
    return covariance_regularized_loss(
        regularizer,
        per_token_loss,
        log_prob,
        old_log_prob,
        advantage,
        mask,
        key,
        fraction=fraction,
        cov_low=1.0,
        cov_high=5.0,
        kl_coef=2.0,
    )


MASK = np.array([[1, 1, 1, 0], [1, 1, 0, 0], [1, 1, 1, 1]], bool)  # N = 9 response tokens
EXCLUDE_NONE = np.zeros_like(MASK)


def test_token_covariance_matches_numpy_and_has_no_gradient():
    rng = np.random.default_rng(0)
    log_prob = np.where(MASK, rng.normal(-1.0, 1.0, MASK.shape), np.nan).astype(np.float32)
    advantage = np.where(MASK, rng.normal(size=MASK.shape), np.nan).astype(np.float32)
    lp, adv = log_prob[MASK], advantage[MASK]
    expected = np.zeros(MASK.shape)
    expected[MASK] = (lp - lp.mean()) * (adv - adv.mean())
    np.testing.assert_allclose(token_covariance(log_prob, advantage, MASK), expected, rtol=1e-5, atol=1e-6)
    grad = jax.grad(lambda x: token_covariance(x, advantage, MASK).sum())(log_prob)
    np.testing.assert_array_equal(grad, 0.0)


def test_kl_cov_picks_exactly_the_top_k_response_tokens():
    cov = np.array([[0.5, 3.0, -1.0, 99.0], [2.0, 0.1, 50.0, 0.0], [-2.0, 4.0, 1.0, 0.3]], np.float32)
    # The two 99 / 50 entries are padding: never picked. floor(0.25 * 9) = 2 -> the tokens of cov 4 and 3.
    expected = np.zeros(MASK.shape, bool)
    expected[2, 1] = expected[0, 1] = True
    np.testing.assert_array_equal(kl_cov(cov, MASK, np.float32(0.25)), expected)
    # floor(0.5 * 9) = 4 -> also 2 and 1; a tiny positive fraction still picks 1; 0 picks none.
    expected[1, 0] = expected[2, 2] = True
    np.testing.assert_array_equal(kl_cov(cov, MASK, np.float32(0.5)), expected)
    np.testing.assert_array_equal(np.argwhere(kl_cov(cov, MASK, np.float32(1e-4))), [[2, 1]])
    assert not np.asarray(kl_cov(cov, MASK, np.float32(0.0))).any()
    assert TRACES["kl_cov"] == 1  # the fraction is traced: one compilation for all four


def test_clip_cov_picks_k_eligible_tokens_at_random():
    cov = np.array([[1.5, 2.0, 0.5, 3.0], [4.0, 6.0, 2.0, 2.0], [1.0, 5.0, 2.5, -1.0]], np.float32)
    eligible = MASK & (cov >= 1.0) & (cov <= 5.0)  # 6 tokens: the padding 3.0 and 2.0 are not
    assert eligible.sum() == 6
    picks = set()
    for seed in range(6):
        selected = np.asarray(clip_cov(cov, MASK, jax.random.key(seed), np.float32(1 / 3), EXCLUDE_NONE))
        assert selected.sum() == 3  # floor(9 / 3)
        assert not (selected & ~eligible).any()
        picks.add(tuple(np.argwhere(selected).ravel()))
    assert len(picks) > 1  # different keys, different sets
    # At most all eligible; excluded tokens (e.g. already clipped) are never picked.
    everything = np.asarray(clip_cov(cov, MASK, jax.random.key(0), np.float32(1.0), EXCLUDE_NONE))
    np.testing.assert_array_equal(everything, eligible)
    exclude = np.zeros_like(MASK)
    exclude[0, 0] = exclude[1, 0] = True
    np.testing.assert_array_equal(clip_cov(cov, MASK, jax.random.key(0), np.float32(1.0), exclude), eligible & ~exclude)
    assert TRACES["clip_cov"] == 1


def test_an_expected_count_picks_the_share_on_average_at_any_batch_size():
    # The authors' 2e-4 of N = 9 tokens: 1 token by their rule, 1.8e-3 tokens on average when rounded at random
    # (floor(r N + u), u ~ U[0, 1): r N - floor(r N) is the chance of one more).
    keys = jax.random.split(jax.random.key(0), 20_000)
    for fraction in (2e-4, 0.3):
        expected = fraction * MASK.sum()
        counts = np.asarray(jax.vmap(lambda k, f=fraction: selection_count(f, MASK, k))(keys))
        assert set(np.unique(counts)) <= {np.floor(expected), np.floor(expected) + 1}
        standard_error = np.sqrt((expected % 1) * (1 - expected % 1) / counts.size)
        assert abs(counts.mean() - expected) < 4 * standard_error + 1e-9, fraction
    assert int(selection_count(2e-4, MASK)) == 1  # the authors' rule: at least one
    # KL-Cov with an expected count takes that many of the largest-covariance tokens
    cov = np.array([[0.5, 3.0, -1.0, 99.0], [2.0, 0.1, 50.0, 0.0], [-2.0, 4.0, 1.0, 0.3]], np.float32)
    for seed in range(20):
        key = jax.random.key(seed)
        picked = np.asarray(kl_cov_selection(cov, MASK, fraction=0.3, key=key, expected_count=True))
        count = int(selection_count(0.3, MASK, jax.random.fold_in(key, 1)))  # 2 or 3 of 9
        top = np.argsort(-np.where(MASK, cov, -np.inf), axis=None)[:count]
        np.testing.assert_array_equal(np.flatnonzero(picked), np.sort(top))


def test_regularized_losses():
    per_token = np.where(MASK, 1.0, np.nan).astype(np.float32)
    log_prob = np.array([[-0.1, -3.0, -1.0, 0.0], [-0.2, -2.0, 0.0, 0.0], [-0.5, -0.1, -4.0, -1.0]], np.float32)
    old_log_prob = log_prob - 0.25
    advantage = np.array([[1.0, -1.0, 0.5, 0.0], [2.0, 0.0, 0.0, 0.0], [-1.0, 1.5, 0.2, 0.3]], np.float32)
    args = (per_token, log_prob, old_log_prob, advantage, MASK, jax.random.key(0), np.float32(0.25))
    loss, selected = regularized("none", *args)
    np.testing.assert_array_equal(loss, np.where(MASK, 1.0, 0.0))
    np.testing.assert_array_equal(selected, 0.0)
    cov = np.asarray(token_covariance(log_prob, advantage, MASK))
    loss, selected = regularized("kl_cov", *args)
    np.testing.assert_array_equal(selected, kl_cov_selection(cov, MASK, fraction=0.25))
    assert selected.sum() == 2
    np.testing.assert_allclose(loss, np.where(MASK, 1.0 + 2.0 * 0.25 * np.asarray(selected), 0.0), rtol=1e-6)
    loss, selected = regularized("clip_cov", *args)
    assert selected.sum() == 2 and not (np.asarray(selected) * ~((cov >= 1.0) & (cov <= 5.0))).any()  # 3 eligible
    np.testing.assert_array_equal(np.asarray(loss), np.where(MASK & (np.asarray(selected) == 0), 1.0, 0.0))
    with pytest.raises(ValueError, match="unknown covariance regularizer"):
        covariance_regularized_loss(
            "entropy", *args[:-1], fraction=0.1, cov_low=1.0, cov_high=5.0, kl_coef=jnp.float32(1.0)
        )
