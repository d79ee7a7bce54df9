"""The state of lm runs at matched accuracy, and their compute, against plain-Python loops on a synthetic sweep."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ppo_jax.errors import ReportError
from ppo_jax.lm.config import LmConfig
from ppo_jax.report import make_report
from tests.report.test_build import UPDATES, write_lm_sweep

RATES = {0: 0.06, 1: 0.1}  # accuracy gained per update, by setting


def trailing_mean(values, window=5):
    out = []
    for t in range(len(values)):
        chunk = values[max(0, t - window + 1) : t + 1]
        out.append(sum(chunk) / len(chunk))
    return out


def synthetic_sweep(path):
    write_lm_sweep(path, {"clip_eps_high": [0.2, 0.28]}, task="lm")
    table = pd.read_parquet(path / "metrics.parquet").reset_index(drop=True)
    table = table.assign(sample_entropy=np.nan, non_finite=0.0)
    for (setting, seed), rows in table.groupby(["setting_id", "seed"]):
        t = np.arange(UPDATES)
        table.loc[rows.index, "accuracy"] = np.minimum(1.0, (t + 1) * RATES[setting] + 0.01 * seed)
        table.loc[rows.index, "sample_entropy"] = 1.0 - 0.04 * t - 0.1 * setting
        table.loc[rows.index, "response_length"] = 4.0 + 0.5 * t + seed
    table.to_parquet(path / "metrics.parquet")
    return table


def test_state_updates_tokens_and_compute_at_the_threshold(tmp_path):
    table = synthetic_sweep(tmp_path / "lm")
    out = make_report([tmp_path / "lm"], tmp_path / "report", reps=200, matched_score=0.5)
    runs = pd.read_csv(out / "matched_accuracy_runs.csv")
    base = LmConfig()
    sequences, steps = base.num_prompts * base.group_size, base.update_epochs * base.num_minibatches
    assert len(runs) == 4
    labels = list(dict.fromkeys(runs["setting"]))  # in setting_id order
    for (setting, seed), rows in table.groupby(["setting_id", "seed"]):
        rows = rows.sort_values("update")
        accuracy, entropy = trailing_mean(list(rows["accuracy"])), trailing_mean(list(rows["sample_entropy"]))
        lengths = list(rows["response_length"])
        hit = next(i for i, a in enumerate(accuracy) if a >= 0.5)
        got = runs[(runs["seed"] == seed) & (runs["setting"] == labels[setting])]
        assert len(got) == 1 and bool(got["reached"].iloc[0])
        got = got.iloc[0]
        assert got["updates_to"] == hit + 1
        assert got["sample_entropy_at"] == pytest.approx(entropy[hit])
        assert got["tokens_to"] == pytest.approx(sum(lengths[: hit + 1]) / (hit + 1) * (hit + 1) * sequences)
        assert got["auc"] == pytest.approx(sum(rows["accuracy"]) / UPDATES)
        assert got["optimizer_steps"] == UPDATES * steps
        assert got["tokens"] == pytest.approx(sum(lengths) * sequences)
    text = (out / "matched_accuracy.md").read_text()
    assert "0.50, smoothed over 5 logged updates" in text
    assert "2/2" in text  # both runs of each setting reach it


def test_the_default_threshold_is_a_level_every_setting_reaches(tmp_path):
    synthetic_sweep(tmp_path / "lm")
    out = make_report([tmp_path / "lm"], tmp_path / "report", reps=200)
    table = pd.read_csv(out / "matched_accuracy.csv")
    # the slower setting's smoothed best: the mean of its last five accuracies, 20 updates at 0.06 (+0.01 seed 1)
    slower = min(sum(min(1.0, (t + 1) * 0.06 + 0.01 * seed) for t in range(15, 20)) / 5 for seed in (0, 1))
    assert table["threshold"].iloc[0] == pytest.approx(np.floor(slower / 0.05 + 1e-9) * 0.05)
    assert (table["reached"] == table["runs"]).all()


def test_a_threshold_that_is_not_a_number_is_refused(tmp_path):
    synthetic_sweep(tmp_path / "lm")
    with pytest.raises(ReportError, match="--matched-score must be a finite number"):
        make_report([tmp_path / "lm"], tmp_path / "report", reps=200, matched_score=float("nan"))


def test_the_plateau_rule_is_a_t_interval_on_the_final_slope(tmp_path):
    """One run keeps rising (noisy line) over its last 20% of updates, one wobbles flat, the rest saturate."""
    table = synthetic_sweep(tmp_path / "lm")
    rng = np.random.default_rng(3)
    tail = int(round(0.2 * UPDATES))
    rising = (table["setting_id"] == 0) & (table["seed"] == 0)
    flat = (table["setting_id"] == 1) & (table["seed"] == 1)
    table.loc[rising, "accuracy"] = 0.3 + 0.02 * np.arange(UPDATES) + rng.normal(0, 0.002, UPDATES)
    table.loc[flat, "accuracy"] = 0.6 + rng.normal(0, 0.05, UPDATES)
    table.to_parquet(tmp_path / "lm" / "metrics.parquet")
    out = make_report([tmp_path / "lm"], tmp_path / "report", reps=200, matched_score=0.5)
    runs = pd.read_csv(out / "matched_accuracy_runs.csv")
    labels = list(dict.fromkeys(runs["setting"]))
    for (setting, seed), rows in table.groupby(["setting_id", "seed"]):
        y = rows.sort_values("update")["accuracy"].to_numpy()[-tail:]
        x = np.arange(tail, dtype=float)
        slope = ((x - x.mean()) * (y - y.mean())).sum() / ((x - x.mean()) ** 2).sum()
        residual = y - (y.mean() + slope * (x - x.mean()))
        stderr = np.sqrt((residual**2).sum() / (tail - 2) / ((x - x.mean()) ** 2).sum())
        t975 = {2: 4.302652729911275}[tail - 2]
        got = runs[(runs["seed"] == seed) & (runs["setting"] == labels[setting])].iloc[0]
        assert got["final_slope"] == pytest.approx(slope, abs=1e-9)
        assert bool(got["still_rising"]) == (slope - t975 * stderr > 0)
    assert bool(runs[(runs["seed"] == 0) & (runs["setting"] == labels[0])]["still_rising"].iloc[0])
    assert runs["still_rising"].sum() == 1
    assert "| 1/2 |" in (out / "matched_accuracy.md").read_text()  # setting 0: one of its two runs still rising
