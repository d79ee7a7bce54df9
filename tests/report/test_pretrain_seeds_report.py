"""Reports on runs of several pretrained (SFT) models: per-run tables gain ``pretrain_seed``, the per-env cells use
the hierarchical bootstrap and say so; with one pretraining seed the report is as before."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ppo_jax.report import make_report
from tests.report.test_build import write_lm_sweep

PER_RUN = ("final_returns.csv", "curves.csv", "final_metrics_runs.csv", "entropy_fit_runs.csv")


def test_runs_of_two_sft_models_get_hierarchical_intervals(tmp_path):
    write_lm_sweep(tmp_path / "lm", {"clip_eps_high": [0.2, 0.28]}, task="lm")
    path = tmp_path / "lm" / "metrics.parquet"
    table = pd.read_parquet(path)
    table = table.assign(sample_entropy=np.linspace(1.0, 0.1, len(table)), non_finite=0.0)
    models = []
    for p in (0, 1):  # model 1 scores higher: the spread between models
        model = table.assign(reward=table["reward"] + 0.5 * p, accuracy=table["accuracy"] + 0.05 * p)
        model.insert(model.columns.get_loc("seed"), "pretrain_seed", p)
        models.append(model)
    pd.concat(models, ignore_index=True).to_parquet(path)

    out = make_report([tmp_path / "lm"], tmp_path / "report", reps=200, min_seeds=2)
    for name in PER_RUN:
        per_run = pd.read_csv(out / name)
        assert list(per_run.columns[2:4]) == ["pretrain_seed", "seed"], name
        assert sorted(per_run["pretrain_seed"].unique()) == [0, 1]
    finals = pd.read_csv(out / "final_metrics_runs.csv")
    assert len(finals) == 8  # 2 settings x 2 SFT models x 2 seeds
    summary = pd.read_csv(out / "final_metrics.csv")
    assert (summary["runs"] == 4).all() and (summary["accuracy_high"] > summary["accuracy_low"]).all()
    index = (out / "index.md").read_text()
    assert "hierarchical bootstrap over 2 SFT models x 2 RL seeds" in index
    assert "95\\% CI, hierarchical bootstrap over 2 SFT models x 2 RL seeds" in (out / "final_return.tex").read_text()


def test_one_pretraining_seed_column_changes_nothing(tmp_path):
    write_lm_sweep(tmp_path / "old", {"clip_eps_high": [0.2, 0.28]}, task="lm")
    write_lm_sweep(tmp_path / "new", {"clip_eps_high": [0.2, 0.28]}, task="lm")
    table = pd.read_parquet(tmp_path / "new" / "metrics.parquet")
    table.insert(table.columns.get_loc("seed"), "pretrain_seed", 0)
    table.to_parquet(tmp_path / "new" / "metrics.parquet")
    old = make_report([tmp_path / "old"], tmp_path / "report_old", reps=200)
    new = make_report([tmp_path / "new"], tmp_path / "report_new", reps=200)
    for name in sorted(p.name for p in old.iterdir() if p.suffix in (".csv", ".md") and p.name != "index.md"):
        assert (old / name).read_text() == (new / name).read_text(), name  # index.md: provenance, times
