"""Token policy losses (clip with DAPO's decoupled range, dual clip, GSPO, CISPO, REINFORCE) against NumPy and hand cases."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ppo_jax.lm.policy_objectives import log_ratio, policy_loss

EPS_LOW, EPS_HIGH, C = np.float32(0.2), np.float32(0.28), np.float32(3.0)
STATIC = ("kind", "level", "dual_clip")


@functools.partial(jax.jit, static_argnames=STATIC)
def loss_and_stats(log_prob, old_log_prob, advantage, mask, *, kind, level="token", dual_clip=False):
    return policy_loss(
        kind,
        log_prob,
        old_log_prob,
        advantage,
        mask,
        level=level,
        eps_low=EPS_LOW,
        eps_high=EPS_HIGH,
        dual_clip=dual_clip,
        dual_clip_c=C,
    )


@functools.partial(jax.jit, static_argnames=STATIC)
def loss_gradient(log_prob, old_log_prob, advantage, mask, *, kind, level="token", dual_clip=False):
    def total(lp):
        return loss_and_stats(lp, old_log_prob, advantage, mask, kind=kind, level=level, dual_clip=dual_clip)[0].sum()

    return jax.grad(total)(log_prob)


# A grid: ratios inside and on both sides of [0.8, 1.28] (rows) x advantages of both signs and 0 (columns).
RATIOS = np.array([0.5, 0.79, 0.81, 1.0, 1.1, 1.27, 1.29, 2.0], np.float32)
ADVANTAGES = np.array([-1.5, 0.0, 2.0], np.float32)
GRID_RATIO = np.repeat(RATIOS[:, None], len(ADVANTAGES), 1)
GRID_ADV = np.repeat(ADVANTAGES[None, :], len(RATIOS), 0)
GRID_OLD = np.full(GRID_RATIO.shape, -1.3, np.float32)
GRID_LOG_PROB = GRID_OLD + np.log(GRID_RATIO)
GRID_MASK = np.ones(GRID_RATIO.shape, bool)


def test_clip_matches_numpy_on_a_grid_with_a_decoupled_range():
    loss, stats = loss_and_stats(GRID_LOG_PROB, GRID_OLD, GRID_ADV, GRID_MASK, kind="clip")
    r = np.exp(GRID_LOG_PROB - GRID_OLD)
    expected = -np.minimum(r * GRID_ADV, np.clip(r, 1 - EPS_LOW, 1 + EPS_HIGH) * GRID_ADV)
    np.testing.assert_allclose(loss, expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(stats.ratio, r, rtol=1e-6)
    np.testing.assert_array_equal(stats.low, (GRID_ADV < 0) & (r < 1 - EPS_LOW))
    np.testing.assert_array_equal(stats.high, (GRID_ADV > 0) & (r > 1 + EPS_HIGH))
    np.testing.assert_array_equal(stats.dual, 0.0)
    # Where an indicator is on, the token's gradient is exactly 0; elsewhere it is -r A.
    grad = np.asarray(loss_gradient(GRID_LOG_PROB, GRID_OLD, GRID_ADV, GRID_MASK, kind="clip"))
    clipped = (np.asarray(stats.low) + np.asarray(stats.high)) > 0
    np.testing.assert_array_equal(grad[clipped], 0.0)
    np.testing.assert_allclose(grad[~clipped], (-r * GRID_ADV)[~clipped], rtol=1e-5, atol=1e-6)


def test_dual_clip_bounds_negative_advantages_by_c_a():
    # Worked by hand, eps = (0.2, 0.28), c = 3:
    #   A = -1, r = 4: min(-4, -1.28) = -4, max(-4, -3) = -3 -> loss 3, dual bound on, gradient 0
    #   A = -1, r = 2: min(-2, -1.28) = -2, max(-2, -3) = -2 -> loss 2, gradient -r A = 2
    #   A = +1, r = 4: min(4, 1.28) = 1.28 -> loss -1.28 (no dual clip for A > 0), high clip on
    r = np.array([[4.0, 2.0, 4.0]], np.float32)
    adv = np.array([[-1.0, -1.0, 1.0]], np.float32)
    old = np.zeros_like(r)
    mask = np.ones(r.shape, bool)
    loss, stats = loss_and_stats(np.log(r), old, adv, mask, kind="clip", dual_clip=True)
    np.testing.assert_allclose(loss, [[3.0, 2.0, -1.28]], rtol=1e-6)
    np.testing.assert_array_equal(stats.dual, [[1.0, 0.0, 0.0]])
    np.testing.assert_array_equal(stats.high, [[0.0, 0.0, 1.0]])
    np.testing.assert_allclose(loss_gradient(np.log(r), old, adv, mask, kind="clip", dual_clip=True), [[0.0, 2.0, 0.0]])
    # Without the dual clip the first token's loss is the unbounded 4.
    assert float(loss_and_stats(np.log(r), old, adv, mask, kind="clip")[0][0, 0]) == pytest.approx(4.0)


# Three sequences of lengths 3, 1, 2 (L = 4); padding log-probs are NaN.
SEQ_MASK = np.array([[1, 1, 1, 0], [1, 0, 0, 0], [1, 1, 0, 0]], bool)
SEQ_LENGTHS = SEQ_MASK.sum(-1)
SEQ_OLD = np.where(SEQ_MASK, -1.0, np.nan).astype(np.float32)
SEQ_LOG_PROB = np.where(
    SEQ_MASK, SEQ_OLD + np.array([[0.1, -0.2, 0.25, 0], [0.6, 0, 0, 0], [-0.05, 0.02, 0, 0]]), np.nan
).astype(np.float32)
SEQ_ADV = np.where(SEQ_MASK, np.array([[1.0], [2.0], [-1.0]]), np.nan).astype(np.float32)


def test_gspo_sequence_ratio_and_its_gradient():
    got = np.asarray(jax.jit(log_ratio, static_argnums=3)(SEQ_LOG_PROB, SEQ_OLD, SEQ_MASK, "sequence"))
    for i, n in enumerate(SEQ_LENGTHS):
        np.testing.assert_allclose(got[i, :n], np.mean(SEQ_LOG_PROB[i, :n] - SEQ_OLD[i, :n]), rtol=1e-6)
        np.testing.assert_array_equal(got[i, n:], 0.0)

    # GSPO's loss: the per-token loss averaged per sequence, then over sequences (seq-mean-token-mean).
    def gspo_loss(lp):
        loss, _ = policy_loss(
            "clip", lp, SEQ_OLD, SEQ_ADV, SEQ_MASK, level="sequence", eps_low=EPS_LOW, eps_high=EPS_HIGH
        )
        return (loss.sum(-1) / SEQ_LENGTHS).mean()

    grad = np.asarray(jax.jit(jax.grad(gspo_loss))(SEQ_LOG_PROB))
    s = np.exp([np.mean(SEQ_LOG_PROB[i, :n] - SEQ_OLD[i, :n]) for i, n in enumerate(SEQ_LENGTHS)])
    # s = exp(0.05), exp(0.6), exp(-0.015): row 1 (A > 0, s > 1.28) is clipped; rows 0 and 2 get -A s / (|y_i| M).
    assert s[1] > 1 + EPS_HIGH and 1 - EPS_LOW < s[0] < 1 + EPS_HIGH and 1 - EPS_LOW < s[2] < 1 + EPS_HIGH
    adv = SEQ_ADV[:, 0]
    for i, n in enumerate(SEQ_LENGTHS):
        expected = 0.0 if i == 1 else -adv[i] * s[i] / (n * len(SEQ_LENGTHS))
        np.testing.assert_allclose(grad[i, :n], expected, rtol=1e-5)
        np.testing.assert_array_equal(grad[i, n:], 0.0)


def test_cispo_gradient_is_the_clipped_weight_times_advantage_and_never_zero():
    loss, stats = loss_and_stats(GRID_LOG_PROB, GRID_OLD, GRID_ADV, GRID_MASK, kind="cispo")
    r = np.exp(GRID_LOG_PROB - GRID_OLD)
    weight = np.clip(r, 1 - EPS_LOW, 1 + EPS_HIGH)
    np.testing.assert_allclose(loss, -weight * GRID_ADV * GRID_LOG_PROB, rtol=1e-5, atol=1e-6)
    grad = np.asarray(loss_gradient(GRID_LOG_PROB, GRID_OLD, GRID_ADV, GRID_MASK, kind="cispo"))
    np.testing.assert_allclose(grad, -weight * GRID_ADV, rtol=1e-5, atol=1e-6)
    assert (grad[GRID_ADV != 0] != 0).all()
    # CISPO's indicators count the clipped weight whatever the advantage's sign (A = 0 included).
    np.testing.assert_array_equal(stats.low, r < 1 - EPS_LOW)
    np.testing.assert_array_equal(stats.high, r > 1 + EPS_HIGH)


def test_pg_is_minus_advantage_times_log_prob():
    loss, stats = loss_and_stats(GRID_LOG_PROB, GRID_OLD, GRID_ADV, GRID_MASK, kind="pg")
    np.testing.assert_allclose(loss, -GRID_ADV * GRID_LOG_PROB, rtol=1e-6)
    np.testing.assert_allclose(loss_gradient(GRID_LOG_PROB, GRID_OLD, GRID_ADV, GRID_MASK, kind="pg"), -GRID_ADV)
    for indicator in (stats.low, stats.high, stats.dual):
        np.testing.assert_array_equal(indicator, 0.0)


@pytest.mark.parametrize(
    ("kind", "level", "dual_clip"),
    [("clip", "token", True), ("clip", "sequence", False), ("cispo", "token", False), ("pg", "token", False)],
)
def test_masked_tokens_get_zero_loss_and_gradient_even_when_nan(kind, level, dual_clip):
    args = (SEQ_LOG_PROB, SEQ_OLD, SEQ_ADV, SEQ_MASK)
    loss, stats = loss_and_stats(*args, kind=kind, level=level, dual_clip=dual_clip)
    grad = np.asarray(loss_gradient(*args, kind=kind, level=level, dual_clip=dual_clip))
    assert np.isfinite(loss).all() and np.isfinite(grad).all()
    np.testing.assert_array_equal(np.asarray(loss)[~SEQ_MASK], 0.0)
    np.testing.assert_array_equal(grad[~SEQ_MASK], 0.0)
    assert (grad[SEQ_MASK] != 0).any()
    for indicator in (stats.low, stats.high, stats.dual):
        np.testing.assert_array_equal(np.asarray(indicator)[~SEQ_MASK], 0.0)


def test_vmap_over_clip_ranges_equals_separate_calls():
    eps_low, eps_high = jnp.array([0.1, 0.2, 0.3]), jnp.array([0.1, 0.28, 0.5])

    def clip_loss(lo, hi):
        return policy_loss("clip", GRID_LOG_PROB, GRID_OLD, GRID_ADV, GRID_MASK, eps_low=lo, eps_high=hi)[0]

    swept = jax.jit(jax.vmap(clip_loss))(eps_low, eps_high)
    for k in range(3):
        np.testing.assert_allclose(swept[k], clip_loss(eps_low[k], eps_high[k]), rtol=1e-6)


def test_unknown_kind_or_level_raises():
    with pytest.raises(ValueError, match="unknown policy loss"):
        policy_loss("ppo", GRID_LOG_PROB, GRID_OLD, GRID_ADV, GRID_MASK, eps_low=EPS_LOW, eps_high=EPS_HIGH)
    with pytest.raises(ValueError, match="unknown ratio level"):
        log_ratio(jnp.zeros((1, 1)), jnp.zeros((1, 1)), jnp.ones((1, 1), bool), "group")
