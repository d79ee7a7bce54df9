"""The hierarchical (two-level) bootstrap of ``ppo_jax.final_values``: against a plain NumPy loop written here, and
wider than the flat bootstrap by the factor its variance predicts when the pretrained models differ most."""

from __future__ import annotations

import numpy as np
import pytest

from ppo_jax.final_values import hierarchical_bootstrap, hierarchical_ci, seed_ci
from ppo_jax.report.intervals import iqm_rows, trimmed_mean


def loop_reference(values, groups, statistic, reps, seed, confidence=0.95):
    """The two-level bootstrap one replicate at a time, from the draws ``hierarchical_bootstrap`` documents."""
    labels = sorted(set(groups))
    members = [[v for v, g in zip(values, groups, strict=True) if g == label] for label in labels]
    longest = max(len(m) for m in members)
    rng = np.random.default_rng(seed)
    drawn = rng.integers(0, len(labels), (reps, len(labels)))
    uniform = rng.random((reps, len(labels), longest))
    replicates = []
    for b in range(reps):
        sample = []
        for slot, group in enumerate(drawn[b]):
            runs = members[group]
            for j in range(len(runs)):
                sample.append(runs[int(uniform[b, slot, j] * len(runs))])
        replicates.append(statistic(np.array(sample)))
    return tuple(np.quantile(replicates, [(1 - confidence) / 2, (1 + confidence) / 2]))


@pytest.mark.parametrize("sizes", [(4, 4, 4), (3, 5, 2, 4)])  # balanced, and models with runs left out
def test_equals_a_plain_loop_for_the_mean_and_the_iqm(sizes):
    rng = np.random.default_rng(7)
    groups = np.repeat([10, 3, 7, 5][: len(sizes)], sizes)  # labels in no order: drawn in sorted order
    values = rng.normal(size=len(groups)) + groups
    for statistic, rows in ((np.mean, None), (trimmed_mean, iqm_rows)):
        ours = hierarchical_bootstrap(values, groups, rows, n_resamples=500, seed=3)
        theirs = loop_reference(list(values), list(groups), statistic, 500, 3)
        np.testing.assert_allclose(ours, theirs, rtol=1e-12)


def test_reproducible_and_counts_what_it_leaves_out():
    values, groups = [1.0, 2.0, np.nan, 4.0, 3.0, 5.0], [0, 0, 0, 1, 1, 1]
    first, again = hierarchical_ci(values, groups), hierarchical_ci(values, groups)
    assert first == again and first.count == 5 and first.dropped == 1 and first.mean == pytest.approx(3.0)
    assert first.low < first.mean < first.high
    assert hierarchical_ci([2.0, 2.0, 2.0], [0, 1, 1])[:3] == (2.0, 2.0, 2.0)  # no spread: zero width


def test_wider_than_the_flat_interval_by_the_expected_factor_when_models_differ():
    """Values = model effect (sd 1) + seed noise (sd 0.1), 8 models x 4 seeds. For the mean of a balanced design
    the two-level bootstrap's variance is (B + W / R) / G, the flat one's (B + W) / (G R), with B the plug-in
    variance of the model means, W the mean plug-in variance within a model, R seeds, G models: their widths
    differ by sqrt((R B + W) / (B + W)), about sqrt(R) = 2 when B dominates."""
    rng = np.random.default_rng(0)
    models, seeds = 8, 4
    table = rng.normal(0.0, 1.0, (models, 1)) + rng.normal(0.0, 0.1, (models, seeds))
    values, groups = table.ravel(), np.repeat(np.arange(models), seeds)
    nested = hierarchical_ci(values, groups, n_resamples=40_000)
    flat = seed_ci(values, n_resamples=40_000)
    between = table.mean(axis=1).var()
    within = table.var(axis=1).mean()
    expected = np.sqrt((seeds * between + within) / (between + within))
    ratio = (nested.high - nested.low) / (flat.high - flat.low)
    assert 1.8 < expected < 2.0
    assert ratio == pytest.approx(expected, rel=0.1)
