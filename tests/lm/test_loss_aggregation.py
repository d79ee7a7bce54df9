"""Loss aggregation modes against a NumPy loop; masked entries (NaN here) get exactly zero gradient."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ppo_jax.lm.loss_aggregation import LOSS_AGGREGATIONS, aggregate


@jax.jit
def all_modes(per_token, mask):
    return {mode: aggregate(per_token, mask, mode) for mode in LOSS_AGGREGATIONS}


@jax.jit
def all_gradients(per_token, mask):
    return {mode: jax.grad(aggregate)(per_token, mask, mode) for mode in LOSS_AGGREGATIONS}


L = 5
LENGTHS = [5, 2, 0, 3]  # row 2 has no response token (e.g. dropped by dynamic sampling): absent
MASK = np.array([[t < n for t in range(L)] for n in LENGTHS])
PER_TOKEN = np.where(MASK, np.random.default_rng(0).normal(size=MASK.shape), np.nan).astype(np.float32)


def numpy_aggregate(mode):
    rows = [PER_TOKEN[i, :n].astype(np.float64) for i, n in enumerate(LENGTHS) if n > 0]
    if mode == "token-mean":
        return sum(r.sum() for r in rows) / sum(len(r) for r in rows)
    if mode == "seq-mean-token-mean":
        return np.mean([r.mean() for r in rows])
    if mode == "seq-mean-token-sum":
        return np.mean([r.sum() for r in rows])
    return sum(r.sum() for r in rows) / (len(rows) * L)  # seq-mean-token-sum-norm


def test_modes_match_a_numpy_loop():
    got = all_modes(PER_TOKEN, MASK)
    for mode in LOSS_AGGREGATIONS:
        assert float(got[mode]) == pytest.approx(numpy_aggregate(mode), rel=1e-5), mode


def test_gradients_are_the_token_weights_and_zero_on_masked_nan():
    # Worked by hand: 10 tokens in 3 present rows of lengths 5, 2, 3; L = 5.
    weight_per_row = {
        "token-mean": [1 / 10] * 4,
        "seq-mean-token-mean": [1 / (3 * 5), 1 / (3 * 2), 0.0, 1 / (3 * 3)],
        "seq-mean-token-sum": [1 / 3] * 4,
        "seq-mean-token-sum-norm": [1 / (3 * 5)] * 4,
    }
    got = all_gradients(PER_TOKEN, MASK)
    for mode in LOSS_AGGREGATIONS:
        expected = np.where(MASK, np.array(weight_per_row[mode])[:, None], 0.0)
        np.testing.assert_allclose(got[mode], expected, rtol=1e-6, err_msg=mode)
        np.testing.assert_array_equal(np.asarray(got[mode])[~MASK], 0.0)


def test_no_response_token_gives_zero_not_nan():
    empty = np.zeros_like(MASK)
    for mode, value in all_modes(PER_TOKEN, empty).items():
        assert float(value) == 0.0, mode
    for mode, grad in all_gradients(PER_TOKEN, empty).items():
        np.testing.assert_array_equal(grad, 0.0, err_msg=mode)


def test_unknown_mode_raises():
    with pytest.raises(ValueError, match="token-sum-mean"):
        aggregate(jnp.zeros((1, 1)), jnp.ones((1, 1), bool), "token-sum-mean")
