"""Temperature, top-k and top-p sampling against a NumPy reference, a hand case and empirical frequencies."""

import itertools

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import special, stats

from ppo_jax.lm import sampling
from ppo_jax.lm.sampling import SamplingParams, sampling_params

# Under jit, with few shapes: few compilations (eager op-by-op dispatch would take most of the time).
sample = jax.jit(sampling.sample)
sampling_log_probs = jax.jit(sampling.sampling_log_probs)
token_log_prob = jax.jit(sampling.token_log_prob)
V = 11
TEMPERATURES = [0.0, 0.5, 1.0, 2.0]
TOP_KS = [0, 1, 3, V, V + 4]
TOP_PS = [1e-6, 0.3, 0.9, 1.0]
GRID = list(itertools.product(TEMPERATURES, TOP_KS, TOP_PS))
B = 1024  # rows of the sampling tests: one shape, one compilation of ``sample`` per dtype


def reference_log_probs(logits, temperature, top_k, top_p):
    """Temperature, top-k, top-p (transformers' warpers, min_tokens_to_keep=1) in float64, with plain loops."""
    logits = np.asarray(logits, np.float64)
    vocab = len(logits)
    if temperature == 0:
        best = int(np.argmax(logits))
        return np.array([0.0 if i == best else -np.inf for i in range(vocab)])
    scores = logits / temperature
    if top_k > 0:
        kth_largest = np.sort(scores)[::-1][min(top_k, vocab) - 1]
        scores = np.array([s if s >= kth_largest else -np.inf for s in scores])
    if top_p < 1:
        probs = np.exp(scores - scores.max())
        probs /= probs.sum()
        order = np.argsort(scores, kind="stable")  # ascending; equal tokens: the lower index first
        cumulative, removed = 0.0, np.zeros(vocab, bool)
        for position, i in enumerate(order):
            cumulative += probs[i]
            removed[i] = cumulative <= 1 - top_p and position < vocab - 1
        scores = np.where(removed, -np.inf, scores)
    kept = np.isfinite(scores)
    log_norm = np.log(np.sum(np.exp(scores[kept] - scores[kept].max()))) + scores[kept].max()
    return np.where(kept, scores - log_norm, -np.inf)


def assert_same_distribution(got, expected):
    got = np.asarray(got)
    np.testing.assert_array_equal(np.isfinite(got), np.isfinite(expected))
    np.testing.assert_allclose(got[np.isfinite(got)], expected[np.isfinite(expected)], rtol=1e-6, atol=2e-5)


def stacked(grid) -> SamplingParams:
    """One ``SamplingParams`` of ``[len(grid)]`` arrays."""
    return sampling_params(*map(np.array, zip(*grid, strict=True)))


def test_matches_numpy_reference_over_a_grid_with_ties_and_peaked_logits():
    rng = np.random.default_rng(0)
    logits = np.stack(
        [
            rng.normal(size=V) * 2,
            rng.normal(size=V) * 0.3,  # nearly uniform
            np.round(rng.normal(size=V)),  # ties
            np.array([3.0] * 3 + [1.0] * (V - 3)),  # tied maxima: top-k keeps all three
            np.zeros(V),  # all tied
            rng.normal(size=V) * 30,  # very peaked
            np.r_[50.0, np.zeros(V - 1)],  # one token takes all the mass
        ]
    ).astype(np.float32)
    params = stacked(GRID)
    assert (params.temperature.dtype, params.top_k.dtype, params.top_p.dtype) == (jnp.float32, jnp.int32, jnp.float32)
    got = np.asarray(jax.jit(jax.vmap(sampling.sampling_log_probs, in_axes=(None, 0)))(logits, params))
    assert got.shape == (len(GRID), len(logits), V) and got.dtype == np.float32
    for g, (temperature, top_k, top_p) in enumerate(GRID):
        for row, x in enumerate(logits):
            assert_same_distribution(got[g, row], reference_log_probs(x, temperature, top_k, top_p))


def test_hand_worked_case():
    # Probabilities 0.5, 0.25, 0.15, 0.1; ascending cumulative sums 0.1, 0.25, 0.5, 1.
    logits = np.log(np.array([0.5, 0.25, 0.15, 0.1], np.float32))
    cases = [
        # (temperature, top_k, top_p), probabilities added up by hand
        ((1.0, 0, 1.0), [0.5, 0.25, 0.15, 0.1]),
        ((1.0, 3, 1.0), [0.5 / 0.9, 0.25 / 0.9, 0.15 / 0.9, 0]),
        ((1.0, 0, 0.8), [0.5 / 0.9, 0.25 / 0.9, 0.15 / 0.9, 0]),  # removes cumulative <= 0.2: the 0.1
        ((1.0, 0, 0.7), [2 / 3, 1 / 3, 0, 0]),  # removes cumulative <= 0.3: 0.1, 0.15
        ((1.0, 0, 0.4), [1, 0, 0, 0]),  # 0.5 alone reaches 0.4
        # Top-p acts on the top-k distribution (2/3, 1/3): cumulative 1/3 <= 0.4 removes the second token,
        # which top-p at 0.6 on the raw probabilities would keep.
        ((1.0, 2, 0.6), [1, 0, 0, 0]),
        ((0.5, 2, 1.0), [0.8, 0.2, 0, 0]),  # squared: 0.25, 0.0625 of 0.3125
        ((0.0, 0, 1.0), [1, 0, 0, 0]),  # greedy
    ]
    for (temperature, top_k, top_p), probs in cases:
        got = np.exp(sampling_log_probs(logits, sampling_params(temperature, top_k, top_p)))
        np.testing.assert_allclose(got, probs, atol=1e-6, err_msg=str((temperature, top_k, top_p)))


def test_frequencies_match_the_truncated_distribution():
    logits = np.array([2.0, 1.5, 1.2, 1.0, 0.4, 0.3, -0.5, -1.0, -1.2, -2.0, -3.0], np.float32)
    temperature, top_k, top_p = 0.7, 6, 0.9
    expected = np.exp(reference_log_probs(logits, temperature, top_k, top_p))
    kept = expected > 0
    assert 2 <= kept.sum() < 6  # both truncations bite
    params = sampling_params(temperature, top_k, top_p)
    keys = jax.random.split(jax.random.key(0), 49)
    tokens = [sample(keys[i], np.broadcast_to(logits, (B, V)), params)[0] for i in range(len(keys))]
    counts = np.bincount(np.concatenate(tokens), minlength=V)
    n = counts.sum()  # 50,176 draws
    assert counts[~kept].sum() == 0
    chi2 = np.sum((counts[kept] - n * expected[kept]) ** 2 / (n * expected[kept]))
    assert chi2 < stats.chi2.ppf(0.999, kept.sum() - 1)


def test_sample_log_prob_is_the_sampling_distributions_not_the_raw_softmax():
    rng = np.random.default_rng(1)
    logits = rng.normal(size=(B, V)).astype(np.float32) * 2
    params = sampling_params(0.7, 5, 0.8)
    token, log_prob = sample(jax.random.key(1), logits, params)
    assert token.dtype == jnp.int32 and log_prob.dtype == jnp.float32 and token.shape == log_prob.shape == (B,)
    np.testing.assert_allclose(log_prob, token_log_prob(logits, token, params), atol=1e-6)
    expected = [reference_log_probs(x, 0.7, 5, 0.8)[t] for x, t in zip(logits, np.asarray(token), strict=True)]
    np.testing.assert_allclose(log_prob, expected, atol=2e-5)
    raw = np.take_along_axis(special.log_softmax(logits, -1), np.asarray(token)[:, None], -1)[:, 0]
    assert np.mean(np.abs(log_prob - raw)) > 0.1  # the bias a raw-softmax ratio would carry (about 0.3 nats)
    token, log_prob = sample(jax.random.key(1), logits, sampling_params())
    raw = np.take_along_axis(special.log_softmax(logits, -1), np.asarray(token)[:, None], -1)[:, 0]
    np.testing.assert_allclose(log_prob, raw, atol=1e-6)  # no truncation, temperature 1: the raw softmax


def kept_with_token(logits, token, temperature, top_k, top_p):
    """The probabilities ``[V]`` of the sampling distribution renormalised over its kept set and ``token``."""
    kept = np.isfinite(reference_log_probs(logits, temperature, top_k, top_p))
    kept[token] = True
    scores = np.where(kept, np.asarray(logits, np.float64) / temperature, -np.inf)
    return np.exp(scores - special.logsumexp(scores))


def test_token_log_prob_of_a_dropped_token_is_renormalised_over_the_kept_set_and_the_token():
    rng = np.random.default_rng(6)
    logits = rng.normal(size=(B, V)).astype(np.float32) * 2
    token = rng.integers(0, V, size=B)
    got = np.asarray(token_log_prob(logits, token, sampling_params(0.7, 5, 0.8)))
    dropped = [~np.isfinite(reference_log_probs(x, 0.7, 5, 0.8)[t]) for x, t in zip(logits, token, strict=True)]
    assert 100 < sum(dropped) < B - 100  # both kinds of token are common
    expected = [np.log(kept_with_token(x, t, 0.7, 5, 0.8)[t]) for x, t in zip(logits, token, strict=True)]
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, expected, atol=2e-5)


def test_token_log_prob_gradient_is_the_kept_softmax_gradient_over_the_temperature():
    rng = np.random.default_rng(5)
    logits = rng.normal(size=(B, V)).astype(np.float32) * 2
    token = rng.integers(0, V, size=B)
    temperature, top_k, top_p = 0.7, 5, 0.8
    grad = jax.jit(jax.grad(lambda x, t, p: sampling.token_log_prob(x, t, p)[:32].sum()))(
        logits, token, sampling_params(temperature, top_k, top_p)
    )
    for row in range(32):
        probs = kept_with_token(logits[row], token[row], temperature, top_k, top_p)
        # d log p(t) / d logit_j = (1[j = t] - p_j) / T on the kept set and t (constant near these logits), else 0
        expected = (np.eye(V)[token[row]] - probs) / temperature * (probs > 0)
        np.testing.assert_allclose(grad[row], expected, atol=1e-5)
    np.testing.assert_array_equal(grad[32:], 0)


def test_entropy_is_the_sampling_distributions_with_finite_gradient():
    rng = np.random.default_rng(7)
    logits = rng.normal(size=(64, V)).astype(np.float32) * 2
    for temperature, top_k, top_p in [(0.7, 5, 0.8), (1.0, 0, 1.0), (1.5, 3, 1.0), (0.5, 0, 0.6)]:
        params = sampling_params(temperature, top_k, top_p)
        got = jax.jit(sampling.entropy)(logits, params)
        probs = np.exp([reference_log_probs(x, temperature, top_k, top_p) for x in logits])
        expected = -np.sum(np.where(probs > 0, probs * np.log(np.where(probs > 0, probs, 1.0)), 0.0), -1)
        np.testing.assert_allclose(got, expected, atol=2e-5)
        grad = jax.jit(jax.grad(lambda x, p: sampling.entropy(x, p).sum()))(logits, params)
        assert np.isfinite(grad).all()
    np.testing.assert_array_equal(jax.jit(sampling.entropy)(logits, sampling_params(0.0)), 0.0)


def test_greedy_takes_the_argmax_with_log_prob_zero_whatever_the_key():
    logits = np.round(np.random.default_rng(4).normal(size=(B, V))).astype(np.float32)
    assert np.any(np.sum(logits == logits.max(-1, keepdims=True), -1) > 1)  # tied maxima: the first index wins
    for seed in range(3):
        token, log_prob = sample(jax.random.key(seed), logits, sampling_params(0.0, 2, 0.5))
        np.testing.assert_array_equal(token, np.argmax(logits, -1))
        np.testing.assert_array_equal(log_prob, np.zeros(B))


def test_jit_vmap_over_params_matches_separate_calls_with_one_trace():
    rng = np.random.default_rng(2)
    grid = GRID[::6]  # 14 settings, greedy included
    logits = rng.normal(size=(len(grid), B, V)).astype(np.float32)
    keys = jax.random.split(jax.random.key(2), len(grid))

    @jax.jit
    @chex.assert_max_traces(n=1)
    def batched(keys, logits, params):
        return jax.vmap(sampling.sample)(keys, logits, params)

    token, log_prob = map(np.asarray, batched(keys, logits, stacked(grid)))
    batched(keys[::-1], logits[::-1], stacked(grid[::-1]))  # other values, same shapes: no retrace
    for i, (temperature, top_k, top_p) in enumerate(grid):
        params = sampling_params(temperature, top_k, top_p)
        token_i, log_prob_i = sample(keys[i], logits[i], params)
        np.testing.assert_array_equal(token[i], token_i)
        np.testing.assert_allclose(log_prob[i], log_prob_i, atol=1e-6)


@pytest.mark.parametrize("temperature, top_k, top_p", [(1.0, 0, 1.0), (0.7, 4, 0.9), (0.0, 0, 1.0)])
def test_bfloat16_logits_sample_from_the_float32_distribution_of_their_values(temperature, top_k, top_p):
    logits = (np.random.default_rng(3).normal(size=(B, V)) * 3).astype(jnp.bfloat16)
    token, log_prob = sample(jax.random.key(3), logits, sampling_params(temperature, top_k, top_p))
    assert token.dtype == jnp.int32 and log_prob.dtype == jnp.float32
    expected = [
        reference_log_probs(x, temperature, top_k, top_p)[t]
        for x, t in zip(logits.astype(np.float32), np.asarray(token), strict=True)
    ]
    np.testing.assert_allclose(log_prob, expected, atol=2e-5)  # finite: every token drawn from the kept set
