"""Final values of a run (mean over its last updates) and the bootstrap CI over seeds, against cases worked by hand."""

import numpy as np
import pytest

from ppo_jax.final_values import bootstrap_ci, final_value


def test_bootstrap_ci_hand_worked_cases():
    assert bootstrap_ci([3.0, 3.0, 3.0, 3.0]) == (3.0, 3.0, 3.0)  # identical values: zero width

    mean, low, high = bootstrap_ci([1.0, 2.0, 3.0, 4.0])
    assert mean == 2.5 and 1.0 <= low <= 2.5 <= high <= 4.0
    # By hand: a resample's sum S of 4 draws from {1,2,3,4} has P(S <= 5) = 5/256 = 2.0% and
    # P(S <= 6) = 15/256 = 5.9%, so the 2.5% quantile of the resampled mean is 6/4 = 1.5;
    # by symmetry the 97.5% quantile is 3.5.
    assert (low, high) == (1.5, 3.5)
    assert bootstrap_ci([1.0, 2.0, 3.0, 4.0]) == (mean, low, high)  # fixed resampling seed

    m, lo, hi = bootstrap_ci([5.0, np.nan])  # one finite value: a mean, no interval
    assert m == 5.0 and np.isnan(lo) and np.isnan(hi)
    m, lo, hi = bootstrap_ci([])
    assert np.isnan(m) and np.isnan(lo) and np.isnan(hi)


def test_final_value_is_the_mean_over_the_last_fraction_of_updates():
    returns = np.arange(200, dtype=np.float64).reshape(2, 100)  # 100 updates -> last 5
    np.testing.assert_allclose(final_value(returns, 0.05), [97.0, 197.0])
    assert final_value(np.array([1.0, 2.0, 3.0]), 0.05) == 3.0  # at least one update
    assert final_value(np.arange(60.0), 0.05) == 58.0  # ceil(0.05 * 60) = 3 updates: 57, 58, 59
    assert final_value(np.array([0.0] * 19 + [4.0]), 0.05) == 4.0  # 20 updates -> the last one
    assert final_value(np.array([1.0, 2.0, np.nan, 6.0]), 0.5) == 6.0  # NaN skipped
    assert np.isnan(final_value(np.array([1.0, np.nan]), 0.05))
    assert final_value(np.arange(10.0), 1.0) == 4.5
    with pytest.raises(ValueError):
        final_value(np.arange(10.0), 0.0)


def test_first_divergence_seed_ci_and_the_flags_of_old_tables_by_hand():
    from ppo_jax.final_values import divergence_flags, first_divergence, seed_ci

    flags = np.array([[0, 0, 1, 1], [0, 0, 0, 0], [np.nan, 1, 0, 0]])  # NaN: not recorded, not a divergence
    np.testing.assert_array_equal(first_divergence(flags), [2, -1, 1])
    assert first_divergence(np.zeros(3)) == -1 and first_divergence([0.0, 2.0]) == 1  # a window's count
    # seed_ci says what bootstrap_ci leaves out silently: 2 of 5 values (a diverged run's NaN, an inf)
    ci = seed_ci([1.0, np.nan, 2.0, 3.0, np.inf])
    assert (ci.count, ci.dropped) == (3, 2) and ci.mean == 2.0 and tuple(ci[:3]) == bootstrap_ci([1.0, 2.0, 3.0])
    assert seed_ci([np.nan, np.nan])[3:] == (0, 2) and np.isnan(seed_ci([np.nan]).mean)
    # A table without non_finite (written before it existed): a non-finite loss; with neither column: nothing.
    loss = np.array([1.0, np.inf, np.nan])
    np.testing.assert_array_equal(divergence_flags({"loss": loss}), [0, 1, 1])
    np.testing.assert_array_equal(divergence_flags({"loss": loss, "non_finite": np.full(3, np.nan)}), [0, 1, 1])
    np.testing.assert_array_equal(divergence_flags({"loss": loss, "non_finite": np.zeros(3)}), [0, 0, 0])
    assert divergence_flags({"episode_return": loss}) is None
