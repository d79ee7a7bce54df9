"""Interval estimates with rliable (Agarwal et al. 2021, "Deep RL at the Edge of the Statistical Precipice").

Every confidence interval here is rliable's stratified percentile bootstrap
(``rliable.library.get_interval_estimates``: runs resampled with replacement
within each environment), 95%, with ``reps`` replicates, NumPy's generators
seeded with ``seed`` afresh for each estimate, so a report is reproducible.

Score matrices follow rliable's layout: ``float[num_runs, num_envs(, num_points)]``.

With fewer than ``min_seeds`` runs per cell (``MIN_SEEDS``, 5, unless the report is told otherwise) no interval is
computed (``with_ci=False`` / NaN bounds): a bootstrap resample of n < 5 values can only recombine those n values,
so its "95% CI" is little more than their range; the tables print the per-seed values instead (``per_seed``).

Where a cell's runs start from more than one pretrained model (``pretrain_seed``, ``pretrain: {seeds: [...]}``),
its CI is a hierarchical bootstrap instead (``ppo_jax.final_values.hierarchical_bootstrap``: pretrained models
resampled with replacement, then the RL seeds within each drawn model; the IQM of each replicate's runs, same
``reps`` and ``seed``), so that it counts the variance between pretrained models; ``nested_label`` says so.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
from rliable import library as rly
from rliable import metrics

from ppo_jax.final_values import hierarchical_bootstrap
from ppo_jax.report.sources import PRETRAIN_SEED, ReportError

AGGREGATES = ("Median", "IQM", "Mean", "Optimality gap")
MIN_SEEDS = 5
"""The fewest runs per cell (per env x setting) a report gives a bootstrap CI for; below it, per-seed values."""
NO_CI_RULE = (
    "with fewer than {n} seeds per cell no bootstrap CI is given (a resample of so few values can only recombine "
    "them: its interval is little more than their range); the cell shows the IQM and every seed's value instead, "
    "and no cell of such a column is bold"
)


def per_seed_text(values: np.ndarray) -> str:
    """Per-seed values as ``v0;v1;...`` (7 significant digits, in seed order), the ``per_seed`` column."""
    return ";".join(f"{v:.7g}" for v in values)


def _state(seed: int) -> np.random.RandomState:
    return np.random.RandomState(seed)


def _interval_estimates(score_dict: dict, func, reps: int, seed: int):
    """``rliable.library.get_interval_estimates``, reproducible: rliable 1.2 draws its stratified resamples
    from NumPy's *global* generator (``np.random.choice``), whatever ``random_state`` says, so the global
    state is seeded here and restored afterwards."""
    saved = np.random.get_state()
    np.random.seed(seed)
    try:
        with warnings.catch_warnings():  # rliable 1.2 passes arch 7 the RandomState in a deprecated way
            warnings.filterwarnings("ignore", message="random_state is deprecated", category=FutureWarning)
            return rly.get_interval_estimates(score_dict, func, reps=reps, random_state=_state(seed))
    finally:
        np.random.set_state(saved)


def trimmed_mean(values: np.ndarray) -> np.ndarray:
    """25% trimmed mean along axis 0 — ``scipy.stats.trim_mean(values, 0.25, axis=0)``, which rliable's IQM is,
    without scipy's per-call overhead (it runs once per bootstrap replicate): drop ``int(0.25 n)`` values at each end."""
    n = values.shape[0]
    cut = int(0.25 * n)
    return np.sort(values, axis=0)[cut : n - cut].mean(axis=0)


def iqm_rows(rows: np.ndarray) -> np.ndarray:
    """``trimmed_mean`` of each row of ``rows[reps, m]`` over its finite entries (NaN pads rows of fewer runs):
    ``[reps]``, for ``hierarchical_bootstrap``."""
    ordered = np.sort(rows, axis=1)  # NaN last
    count = np.isfinite(rows).sum(axis=1)
    cut = (0.25 * count).astype(np.int64)
    sums = np.concatenate([np.zeros((len(rows), 1)), np.cumsum(np.nan_to_num(ordered), axis=1)], axis=1)
    take = lambda index: np.take_along_axis(sums, index[:, None], axis=1)[:, 0]  # noqa: E731
    return (take(count - cut) - take(cut)) / (count - 2 * cut)


def nested_label(finals: pd.DataFrame) -> str:
    """ ", hierarchical bootstrap over N SFT models x M RL seeds" where ``finals``' runs start from several
    pretrained models, else ""."""
    if PRETRAIN_SEED not in finals or finals[PRETRAIN_SEED].nunique() < 2:
        return ""
    return (
        f", hierarchical bootstrap over {finals[PRETRAIN_SEED].nunique()} SFT models x "
        f"{finals['seed'].nunique()} RL seeds"
    )


def probability_of_improvement(scores_x: np.ndarray, scores_y: np.ndarray) -> float:
    """P(X > Y) + P(X = Y) / 2 per env, averaged over envs: rliable's ``metrics.probability_of_improvement``
    (Mann-Whitney U / (n_x n_y)), computed by broadcasting, since it runs once per bootstrap replicate."""
    x, y = scores_x[:, None, :], scores_y[None, :, :]
    per_env = (x > y).mean(axis=(0, 1)) + 0.5 * (x == y).mean(axis=(0, 1))
    return float(per_env.mean())


def score_distribution(scores: np.ndarray, taus: np.ndarray) -> np.ndarray:
    """Fraction of runs (over all envs) with score > tau, per tau: rliable's ``library.score_distributions``, vectorized."""
    return (scores.reshape(-1, 1) > taus[None, :]).mean(axis=0)


def aggregate_all(scores: np.ndarray) -> np.ndarray:
    """[median, IQM, mean, optimality gap] of ``scores[num_runs, num_envs]`` (rliable's definitions)."""
    return np.array(
        [
            metrics.aggregate_median(scores),
            trimmed_mean(scores.reshape(-1)),
            metrics.aggregate_mean(scores),
            metrics.aggregate_optimality_gap(scores),
        ]
    )


def iqm_over_runs(scores: np.ndarray) -> np.ndarray:
    """IQM over runs (and envs) at each point: ``scores[runs, envs, points] -> [points]``, NaN-free points only."""
    return trimmed_mean(scores.reshape(-1, scores.shape[-1]))


def score_matrix(finals: pd.DataFrame, column: str, setting: str, envs: list[str]) -> np.ndarray:
    """``float[num_runs, len(envs)]`` of ``column`` for one setting; envs must have equal run counts."""
    columns = []
    for env in envs:
        values = finals.loc[(finals["setting"] == setting) & (finals["env"] == env), column].to_numpy(float)
        columns.append(values)
    counts = {len(c) for c in columns}
    if len(counts) != 1 or 0 in counts:
        found = {env: len(c) for env, c in zip(envs, columns, strict=True)}
        raise ReportError(
            f"setting {setting!r} needs the same number of runs (seeds) on every env to aggregate; found {found}."
        )
    return np.stack(columns, axis=1)


def per_env(finals: pd.DataFrame, column: str, reps: int, seed: int, min_seeds: int = MIN_SEEDS) -> pd.DataFrame:
    """IQM and mean over seeds of ``column`` per env x setting, with 95% CIs of the IQM where a cell has at least
    ``min_seeds`` values; below that ``low`` and ``high`` are NaN and ``per_seed`` lists the values (else "").

    ``runs`` counts every run of the cell and ``diverged`` those that diverged (``finals["diverged"]``); a
    diverged run without a value in ``column`` (NaN: a final return; a score without a chance reference) is
    left out of the statistics, which are over the others. Any other NaN makes the cell's statistics NaN.
    """
    rows = []
    for (env, setting), group in finals.groupby(["env", "setting"], sort=False):
        values = group[column].to_numpy(float)
        diverged = group["diverged"].to_numpy(bool) if "diverged" in group else np.zeros(len(values), bool)
        values = values[~(diverged & np.isnan(values))]
        finite = values[np.isfinite(values)]
        row = {
            "env": env,
            "setting": setting,
            "runs": len(group),
            "diverged": int(diverged.sum()),
            "mean": np.nan,
            "iqm": np.nan,
            "low": np.nan,
            "high": np.nan,
            "per_seed": "",
            "few_seeds": len(values) < min_seeds,
        }
        if len(finite) == len(values) and 0 < len(values) < min_seeds:
            row.update(mean=float(values.mean()), iqm=float(trimmed_mean(values)), per_seed=per_seed_text(values))
        elif len(finite) == len(values) and PRETRAIN_SEED in group and group[PRETRAIN_SEED].nunique() > 1:
            models = group[PRETRAIN_SEED].to_numpy()[~(diverged & np.isnan(group[column].to_numpy(float)))]
            low, high = hierarchical_bootstrap(values, models, iqm_rows, reps, seed)
            row.update(mean=float(values.mean()), iqm=float(trimmed_mean(values)), low=low, high=high)
        elif len(finite) == len(values) and len(values) > 0:
            point, interval = _interval_estimates(
                {"x": values[:, None]}, lambda s: trimmed_mean(s.reshape(-1))[None], reps, seed
            )
            row.update(
                mean=float(values.mean()),
                iqm=float(point["x"][0]),
                low=float(interval["x"][0, 0]),
                high=float(interval["x"][1, 0]),
            )
        rows.append(row)
    return pd.DataFrame(rows)


def _points(score_dict: dict, func, reps: int, seed: int):
    """``_interval_estimates``' (point, interval) without a bootstrap: the point estimates, NaN intervals."""
    point = {k: np.atleast_1d(func(*v) if isinstance(v, list) else func(v)) for k, v in score_dict.items()}
    return point, {k: np.full((2, *p.shape), np.nan) for k, p in point.items()}


def _estimator(with_ci: bool):
    return _interval_estimates if with_ci else _points


def aggregates(matrices: dict[str, np.ndarray], reps: int, seed: int, with_ci: bool = True) -> pd.DataFrame:
    """Median, IQM, mean and optimality gap of normalized scores per setting, each with a 95% CI (NaN bounds
    without ``with_ci``)."""
    rows = []
    for setting, scores in matrices.items():
        estimate = _estimator(with_ci)
        point, interval = estimate({setting: scores}, aggregate_all, reps, seed)
        for i, name in enumerate(AGGREGATES):
            rows.append(
                {
                    "setting": setting,
                    "metric": name,
                    "value": point[setting][i],
                    "low": interval[setting][0, i],
                    "high": interval[setting][1, i],
                }
            )
    return pd.DataFrame(rows)


def improvement(
    matrices: dict[str, np.ndarray], baseline: str, reps: int, seed: int, with_ci: bool = True
) -> pd.DataFrame:
    """P(setting > baseline) averaged over envs (Mann-Whitney U per env), with a 95% CI (NaN bounds without
    ``with_ci``), for every other setting."""
    rows = []
    for setting, scores in matrices.items():
        if setting == baseline:
            continue
        pair = {setting: [scores, matrices[baseline]]}
        estimate = _estimator(with_ci)
        point, interval = estimate(pair, probability_of_improvement, reps, seed)
        low, high = np.ravel(interval[setting])
        rows.append(
            {
                "setting": setting,
                "baseline": baseline,
                "probability": float(np.ravel(point[setting])[0]),
                "low": float(low),
                "high": float(high),
            }
        )
    return pd.DataFrame(rows)


def performance_profiles(
    matrices: dict[str, np.ndarray], taus: np.ndarray, reps: int, seed: int, with_ci: bool = True
) -> dict:
    """Fraction of runs with normalized score > tau, per setting: {setting: (profile[taus], ci[2, taus])} (NaN ci
    without ``with_ci``)."""
    out = {}
    estimate = _estimator(with_ci)
    for setting, scores in matrices.items():
        point, interval = estimate({setting: scores}, lambda s: score_distribution(s, taus), reps, seed)
        out[setting] = (point[setting], interval[setting])
    return out


def curve(values: np.ndarray, reps: int, seed: int, min_seeds: int = MIN_SEEDS) -> tuple[np.ndarray, np.ndarray]:
    """IQM over seeds at each point of ``values[num_seeds, num_points]`` and its 95% CI ``[2, num_points]`` (NaN
    with fewer than ``min_seeds`` seeds).

    Points where a seed has no value yet (no episode ended) are NaN in both.
    """
    finite = np.isfinite(values).all(axis=0)
    iqm = np.full(values.shape[1], np.nan)
    ci = np.full((2, values.shape[1]), np.nan)
    if finite.any():
        scores = values[:, None, finite]
        point, interval = _estimator(values.shape[0] >= min_seeds)({"x": scores}, iqm_over_runs, reps, seed)
        iqm[finite], ci[:, finite] = point["x"], interval["x"]
    return iqm, ci
