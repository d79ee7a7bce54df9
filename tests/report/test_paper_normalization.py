"""``ppo-jax report --normalize best-setting``: the PPO paper's normalization (Schulman et al. 2017, sec. 6.1)
and its Table 1 beside ours, checked on a synthetic sweep against numbers worked out by hand."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ppo_jax.report import ReportError, make_report, paper_table1
from ppo_jax.sweep.spec import load_spec
from ppo_jax.sweep.sweep_dir import spec_record
from tests.report.test_build import write_lm_sweep

UPDATES = 20
# Random policy (given in a reference-scores file): CartPole 20, Acrobot -500. CartPole's documented best,
# 500, is what --normalize reference uses; best-setting must ignore it.
REFERENCES = "CartPole-v1: {random: 20.0, best: 500.0, source: test}\nAcrobot-v1: {random: -500.0, source: test}\n"
SETTINGS = {"clip": 1.0, "kl_fixed": 3.0, "clip_no_min": 1.0}  # objective -> kl_beta (clip_eps 0.2 throughout)
# final return per (env, objective), seeds 0 and 1
FINALS = {
    ("CartPole-v1", "clip"): [420.0, 380.0],  # mean 400: CartPole's best setting
    ("CartPole-v1", "kl_fixed"): [260.0, 180.0],  # mean 220
    ("CartPole-v1", "clip_no_min"): [20.0, 60.0],  # mean 40
    ("Acrobot-v1", "clip"): [-100.0, -140.0],  # mean -120
    ("Acrobot-v1", "kl_fixed"): [-100.0, -60.0],  # mean -80: Acrobot's best setting
    ("Acrobot-v1", "clip_no_min"): [-500.0, -420.0],  # mean -460
}
# Normalized = (R - random) / (best - random): CartPole (R - 20) / 380, Acrobot (R + 500) / 420.
#   clip:        CartPole 400/380 = 1.052632, 360/380 = 0.947368 (mean 1);  Acrobot 400/420, 360/420 (mean 380/420 = 0.904762)
#   kl_fixed:    CartPole 240/380, 160/380 (mean 200/380 = 0.526316);       Acrobot 400/420, 440/420 (mean 1)
#   clip_no_min: CartPole 0, 40/380 (mean 20/380 = 0.052632);                Acrobot 0, 80/420 (mean 40/420 = 0.095238)
# Mean over the two envs: clip (1 + 0.904762) / 2 = 0.952381; kl_fixed (0.526316 + 1) / 2 = 0.763158;
#   clip_no_min (0.052632 + 0.095238) / 2 = 0.073935.
# The paper's Table 1 (Schulman et al. 2017): clipping eps = 0.2 -> 0.82, fixed KL beta = 3 -> 0.72; no row for clip_no_min.
PER_RUN = {
    ("CartPole-v1", "clip"): [400 / 380, 360 / 380],
    ("CartPole-v1", "kl_fixed"): [240 / 380, 160 / 380],
    ("CartPole-v1", "clip_no_min"): [0.0, 40 / 380],
    ("Acrobot-v1", "clip"): [400 / 420, 360 / 420],
    ("Acrobot-v1", "kl_fixed"): [400 / 420, 440 / 420],
    ("Acrobot-v1", "clip_no_min"): [0.0, 80 / 420],
}
ROWS = {  # setting label -> (CartPole mean, Acrobot mean, mean over envs, paper)
    "objective=clip, kl_beta=1": ("1.00", "0.905", "0.952", "0.82"),
    "objective=kl_fixed, kl_beta=3": ("0.526", "1.00", "0.763", "0.72"),  # our means without CIs: never bold
    "objective=clip_no_min, kl_beta=1": ("0.0526", "0.0952", "0.0739", ""),  # the paper's numbers as printed,
}


def write_sweep(path: Path) -> None:
    """A sweep directory as ``ppo-jax sweep`` leaves it: 2 envs x 3 objectives x 2 seeds, each run's return
    constant at its final value."""
    spec = load_spec(
        {
            "name": "objectives_synthetic",
            "envs": ["CartPole-v1", "Acrobot-v1"],
            "seeds": 2,
            "zip": {"objective": list(SETTINGS), "kl_beta": list(SETTINGS.values())},
        }
    )
    path.mkdir(parents=True)
    (path / "spec.json").write_text(json.dumps(spec_record(spec)))
    (path / "plan.json").write_text("{}")
    (path / "metadata.json").write_text(json.dumps({"sweep": {"name": "objectives_synthetic"}}))
    frames = []
    for setting in spec.settings:
        for seed, final in enumerate(FINALS[(setting.env, setting.values["objective"])]):
            frames.append(
                pd.DataFrame(
                    {
                        "env": setting.env,
                        "setting_id": setting.setting_id,
                        "seed": seed,
                        "update": np.arange(UPDATES),
                        "env_steps": (np.arange(UPDATES) + 1) * 512,
                        "episode_return": final,
                        **setting.values,
                    }
                )
            )
    pd.concat(frames).to_parquet(path / "metrics.parquet")


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("paper_inputs")
    write_sweep(root / "sweep")
    (root / "references.yaml").write_text(REFERENCES)
    return {"sweep": root / "sweep", "references": root / "references.yaml", "root": root}


@pytest.fixture(scope="module")
def report(inputs, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("paper_report") / "out"
    return make_report(
        [inputs["sweep"]], out, reps=200, normalize="best-setting", reference_scores=inputs["references"]
    )


def test_normalized_scores_by_hand(report):
    finals = pd.read_csv(report / "final_returns.csv")
    for (env, objective), expected in PER_RUN.items():
        rows = finals[
            (finals.env == env) & (finals.setting == f"objective={objective}, kl_beta={SETTINGS[objective]:g}")
        ]
        np.testing.assert_allclose(rows.sort_values("seed").score, expected, rtol=1e-9)
    record = json.loads((report / "report.json").read_text())
    assert record["parameters"]["normalize"] == "best-setting"
    assert (
        record["normalizers"]["CartPole-v1"]["best"] == 400.0 and record["normalizers"]["Acrobot-v1"]["best"] == -80.0
    )
    mean = pd.read_csv(report / "aggregates.csv").query("metric == 'Mean'").set_index("setting")
    expected = {
        "objective=clip, kl_beta=1": 0.952381,
        "objective=kl_fixed, kl_beta=3": 0.763158,
        "objective=clip_no_min, kl_beta=1": 0.073935,
    }
    for setting, value in expected.items():
        assert mean.loc[setting, "value"] == pytest.approx(value, abs=1e-6)
        assert np.isnan(mean.loc[setting, "low"]) and np.isnan(mean.loc[setting, "high"])  # 2 seeds: no CI


def test_paper_table_and_index(report):
    lines = (report / "paper_table1.md").read_text().splitlines()
    assert lines[0] == "| setting | CartPole-v1 | Acrobot-v1 | all envs: mean | PPO paper, Table 1 |"
    assert "Rank agreement with the paper: not computed (fewer than 3 settings have a paper number)." in lines
    split = [[c.strip() for c in row.strip()[1:-1].split("|")] for row in lines[2:] if row.startswith("|")]
    cells = {row[0]: row[1:] for row in split}
    for setting, (cartpole, acrobot, mean, paper) in ROWS.items():
        assert cells[setting][0].strip("*") == cartpole.strip("*") and cells[setting][1] == acrobot
        assert cells[setting][2] == f"{mean} (no CI)"  # 2 seeds: below the rule's 5
        assert cells[setting][3].strip("*") == paper
    assert cells["objective=clip, kl_beta=1"][3] == "**0.82**"  # the best paper number shown is in bold
    assert (
        r"\toprule" in (report / "paper_table1.tex").read_text()
        and "Schulman" in (report / "paper_table1.tex").read_text()
    )
    assert {"paper_table1.png", "paper_table1.pdf"} <= {p.name for p in report.iterdir()}
    index = (report / "index.md").read_text()
    assert "## The PPO paper's Table 1" in index and "(paper_table1.png)" in index and "[paper_table1.tex]" in index
    assert "best setting's mean final return on every env" in index
    assert "The PPO paper&#x27;s Table 1" in (report / "index.html").read_text()


def test_reference_normalization_keeps_the_documented_best(inputs, tmp_path):
    out = make_report([inputs["sweep"]], tmp_path / "r", reps=100, reference_scores=inputs["references"])
    finals = pd.read_csv(out / "final_returns.csv")
    row = finals[(finals.env == "CartPole-v1") & (finals.setting == "objective=clip, kl_beta=1") & (finals.seed == 0)]
    assert row.score.iloc[0] == pytest.approx(400 / 480)  # (420 - 20) / (500 - 20)
    assert not (out / "paper_table1.md").exists()


def test_bad_normalize_values_are_refused(inputs, tmp_path):
    with pytest.raises(ReportError, match="--normalize must be one of reference, best-setting, got 'best'"):
        make_report([inputs["sweep"]], tmp_path / "r", normalize="best")
    cli = [sys.executable, "-m", "ppo_jax.cli", "report"]
    proc = subprocess.run(
        [*cli, str(inputs["sweep"]), "--out", str(tmp_path / "o"), "--normalize", "bogus"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 2 and "invalid choice 'bogus'" in proc.stderr and "best-setting" in proc.stderr
    assert "Traceback" not in proc.stderr
    write_lm_sweep(tmp_path / "rlhf", {"beta": [0.0, 0.1]})
    proc = subprocess.run(
        [*cli, str(tmp_path / "rlhf"), "--out", str(tmp_path / "o"), "--normalize", "best-setting"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 2 and proc.stderr.startswith("error: --normalize best-setting is the PPO paper's")
    assert "Traceback" not in proc.stderr and not (tmp_path / "o").exists()


def _configs(rows: dict[str, tuple[str, str | None, float | None]]) -> dict[str, dict]:
    base = {"clip_schedule": "constant", "adaptive_clip": False, "early_stop_kl": 0.0, "clip_eps": 0.2, "kl_beta": 1.0}
    return {s: {**base, "objective": o, **({f: v} if f else {})} for s, (o, f, v) in rows.items()}


def test_rank_agreement_with_the_paper_by_hand():
    # paper (Table 1): clip 0.2 0.82 > clip 0.1 0.76 > kl_fixed 1 0.71 > clip 0.3 0.70 > unclipped -0.39.
    # ours (mean over 2 envs): clip 0.1 5 > clip 0.2 4 > clip 0.3 3 > kl_fixed 1 2 > unclipped 1.
    # ranks (ascending) paper 4 5 2 3 1 vs ours 5 4 3 2 1: d^2 sum 4, Spearman 1 - 6 * 4 / (5 * 24) = 0.8;
    # of the 10 pairs two are discordant (clip 0.1 / 0.2, clip 0.3 / kl_fixed): Kendall (8 - 2) / 10 = 0.6.
    configs = _configs(
        {
            "c1": ("clip", "clip_eps", 0.1),
            "c2": ("clip", "clip_eps", 0.2),
            "c3": ("clip", "clip_eps", 0.3),
            "k1": ("kl_fixed", "kl_beta", 1.0),
            "u": ("unclipped", None, None),
            "other": ("clip_no_min", None, None),  # no paper number: not ranked
        }
    )
    ours = {"c1": 5.0, "c2": 4.0, "c3": 3.0, "k1": 2.0, "u": 1.0, "other": 9.0}
    rows = [
        {"env": env, "setting": s, "seed": i, "score": v + (0.5 if env == "a" else -0.5)}
        for s, v in ours.items()
        for env in ("a", "b")
        for i in range(3)
    ]
    finals = pd.DataFrame(rows)
    table = paper_table1.rank_agreement(finals, list(ours), ["a", "b"], configs, reps=200, seed=0, with_ci=True)
    stats = table.set_index("statistic")
    assert stats.loc["Spearman rho", "value"] == pytest.approx(0.8) and stats.loc[
        "Kendall tau-b", "value"
    ] == pytest.approx(0.6)
    assert (table["settings"] == 5).all()
    # every run of a cell equal: every resample gives the same means, a zero-width interval at the point
    np.testing.assert_allclose(table[["low", "high"]].to_numpy(), [[0.8, 0.8], [0.6, 0.6]])
    # spread within cells: the bootstrap reorders close settings, the interval widens around the point
    noisy = finals.assign(score=finals["score"] + np.tile([-1.5, 0.0, 1.5], len(finals) // 3))
    wide = paper_table1.rank_agreement(noisy, list(ours), ["a", "b"], configs, reps=200, seed=0, with_ci=True)
    assert (wide["low"] < wide["value"]).all() and (wide["value"] <= wide["high"]).all()
    none = paper_table1.rank_agreement(noisy, list(ours), ["a", "b"], configs, reps=200, seed=0, with_ci=False)
    np.testing.assert_allclose(none["value"], wide["value"])
    assert none[["low", "high"]].isna().all().all()
    text = paper_table1.agreement_text(none, 5)
    assert "over the 5 settings it reports: Spearman rho = 0.800 (no CI), Kendall tau-b = 0.600 (no CI)" in text
