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
"""

from __future__ import annotations

import math
import warnings

import numpy as np


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


def bootstrap_ci(
    values, confidence: float = 0.95, n_resamples: int = 10_000, seed: int = 0
) -> tuple[float, float, float]:
    """Mean of ``values`` (e.g. one final value per seed) and its bootstrap CI.

    Percentile bootstrap of the mean (``scipy.stats.bootstrap``, method
    ``"percentile"``). Non-finite values (runs that never finished an episode)
    are dropped first. With fewer than two finite values there is no interval:
    returns ``(mean, nan, nan)`` (mean is NaN when there is no finite value).

    Returns:
      ``(mean, low, high)`` as Python floats.
    """
    from scipy import stats

    array = np.asarray(values, dtype=np.float64).ravel()
    array = array[np.isfinite(array)]
    if array.size == 0:
        return math.nan, math.nan, math.nan
    mean = float(array.mean())
    if array.size < 2:
        return mean, math.nan, math.nan
    if np.all(array == array[0]):
        # Every resample has the same mean: a zero-width interval (scipy would warn).
        return mean, mean, mean
    result = stats.bootstrap(
        (array,),
        np.mean,
        confidence_level=confidence,
        n_resamples=n_resamples,
        method="percentile",
        vectorized=True,
        rng=np.random.default_rng(seed),
    )
    return mean, float(result.confidence_interval.low), float(result.confidence_interval.high)
