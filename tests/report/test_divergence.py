"""``ppo-jax report`` on diverged runs (hand-made directories, no training): each cell counts them, a diverged run
has no final return, scores its env's random policy (0) where the reference is a random policy's and is left out
(and counted) where it is not (RLHF), and nothing is dropped silently; a directory written before ``non_finite``
existed reads divergence off a non-finite loss."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from ppo_jax.report import make_report
from ppo_jax.report.intervals import trimmed_mean
from tests.report.test_build import ENVS, FINALS, SEEDS, metrics_rows, normalized, write_lm_sweep, write_run

# CartPole, clip_eps 0.2, seed 1 (final return 500 in FINALS) diverges at update 12: non_finite from 12 on, while its
# return stays finite (a policy with NaN parameters can still collect returns): the report must not use it.
DIVERGED = ("CartPole-v1", 0.2, 1, 12)


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    from ppo_jax.sweep.spec import load_spec
    from ppo_jax.sweep.sweep_dir import spec_record

    path = tmp_path_factory.mktemp("inputs") / "sweep"
    spec = load_spec({"name": "diverging", "envs": list(ENVS), "seeds": len(SEEDS), "grid": {"clip_eps": [0.1, 0.2]}})
    path.mkdir()
    (path / "spec.json").write_text(json.dumps(spec_record(spec)))
    (path / "plan.json").write_text("{}")
    (path / "metadata.json").write_text(json.dumps({"sweep": {"name": "diverging"}}))
    frames = []
    for setting in spec.settings:
        eps = setting.values["clip_eps"]
        for seed, final in zip(SEEDS, FINALS[(setting.env, eps)], strict=True):
            rows = metrics_rows(final, seed).assign(env=setting.env, setting_id=setting.setting_id, clip_eps=eps)
            rows["loss"], rows["non_finite"] = 1.0, 0.0
            if (setting.env, eps, seed) == DIVERGED[:3]:
                rows.loc[rows["update"] >= DIVERGED[3], "non_finite"] = 1.0
            frames.append(rows)
    pd.concat(frames).to_parquet(path / "metrics.parquet")
    return make_report([path], tmp_path_factory.mktemp("report") / "out", reps=200)


def test_a_diverged_run_has_no_final_return_and_scores_as_the_random_policy(report):
    finals = pd.read_csv(report / "final_returns.csv")
    env, eps, seed, update = DIVERGED
    row = finals[(finals.env == env) & (finals.setting == f"clip_eps={eps:g}") & (finals.seed == seed)].iloc[0]
    assert bool(row.diverged) and row.diverged_at == update and np.isnan(row.final_return) and row.score == 0.0
    assert finals.diverged.sum() == 1 and finals.diverged_at.notna().sum() == 1

    per_env = pd.read_csv(report / "per_env.csv").set_index(["env", "setting"])
    cell = per_env.loc[(env, "clip_eps=0.2")]
    others = [v for s, v in zip(SEEDS, FINALS[(env, eps)], strict=True) if s != seed]  # 500, 260.84, 100
    assert (cell.runs, cell.diverged) == (4, 1)
    assert cell["mean"] == pytest.approx(np.mean(others)) and cell.iqm == pytest.approx(np.mean(others))  # 3: no trim
    scores = [normalized(env, v) for v in others] + [0.0]  # the diverged run: random = 0, never dropped
    assert cell.mean_score == pytest.approx(np.mean(scores)) and cell.iqm_score == pytest.approx(
        trimmed_mean(np.array(scores))
    )
    assert (per_env.drop(index=(env, "clip_eps=0.2")).diverged == 0).all()

    table = (report / "final_return.md").read_text()
    line = next(x for x in table.splitlines() if x.startswith("| clip_eps=0.2 "))
    assert line.split(" | ")[1].endswith("(1/4 diverged)") and "diverged" not in line.split(" | ")[2]


def test_aggregates_count_the_diverged_run_as_zero_and_say_so(report):
    agg = pd.read_csv(report / "aggregates.csv").set_index(["setting", "metric"])
    s = np.array([[normalized(e, FINALS[(e, 0.2)][i]) for e in ENVS] for i in range(len(SEEDS))])
    s[DIVERGED[2], 0] = 0.0  # CartPole, seed 1
    assert agg.loc[("clip_eps=0.2", "Mean"), "value"] == pytest.approx(s.mean(), rel=1e-9)
    assert agg.loc[("clip_eps=0.2", "Mean"), "diverged"] == 1 and agg.loc[("clip_eps=0.2", "Mean"), "runs"] == 8
    assert "(1/8 diverged)" in (report / "aggregates.md").read_text()

    record = json.loads((report / "report.json").read_text())
    assert record["divergence"]["runs"] == [
        {"env": "CartPole-v1", "setting": "clip_eps=0.2", "seed": 1, "update": 12}
    ] and record["divergence"]["recorded"] == [True]
    index = (report / "index.md").read_text()
    assert "**Diverged runs**" in index and "scores 0, its env's random-policy score" in index
    assert "1 run diverged: CartPole-v1, clip_eps=0.2, seed 1 at update 12." in index


def test_rlhf_runs_without_a_chance_reference_are_left_out_and_counted(tmp_path):
    finals = write_lm_sweep(tmp_path / "rlhf", {"beta": [0.0, 0.1]})
    table = pd.read_parquet(tmp_path / "rlhf" / "metrics.parquet")
    table["non_finite"] = ((table.setting_id == 0) & (table.seed == 1) & (table["update"] >= 15)).astype(float)
    table.to_parquet(tmp_path / "rlhf" / "metrics.parquet")
    out = make_report([tmp_path / "rlhf"], tmp_path / "report", reps=200)
    runs = pd.read_csv(out / "final_returns.csv")
    gone = runs[(runs.setting == "beta=0") & (runs.seed == 1)].iloc[0]
    assert gone.diverged and gone.diverged_at == 15 and np.isnan(gone.final_return) and np.isnan(gone.score)
    cell = pd.read_csv(out / "per_env.csv").set_index("setting").loc["beta=0"]
    true_score = finals[(0, 0)][2]  # seed 0's; the copy task's score bounds are not a random policy's
    assert (cell.runs, cell.diverged) == (2, 1) and cell.mean_score == pytest.approx(true_score)
    agg = pd.read_csv(out / "aggregates.csv").set_index(["setting", "metric"])
    assert agg.loc[("beta=0", "Mean"), "value"] == pytest.approx(true_score)
    frontier = pd.read_csv(out / "frontier.csv").set_index("beta")
    assert frontier.loc[0.0, "diverged"] == 1 and frontier.loc[0.0, "true_score"] == pytest.approx(true_score)
    assert "2 (1 diverged)" in (out / "frontier.md").read_text()


def test_a_directory_without_non_finite_reads_divergence_off_a_non_finite_loss(tmp_path):
    write_run(tmp_path / "old", "CartPole-v1", 0.1)  # as written before non_finite: no such column
    metrics = pd.read_csv(tmp_path / "old" / "metrics.csv")
    metrics["loss"] = np.where((metrics.seed == 2) & (metrics["update"] >= 7), np.nan, 1.0)
    metrics.to_csv(tmp_path / "old" / "metrics.csv", index=False)
    out = make_report([tmp_path / "old"], tmp_path / "report", reps=100)
    finals = pd.read_csv(out / "final_returns.csv").sort_values("seed")
    assert finals.diverged.tolist() == [False, False, True, False] and finals.diverged_at.iloc[2] == 7
    expected = FINALS[("CartPole-v1", 0.1)]
    np.testing.assert_allclose(finals.final_return.to_numpy()[[0, 1, 3]], np.array(expected)[[0, 1, 3]], rtol=1e-6)
    record = json.loads((out / "report.json").read_text())
    assert record["divergence"]["recorded"] == [False]
    assert "written before non_finite was recorded" in (out / "index.md").read_text()
