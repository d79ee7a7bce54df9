"""The unbiased pass@k (Chen et al. 2021, eq. 1) against its binomial form, computed with Python's math.comb."""

from math import comb

import numpy as np
import pytest

from ppo_jax.lm.pass_rates import pass_at_k


@pytest.mark.parametrize("n", [1, 2, 8, 16])
def test_pass_at_k_is_one_minus_the_chance_that_k_draws_without_replacement_all_fail(n):
    correct = (np.random.default_rng(n).random((64, n)) < np.linspace(0.0, 1.0, 64)[:, None]).astype(np.float32)
    for k in range(1, n + 1):
        expected = np.mean([1 - comb(n - int(c), k) / comb(n, k) for c in correct.sum(-1)])
        assert float(pass_at_k(correct, k)) == pytest.approx(expected, abs=1e-6), (n, k)
    assert float(pass_at_k(correct, 1)) == pytest.approx(correct.mean(), abs=1e-6)
    assert float(pass_at_k(correct, n)) == pytest.approx(correct.max(-1).mean(), abs=1e-6)
