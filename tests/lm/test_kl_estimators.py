"""KL estimators k1, k2, k3: values and gradients against NumPy, bias against the exact KL of two categoricals."""

import math

import jax
import numpy as np
import pytest

from ppo_jax.lm.kl_estimators import KL_ESTIMATORS, estimator_errors, kl_estimate


@jax.jit
def all_estimates(log_prob, ref_log_prob):
    return {name: kl_estimate(log_prob, ref_log_prob, name) for name in KL_ESTIMATORS}


@jax.jit
def all_gradients(log_prob, ref_log_prob):
    return {
        name: jax.grad(lambda lp, n=name: kl_estimate(lp, ref_log_prob, n).sum())(log_prob) for name in KL_ESTIMATORS
    }


RNG = np.random.default_rng(0)
LOG_PROB = RNG.normal(-2.0, 1.0, size=(3, 4)).astype(np.float32)
REF_LOG_PROB = RNG.normal(-2.0, 1.0, size=(3, 4)).astype(np.float32)
# Two categoricals over 5 tokens, pi the sampler and pi_ref the reference.
PI = np.array([0.4, 0.3, 0.15, 0.1, 0.05])
PI_REF = np.array([0.2, 0.2, 0.2, 0.2, 0.2])
EXACT_KL = float(np.sum(PI * np.log(PI / PI_REF)))


def test_values_match_numpy():
    log_r = REF_LOG_PROB - LOG_PROB
    expected = {"k1": -log_r, "k2": 0.5 * log_r**2, "k3": np.exp(log_r) - 1 - log_r}
    got = all_estimates(LOG_PROB, REF_LOG_PROB)
    for name in KL_ESTIMATORS:
        np.testing.assert_allclose(got[name], expected[name], rtol=1e-5, atol=1e-6, err_msg=name)


def test_gradients_match_analytic_derivatives():
    log_r = REF_LOG_PROB - LOG_PROB
    # d/d log_prob of -log_r, log_r^2 / 2, exp(log_r) - 1 - log_r, with d log_r / d log_prob = -1.
    expected = {"k1": np.ones_like(log_r), "k2": -log_r, "k3": 1.0 - np.exp(log_r)}
    got = all_gradients(LOG_PROB, REF_LOG_PROB)
    for name in KL_ESTIMATORS:
        np.testing.assert_allclose(got[name], expected[name], rtol=1e-5, atol=1e-6, err_msg=name)


def test_k1_and_k3_are_unbiased_k2_is_second_order():
    # Exact expectations under pi: evaluate each estimator on every token, weight by pi.
    values = all_estimates(np.log(PI).astype(np.float32), np.log(PI_REF).astype(np.float32))
    expectation = {name: float(np.sum(PI * np.asarray(values[name]))) for name in KL_ESTIMATORS}
    assert expectation["k1"] == pytest.approx(EXACT_KL, abs=1e-6)
    assert expectation["k3"] == pytest.approx(EXACT_KL, abs=1e-6)
    log_r = np.log(PI_REF / PI)
    assert expectation["k2"] == pytest.approx(0.5 * np.sum(PI * log_r**2), abs=1e-6)
    # KL = E[exp(log_r) - 1 - log_r] = sum_{n >= 2} E[log_r^n] / n!: k2 is the n = 2 term, its bias the rest.
    higher_orders = sum(np.sum(PI * log_r**n) / math.factorial(n) for n in range(3, 30))
    assert abs(expectation["k2"] - EXACT_KL) > 0.01
    assert expectation["k2"] + higher_orders == pytest.approx(EXACT_KL, abs=1e-6)

    # Monte Carlo with a fixed seed: sample means within 4 standard errors of the exact KL.
    tokens = np.random.default_rng(1).choice(len(PI), size=20_000, p=PI)
    samples = all_estimates(np.log(PI[tokens]).astype(np.float32), np.log(PI_REF[tokens]).astype(np.float32))
    for name in ("k1", "k3"):
        x = np.asarray(samples[name], np.float64)
        assert abs(x.mean() - EXACT_KL) < 4 * x.std() / np.sqrt(x.size), name
    assert np.asarray(samples["k3"]).std() < np.asarray(samples["k1"]).std()


def test_each_estimators_error_on_the_same_tokens_matches_its_exact_bias_and_spread():
    # Tokens drawn from PI in a [B, T] batch, a quarter of it padding (exact KL NaN there: it must not leak in).
    # Per token the error of an estimator k is k(a) - KL, so its exact mean is sum_a PI(a) k(a) - KL and its exact
    # root-mean-square sqrt(sum_a PI(a) (k(a) - KL)^2), written out here from Schulman's formulas.
    log_r = np.log(PI_REF / PI)
    values = {"k1": -log_r, "k2": 0.5 * log_r**2, "k3": np.exp(log_r) - 1 - log_r}
    tokens = np.random.default_rng(2).choice(len(PI), size=(100, 200), p=PI)
    mask = np.broadcast_to(np.arange(200) < 150, (100, 200))
    exact = np.where(mask, EXACT_KL, np.nan).astype(np.float32)
    out = jax.device_get(
        jax.jit(estimator_errors)(np.log(PI[tokens]).astype(np.float32), np.log(PI_REF[tokens]).astype(np.float32),
                                  exact, mask)
    )  # fmt: skip
    assert sorted(out) == sorted(f"kl_{n}_{e}" for n in ("k1", "k2", "k3") for e in ("bias", "rmse"))
    n = mask.sum()
    for name, k in values.items():
        error = k - EXACT_KL
        rmse = np.sqrt(np.sum(PI * error**2))
        bias = np.sum(PI * error)
        assert abs(out[f"kl_{name}_bias"] - bias) < 4 * rmse / np.sqrt(n), name  # 15,000 draws: 4 standard errors
        assert out[f"kl_{name}_rmse"] == pytest.approx(rmse, rel=0.03), name
    assert abs(out["kl_k2_bias"]) > 0.01 and out["kl_k3_rmse"] < out["kl_k1_rmse"]  # here: k2 biased, k3 tighter


def test_k3_is_nonnegative():
    log_prob = RNG.normal(0.0, 5.0, size=(3, 4)).astype(np.float32)
    assert (np.asarray(all_estimates(log_prob, REF_LOG_PROB)["k3"]) >= 0).all()


def test_unknown_estimator_raises():
    with pytest.raises(ValueError, match="k4"):
        kl_estimate(LOG_PROB, REF_LOG_PROB, "k4")
