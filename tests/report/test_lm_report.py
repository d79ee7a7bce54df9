"""Reports on lm sweeps: Cui et al.'s law R = -a exp(H) + b fitted per run (against the normal equations worked out
by hand, and a synthetic sweep whose runs follow the law exactly with known a, b), the final values of the reported
metrics and the evaluation scores per setting, and every report's per-seed curves (curves.csv)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ppo_jax.report import make_report
from ppo_jax.report.entropy_fit import fit
from tests.report.test_build import UPDATES, write_lm_sweep


def test_fit_recovers_the_law_and_equals_the_normal_equations():
    h = np.linspace(1.2, 0.05, 30)
    a, b, r2 = fit(h, 0.95 - 0.3 * np.exp(h))
    np.testing.assert_allclose([a, b, r2], [0.3, 0.95, 1.0], rtol=1e-9)

    rng = np.random.default_rng(0)
    r = 0.9 - 0.25 * np.exp(h) + rng.normal(0.0, 0.02, h.size)
    r[3] = np.nan  # a point with no score is left out
    x, y = [], []
    for hi, ri in zip(h, r, strict=True):
        if not np.isnan(ri):
            x.append(np.exp(hi))
            y.append(ri)
    n, sx, sy = len(x), sum(x), sum(y)
    sxx, sxy = sum(v * v for v in x), sum(u * v for u, v in zip(x, y, strict=True))
    slope = (n * sxy - sx * sy) / (n * sxx - sx * sx)
    intercept = (sy - slope * sx) / n
    ss_res = sum((v - intercept - slope * u) ** 2 for u, v in zip(x, y, strict=True))
    ss_tot = sum((v - sy / n) ** 2 for v in y)
    np.testing.assert_allclose(fit(h, r), [-slope, intercept, 1 - ss_res / ss_tot], rtol=1e-9)


def test_fit_is_undefined_without_spread_or_points():
    assert np.isnan(fit(np.full(10, 0.3), np.linspace(0, 1, 10))).all()  # entropy never moved
    assert np.isnan(fit(np.array([0.1, 0.2]), np.array([0.5, 0.6]))).all()  # two points


def test_lm_report_fits_each_run_exports_its_curves_and_tables_its_evaluation(tmp_path):
    write_lm_sweep(tmp_path / "lm", {"clip_eps_high": [0.2, 0.28]}, task="lm")
    path = tmp_path / "lm" / "metrics.parquet"
    table = pd.read_parquet(path).reset_index(drop=True)
    table = table.assign(sample_entropy=np.nan, non_finite=0.0, eval_pass_at_1=np.nan, eval_pass_at_group=np.nan)
    last = table["update"] == UPDATES - 1  # a sweep's table holds a run's evaluation on its last row
    table.loc[last, "eval_pass_at_1"] = 0.5 + 0.1 * table.loc[last, "setting_id"] + 0.02 * table.loc[last, "seed"]
    table.loc[last, "eval_pass_at_group"] = 0.9
    law = {}  # (setting, seed) -> (a, b)
    for (setting, seed), rows in table.groupby(["setting_id", "seed"]):
        a, b = 0.2 + 0.1 * setting + 0.01 * seed, 0.9 + 0.02 * seed
        h = np.linspace(1.0 + 0.1 * seed, 0.1, UPDATES)
        table.loc[rows.index, "sample_entropy"] = h
        table.loc[rows.index, "accuracy"] = b - a * np.exp(h)
        law[(setting, seed)] = (a, b)
    table.loc[(table["setting_id"] == 1) & (table["seed"] == 1) & (table["update"] == 15), "non_finite"] = 1.0
    table.to_parquet(path)

    out = make_report([tmp_path / "lm"], tmp_path / "report", reps=200)
    runs = pd.read_csv(out / "entropy_fit_runs.csv")
    assert len(runs) == 4
    for row in runs.itertuples():
        setting = [0.2, 0.28].index(float(row.setting.split("clip_eps_high=")[1].split(",")[0].rstrip(")")))
        if (setting, row.seed) == (1, 1):
            assert row.diverged and np.isnan(row.a)  # a diverged run has no fit
            continue
        a, b = law[(setting, row.seed)]
        np.testing.assert_allclose([row.a, row.b, row.ceiling, row.r2], [a, b, b - a, 1.0], rtol=1e-6)
    summary = pd.read_csv(out / "entropy_fit.csv")
    assert list(summary["runs"]) == [2, 2] and list(summary["fitted"]) == [2, 1]
    np.testing.assert_allclose(summary["a"], [np.mean([0.2, 0.21]), 0.3], rtol=1e-6)  # IQM of 2 values = their mean
    assert "Entropy-performance law" in (out / "index.md").read_text()
    assert (out / "entropy_fit.png").exists() and (out / "curves_sample_entropy.png").exists()

    finals = pd.read_csv(out / "final_metrics_runs.csv")  # the last 10% of 20 updates: the last 2
    run = finals[(finals["seed"] == 1) & ~finals["diverged"]].iloc[0]  # seed 1's entropy is the same in both settings
    np.testing.assert_allclose(run["sample_entropy"], np.linspace(1.1, 0.1, UPDATES)[-2:].mean(), rtol=1e-6)
    summary = pd.read_csv(out / "final_metrics.csv")
    assert {"accuracy", "sample_entropy_low", "response_length_high", "kl_ref"} <= set(summary.columns)
    assert list(summary["diverged"]) == [0, 1]

    evaluation = pd.read_csv(out / "evaluation_scores.csv")  # IQM of 2 seeds = their mean
    np.testing.assert_allclose(evaluation["eval_pass_at_1"], [0.51, 0.61], rtol=1e-6)
    np.testing.assert_allclose(evaluation["eval_pass_at_group"], [0.9, 0.9], rtol=1e-6)
    assert "fresh prompts" in (out / "index.md").read_text()

    curves = pd.read_csv(out / "curves.csv")
    assert len(curves) == 4 * UPDATES  # fewer logged updates than MAX_CURVE_POINTS: all of them
    labels = list(dict.fromkeys(curves["setting"]))
    for column in ("accuracy", "sample_entropy", "response_length", "kl_ref"):
        for setting_id, label in enumerate(labels):
            ours = curves[curves["setting"] == label].sort_values(["seed", "update"])[column].to_numpy()
            theirs = table[table["setting_id"] == setting_id].sort_values(["seed", "update"])[column].to_numpy()
            np.testing.assert_allclose(ours, theirs, rtol=1e-6, err_msg=column)


def test_summary_of_runs_too_short_to_fit_is_all_nan():
    """Runs of 2 updates have no fit (3 points needed): the summary counts them and leaves every parameter NaN
    (it raised a KeyError from an empty statistics table before)."""
    from ppo_jax.report.entropy_fit import summary

    per_run = pd.DataFrame(
        {"env": "sort", "setting": "s", "seed": [0, 1], "diverged": False, "a": np.nan, "b": np.nan}
    ).assign(ceiling=np.nan, r2=np.nan, points=2)
    table = summary(per_run, reps=100, seed=0)
    assert table[["runs", "fitted"]].values.tolist() == [[2, 0]]
    assert table[["a", "b_low", "ceiling_high"]].isna().all().all()
