"""Summary statistics of training runs: a metric's final value and a bootstrap CI over seeds.

Definitions used everywhere in ppo_jax (CLI output, run directories, sweep tables, reports):

* **final value** of a per-update metric = its mean over the last
  ``Task.final_fraction`` of updates (``final_value``; at least one update):
  5% for PPO on an environment, 10% for RLHF. For PPO's score, the per-update
  episodic return (the mean over envs of each env's most recently completed
  episode, NaN until one has ended), it is the *final return*. Updates with NaN
  are skipped; a run whose window is all NaN has a NaN final value.
* **CI over seeds** = 95% percentile-bootstrap confidence interval of the mean of
  the per-seed values (``bootstrap_ci``; scipy.stats.bootstrap, 10,000
  resamples, fixed resampling seed so the interval is reproducible).
* **CI over SFT models x seeds** (runs of several pretraining seeds, ``pretrain:
  {seeds: [...]}``) = 95% percentile interval of a two-level bootstrap of the mean
  (``hierarchical_ci``): pretrained models resampled with replacement, then the RL
  seeds within each drawn model, so that it counts the variance between pretrained
  models as well as between RL seeds.
* **non_finite** (``NON_FINITE``), a per-update metric of every task
  (``ppo_jax.scan_updates``): 1.0 when after that update the loss or any
  floating-point leaf of the training state is NaN or infinite, else 0.0 (in a
  sweep table logged every k updates: how many of the window's updates were).
* A run **diverged** at its first update with ``non_finite`` > 0
  (``first_divergence``). Its final value is NaN and is shown as "diverged",
  whatever its window holds (a policy with non-finite parameters can still
  collect finite returns, e.g. always the same discrete action): a diverged run
  has no final value. Means over seeds are over the runs that have one, and say
  how many did not (``seed_ci``: ``dropped``; the CLI and sweep summary give the
  number of diverged seeds beside it): a diverged run is never left out silently.
  A table written before ``non_finite`` existed has no such column; there a run
  diverged at its first update with a non-finite ``loss``, the only sign it
  recorded (``divergence_flags``).
"""

from __future__ import annotations

import math
import warnings
from typing import NamedTuple

import numpy as np

NON_FINITE = "non_finite"
"""The per-update divergence flag every task records (``ppo_jax.scan_updates``)."""
NON_FINITE_LOSS, NON_FINITE_STATE = "non-finite loss", "non-finite parameters or state"
"""Why a run diverged at an update (``divergence_reason``)."""


def final_value(values: np.ndarray, fraction: float) -> np.ndarray:
    """A metric's final value: its mean over the last ``fraction`` of updates.

    Args:
      values: ``[..., num_updates]`` per-update metric (NaN where there is none,
        e.g. the episodic return before any episode has ended), e.g.
        ``metrics["episode_return"]`` of a vmapped run, ``[num_seeds, num_updates]``.
      fraction: share of the updates to average, in (0, 1]; the window is the
        last ``ceil(fraction * num_updates)`` updates, at least one.

    Returns:
      ``nanmean`` over that window along the last axis: shape ``[...]`` (a 0-d
      array for 1-D input). NaN where every update in the window is NaN.
    """
    values = np.asarray(values, dtype=np.float64)
    if values.ndim == 0 or values.shape[-1] == 0:
        raise ValueError(f"values need a last axis of updates with at least one entry, got shape {values.shape}")
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    window = final_window(values.shape[-1], fraction)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN window -> NaN, silently
        return np.nanmean(values[..., -window:], axis=-1)


def final_window(num_updates: int, fraction: float) -> int:
    """How many last updates define a final value: ``ceil(fraction * num_updates)``, at least one."""
    # round() guards against 0.05 * 60 = 3.0000000000000004 -> ceil 4.
    return max(1, math.ceil(round(fraction * num_updates, 9)))


class SeedCI(NamedTuple):
    """``seed_ci``: the mean over seeds, its bootstrap CI, and how many values it is over and left out."""

    mean: float
    low: float
    high: float
    count: int
    """Finite values the mean and CI are over."""
    dropped: int
    """Non-finite values left out: diverged runs (final value NaN), runs that never finished an episode."""


def bootstrap_ci(
    values, confidence: float = 0.95, n_resamples: int = 10_000, seed: int = 0
) -> tuple[float, float, float]:
    """Mean of ``values`` (e.g. one final value per seed) and its bootstrap CI: ``seed_ci`` without the counts.

    Non-finite values are dropped without saying so: aggregate runs with
    ``seed_ci``, whose ``dropped`` says how many were left out.

    Returns:
      ``(mean, low, high)`` as Python floats.
    """
    return tuple(seed_ci(values, confidence, n_resamples, seed)[:3])


def seed_ci(values, confidence: float = 0.95, n_resamples: int = 10_000, seed: int = 0) -> SeedCI:
    """Mean of ``values`` (e.g. one final value per seed), its bootstrap CI, and the count of values left out.

    Percentile bootstrap of the mean (``scipy.stats.bootstrap``, method
    ``"percentile"``). Non-finite values (diverged runs, runs that never
    finished an episode) are left out first and counted in ``dropped``. With
    fewer than two finite values there is no interval: ``low`` and ``high`` are
    NaN (``mean`` too when there is no finite value).
    """
    from scipy import stats

    array = np.asarray(values, dtype=np.float64).ravel()
    dropped = int(array.size - np.isfinite(array).sum())
    array = array[np.isfinite(array)]
    if array.size == 0:
        return SeedCI(math.nan, math.nan, math.nan, 0, dropped)
    mean = float(array.mean())
    if array.size < 2:
        return SeedCI(mean, math.nan, math.nan, 1, dropped)
    if np.all(array == array[0]):
        # Every resample has the same mean: a zero-width interval (scipy would warn).
        return SeedCI(mean, mean, mean, int(array.size), dropped)
    result = stats.bootstrap(
        (array,),
        np.mean,
        confidence_level=confidence,
        n_resamples=n_resamples,
        method="percentile",
        vectorized=True,
        rng=np.random.default_rng(seed),
    )
    low, high = float(result.confidence_interval.low), float(result.confidence_interval.high)
    return SeedCI(mean, low, high, int(array.size), dropped)


def hierarchical_bootstrap(
    values, groups, statistic=None, n_resamples: int = 10_000, seed: int = 0, confidence: float = 0.95
) -> tuple[float, float]:
    """Percentile interval of ``statistic`` over runs nested in groups (pretrained models): a two-level bootstrap.

    Each replicate draws G groups with replacement from the G distinct labels of ``groups``, then within each
    drawn group of n_g runs n_g of its runs with replacement; the statistic of every value drawn is one replicate
    (resampling at both stages: Davison & Hinkley 1997, "Bootstrap Methods and their Application", section 3.8).
    Draws, in this order, from ``np.random.default_rng(seed)``: the groups ``integers(0, G, (reps, G))`` (labels in
    sorted order), then ``random((reps, G, n_max))``, run ``floor(u * n_g)`` of the drawn group for ``j < n_g``.

    Args:
      values: float ``[n]`` (finite: drop the others first, as ``hierarchical_ci`` does).
      groups: ``[n]`` group labels (pretraining seeds).
      statistic: ``float[reps, m] -> [reps]`` over each replicate's row of drawn values, NaN-padded to ``m =
        G * n_max`` where groups differ in size; default the mean (``np.nanmean`` along the row).

    Returns:
      ``(low, high)``: the ``(1 - confidence) / 2`` and ``(1 + confidence) / 2`` quantiles of the replicates.
    """
    values = np.asarray(values, dtype=np.float64).ravel()
    labels, inverse = np.unique(np.asarray(groups).ravel(), return_inverse=True)
    counts = np.bincount(inverse, minlength=len(labels))
    order = np.argsort(inverse, kind="stable")  # runs group by group, in their order
    position = np.empty(values.size, np.int64)  # each run's place in its group
    position[order] = np.arange(values.size) - np.repeat(np.cumsum(counts) - counts, counts)
    padded = np.full((len(labels), counts.max()), np.nan)  # [G, n_max]
    padded[inverse, position] = values
    rng = np.random.default_rng(seed)
    drawn = rng.integers(0, len(labels), (n_resamples, len(labels)))
    size = counts[drawn][..., None]  # [reps, G, 1]
    runs = np.floor(rng.random((n_resamples, len(labels), counts.max())) * size).astype(np.int64)
    valid = np.arange(counts.max()) < size
    rows = np.where(valid, padded[drawn[..., None], np.where(valid, runs, 0)], np.nan).reshape(n_resamples, -1)
    replicates = np.nanmean(rows, axis=1) if statistic is None else statistic(rows)
    low, high = np.quantile(replicates, [(1 - confidence) / 2, (1 + confidence) / 2])
    return float(low), float(high)


def hierarchical_ci(values, groups, confidence: float = 0.95, n_resamples: int = 10_000, seed: int = 0) -> SeedCI:
    """``seed_ci`` for runs nested in pretrained models (``groups``: a label per value): the mean over runs and
    its ``hierarchical_bootstrap`` interval. Non-finite values are left out first and counted in ``dropped``."""
    array, labels = np.asarray(values, dtype=np.float64).ravel(), np.asarray(groups).ravel()
    finite = np.isfinite(array)
    dropped, array, labels = int(array.size - finite.sum()), array[finite], labels[finite]
    if array.size < 2 or np.all(array == array[0]):  # no interval, or a zero-width one: as seed_ci
        return seed_ci(array, confidence, n_resamples, seed)._replace(dropped=dropped)
    low, high = hierarchical_bootstrap(array, labels, None, n_resamples, seed, confidence)
    return SeedCI(float(array.mean()), low, high, int(array.size), dropped)


def first_divergence(non_finite) -> np.ndarray:
    """Index of the first update with ``non_finite`` > 0 along the last axis, -1 where there is none.

    Args:
      non_finite: ``[..., num_updates]`` (NaN, an update not recorded, counts as finite).

    Returns:
      int64 ``[...]`` (a 0-d array for 1-D input).
    """
    flags = np.nan_to_num(np.asarray(non_finite, dtype=np.float64), nan=0.0) > 0
    if flags.ndim == 0 or flags.shape[-1] == 0:
        raise ValueError(f"non_finite needs a last axis of updates with at least one entry, got shape {flags.shape}")
    return np.where(flags.any(axis=-1), flags.argmax(axis=-1), -1).astype(np.int64)


def divergence_flags(run) -> np.ndarray | None:
    """One run's per-update divergence flags from its table (a DataFrame or a dict of ``[num_updates]`` columns).

    Its ``non_finite`` column where it has one; a table written before that column
    existed (no such column, or, merged with newer tables, all NaN): where its
    ``loss`` is not finite; None where it has neither (nothing recorded).
    """
    columns = getattr(run, "columns", run)
    if NON_FINITE in columns:
        flags = np.asarray(run[NON_FINITE], dtype=np.float64)
        if not np.isnan(flags).all():
            return flags
    if "loss" in columns:
        return (~np.isfinite(np.asarray(run["loss"], dtype=np.float64))).astype(np.float64)
    return None


def divergence_reason(loss: float) -> str:
    """Why a run diverged at an update, from the loss there: "non-finite loss", else "non-finite parameters or state"."""
    return NON_FINITE_LOSS if not math.isfinite(float(loss)) else NON_FINITE_STATE
