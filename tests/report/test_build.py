"""``ppo-jax report``: synthetic run and sweep directories (made here, no training) -> every file, and
statistics checked against values worked out by hand; missing or corrupt inputs give errors naming the file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ppo_jax.report import ReportError, intervals, make_report, tables
from ppo_jax.report.scores import REFERENCE_SCORES
from ppo_jax.rl.config import PPOConfig
from ppo_jax.sweep.spec import load_spec
from ppo_jax.sweep.sweep_dir import spec_record

UPDATES = 20
SEEDS = (0, 1, 2, 3)
ENVS = ("CartPole-v1", "Acrobot-v1")
# final return (the last update: 5% of 20 updates) per env x clip_eps x seed
FINALS = {
    ("CartPole-v1", 0.1): [500.0, 400.0, 300.0, 21.68],
    ("CartPole-v1", 0.2): [500.0, 500.0, 260.84, 100.0],
    ("Acrobot-v1", 0.1): [-85.14, -100.0, -200.0, -499.13],
    ("Acrobot-v1", 0.2): [-90.0, -85.14, -150.0, -300.0],
}


def metrics_rows(final: float, seed: int) -> pd.DataFrame:
    """20 updates: NaN (no episode yet) for the first two, then a ramp, the final value at the last update."""
    ret = np.linspace(final - 50.0, final - 10.0, UPDATES)
    ret[:2] = np.nan
    ret[-2:] = final - 10.0, final
    return pd.DataFrame(
        {
            "seed": seed,
            "update": np.arange(UPDATES),
            "env_steps": (np.arange(UPDATES) + 1) * 512,
            "episode_return": ret,
            "entropy": np.linspace(0.69, 0.3, UPDATES),
        }
    )


def write_run(path: Path, env: str, clip_eps: float) -> None:
    path.mkdir(parents=True)
    cfg = PPOConfig(env=env, clip_eps=clip_eps, total_timesteps=UPDATES * 512).to_dict()  # 4 envs x 128 steps
    (path / "config.json").write_text(json.dumps({**cfg, "seeds": list(SEEDS)}))
    (path / "metadata.json").write_text(
        json.dumps({"command_line": "ppo-jax train (synthetic)", "git_commit": "abc123"})
    )
    pd.concat([metrics_rows(f, s) for s, f in zip(SEEDS, FINALS[(env, clip_eps)], strict=True)]).to_csv(
        path / "metrics.csv", index=False
    )
    episodes = [
        {
            "seed": s,
            "policy": p,
            "episode": e,
            "return": float(s * 10 + e + (100 if p == "deterministic" else 0)),
            "length": 5,
        }
        for s in SEEDS
        for p in ("stochastic", "deterministic")
        for e in range(2)
    ]
    pd.DataFrame(episodes).to_csv(path / "evaluation.csv", index=False)


def write_sweep(path: Path) -> None:
    """A sweep directory as ``ppo-jax sweep`` leaves it, for the same 2 envs x 2 clip_eps x 4 seeds."""
    spec = load_spec({"name": "synthetic", "envs": list(ENVS), "seeds": len(SEEDS), "grid": {"clip_eps": [0.1, 0.2]}})
    path.mkdir(parents=True)
    (path / "spec.json").write_text(json.dumps(spec_record(spec)))
    (path / "plan.json").write_text("{}")
    (path / "metadata.json").write_text(json.dumps({"sweep": {"name": "synthetic"}, "git_commit": "abc123"}))
    frames = []
    for setting in spec.settings:
        eps = setting.values["clip_eps"]
        for seed, final in zip(SEEDS, FINALS[(setting.env, eps)], strict=True):
            rows = metrics_rows(final, seed).assign(env=setting.env, setting_id=setting.setting_id, clip_eps=eps)
            frames.append(rows)
    pd.concat(frames).to_parquet(path / "metrics.parquet")


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("report_inputs")
    runs = []
    for env in ENVS:
        for eps in (0.1, 0.2):
            runs.append(root / f"{env}-{eps}")
            write_run(runs[-1], env, eps)
    write_sweep(root / "sweep")
    return {"runs": runs, "sweep": root / "sweep", "root": root}


@pytest.fixture(scope="module")
def report(inputs, tmp_path_factory) -> Path:
    """The report with bootstrap CIs: 4 seeds, so the rule's threshold is lowered to 4 (by default, 5, these cells
    get their per-seed values instead: test_fewer_seeds_than_the_rule_give_per_seed_values_and_no_ci)."""
    return make_report(inputs["runs"], tmp_path_factory.mktemp("report") / "out", reps=200, min_seeds=4)


def normalized(env: str, value: float) -> float:
    ref = REFERENCE_SCORES[env]
    return (value - ref.random) / (ref.best - ref.random)


def test_report_writes_every_file(report):
    names = {p.name for p in report.iterdir()}
    expected = {
        "index.md",
        "index.html",
        "report.json",
        "final_returns.csv",
        "per_env.csv",
        "aggregates.csv",
        "improvement.csv",
        "final_return.md",
        "final_return.tex",
        "aggregates.md",
        "aggregates.tex",
        "evaluation.md",
    }
    for stem in ("curves_return", "curves_entropy", "sensitivity", "aggregates", "improvement", "profiles"):
        expected |= {f"{stem}.png", f"{stem}.pdf"}
    assert expected <= names, expected - names
    index = (report / "index.md").read_text()
    for stem in ("curves_return", "sensitivity", "profiles"):
        assert f"({stem}.png)" in index and f'src="{stem}.png"' in (report / "index.html").read_text()
    assert "abc123" in index and "last 5% of its logged updates" in index
    assert '"clip_eps": 0.1' in index and "<details>" in (report / "index.html").read_text()  # each source's config
    assert r"\toprule" in (report / "final_return.tex").read_text()
    # every table ends with the commit of each source (4 run directories, each recorded at commit abc123)
    for table in ("final_return.md", "aggregates.md", "evaluation.md"):
        last = (report / table).read_text().splitlines()[-1]
        assert last.startswith("Sources: ") and last.count("at commit abc123") == 4, last
    caption = next(line for line in (report / "final_return.tex").read_text().splitlines() if "caption" in line)
    assert caption.endswith("at commit abc123.}") and caption.count("at commit abc123") == 4
    assert "bold: the best value of a column whose interval lies wholly above every other" in index


def test_final_returns_and_normalized_scores_by_hand(report):
    finals = pd.read_csv(report / "final_returns.csv")
    assert len(finals) == 16
    for (env, eps), values in FINALS.items():
        rows = finals[(finals.env == env) & (finals.setting == f"clip_eps={eps:g}")].sort_values("seed")
        np.testing.assert_allclose(rows.final_return, values, rtol=1e-6)
        np.testing.assert_allclose(rows.score, [normalized(env, v) for v in values], rtol=1e-6)
    # evaluation: mean over the two episodes (e = 0, 1) of s*10 + e (+100 deterministic)
    row = finals[(finals.env == "Acrobot-v1") & (finals.setting == "clip_eps=0.2") & (finals.seed == 3)].iloc[0]
    assert row.eval_return_stochastic == 30.5 and row.eval_return_deterministic == 130.5


def test_last_percent_window_by_hand(inputs, tmp_path):
    # 10% of 20 updates = the last 2: (final + (final - 10)) / 2, the ramp's value before the last being final - 10
    out = make_report(inputs["runs"][:1], tmp_path / "r", reps=100, last_percent=10)
    finals = pd.read_csv(out / "final_returns.csv").sort_values("seed")
    np.testing.assert_allclose(finals.final_return, [v - 5.0 for v in FINALS[("CartPole-v1", 0.1)]], rtol=1e-6)


def test_aggregates_by_hand(report):
    agg = pd.read_csv(report / "aggregates.csv").set_index(["setting", "metric"])["value"]
    scores = {
        eps: np.array([[normalized(env, FINALS[(env, eps)][i]) for env in ENVS] for i in range(len(SEEDS))])
        for eps in (0.1, 0.2)
    }
    # clip_eps=0.1, worked by hand: CartPole 1, 0.791, 0.582, 0; Acrobot 1, 0.964, 0.722, 0
    s = scores[0.1]
    np.testing.assert_allclose(sorted(s[:, 0]), [0.0, (300 - 21.68) / 478.32, (400 - 21.68) / 478.32, 1.0], rtol=1e-9)
    middle = np.sort(s.reshape(-1))[2:6]  # IQM of 8 scores: drop 2 at each end
    assert agg[("clip_eps=0.1", "IQM")] == pytest.approx(middle.mean(), rel=1e-9)
    assert agg[("clip_eps=0.1", "Mean")] == pytest.approx(s.mean(), rel=1e-9)
    assert agg[("clip_eps=0.1", "Median")] == pytest.approx(np.median(s.mean(axis=0)), rel=1e-9)
    assert agg[("clip_eps=0.1", "Optimality gap")] == pytest.approx(np.mean(1 - np.minimum(s, 1)), rel=1e-9)
    # P(0.1 > 0.2) by counting pairs per env (ties count 1/2), averaged over envs
    x, y = scores[0.1], scores[0.2]
    per_env = [np.mean([(a > b) + 0.5 * (a == b) for a in x[:, e] for b in y[:, e]]) for e in range(2)]
    poi = pd.read_csv(report / "improvement.csv").set_index("setting")
    baseline = poi["baseline"].iloc[0]
    expected = np.mean(per_env) if baseline == "clip_eps=0.2" else 1 - np.mean(per_env)
    assert poi["probability"].iloc[0] == pytest.approx(expected, rel=1e-9)
    ci = pd.read_csv(report / "aggregates.csv").set_index(["setting", "metric"]).loc[("clip_eps=0.1", "IQM")]
    assert ci["low"] <= ci["value"] <= ci["high"] and ci["low"] < ci["high"]


def test_bold_only_where_the_intervals_separate(report):
    table = (report / "final_return.md").read_text().splitlines()
    row = {line.split(" | ")[0].strip("| "): line for line in table[2:]}
    # CartPole IQM over 4 seeds = mean of the middle 2: 0.1 -> (300+400)/2 = 350; 0.2 -> (260.84+500)/2 = 380.42,
    # the larger, but its interval (seeds 100..500) overlaps 0.1's: no bold.
    assert row["clip_eps=0.2"].split(" | ")[1].startswith("380 [") and "**" not in "".join(table[2:])


def test_fewer_seeds_than_the_rule_give_per_seed_values_and_no_ci(inputs, report, tmp_path):
    out = make_report(inputs["runs"], tmp_path / "few", reps=200)  # 4 seeds per cell, the rule's default is 5
    table = (out / "final_return.md").read_text().splitlines()
    row = {line.split(" | ")[0].strip("| "): [c.strip(" |") for c in line.split(" | ")[1:]] for line in table[2:]}
    # CartPole, clip_eps=0.1: seeds 0..3 = 500, 400, 300, 21.68; IQM of 4 = mean of the middle two = 350
    assert row["clip_eps=0.1"][0] == "350 (seeds: 500, 400, 300, 21.7)"
    assert row["clip_eps=0.2"][1] == "-120 (seeds: -90.0, -85.1, -150, -300)"  # Acrobot: (-85.14 - 150) / 2 = -117.57
    body = "\n".join(table[2:])
    assert "**" not in body and "[" not in body
    per_env = pd.read_csv(out / "per_env.csv", keep_default_na=False, na_values=["NaN", "nan", ""])
    assert per_env[["low", "high", "low_score", "high_score"]].isna().all().all() and per_env["few_seeds"].all()
    for (env, eps), values in FINALS.items():
        cell = per_env[(per_env.env == env) & (per_env.setting == f"clip_eps={eps:g}")].iloc[0]
        np.testing.assert_allclose([float(v) for v in cell["per_seed"].split(";")], values, rtol=1e-6)
    # the point estimates are those of the bootstrapped report; only the intervals are withheld
    for name in ("aggregates.csv", "improvement.csv"):
        few, full = pd.read_csv(out / name), pd.read_csv(report / name)
        value = "value" if name == "aggregates.csv" else "probability"
        np.testing.assert_allclose(few[value], full[value], rtol=1e-12)
        assert few[["low", "high"]].isna().all().all() and full[["low", "high"]].notna().all().all()
    assert "(no CI)" in (out / "aggregates.md").read_text() and "**" not in (out / "aggregates.md").read_text()
    assert "with fewer than 5 seeds per cell no bootstrap CI is given" in (out / "index.md").read_text()
    assert "with fewer than 5 seeds" in (out / "final_return.tex").read_text()
    assert json.loads((out / "report.json").read_text())["parameters"]["min_seeds_for_ci"] == 5
    with pytest.raises(ReportError, match="--min-seeds-for-ci must be an integer of at least 2"):
        make_report(inputs["runs"], tmp_path / "bad", min_seeds=1)


def test_the_bold_rule_by_hand():
    # Column a: x = 5 [4, 6] lies above y = 2 [1, 3] and z = 3 [2.5, 3.5] -> x bold. Column b: the best, y = 5 [3, 7],
    # overlaps x = 4 [3.5, 4.5] -> none bold. Column c, lower is better: z = 1 [0.5, 1.5] below x = 2 [1.6, 3] -> z bold
    # (y has no value there). Column d has no intervals (published numbers): its best, y = 0.8, is bold. Column e,
    # values of ours without intervals: none bold.
    rows = [
        ("a", "x", 5, 4, 6),
        ("a", "y", 2, 1, 3),
        ("a", "z", 3, 2.5, 3.5),
        ("b", "x", 4, 3.5, 4.5),
        ("b", "y", 5, 3, 7),
        ("b", "z", 1, 0, 2),
        ("c", "x", 2, 1.6, 3),
        ("c", "z", 1, 0.5, 1.5),
        ("d", "x", 0.7, np.nan, np.nan),
        ("d", "y", 0.8, np.nan, np.nan),
        ("e", "x", 0.1, np.nan, np.nan),
        ("e", "y", 0.3, np.nan, np.nan),
    ]
    frame = pd.DataFrame(rows, columns=["env", "setting", "iqm", "low", "high"])
    frame["text"] = [f"{v:.2f}" if env == "d" else None for env, _, v, *_ in rows]  # d: published, as printed
    lines = tables.markdown(frame, ["x", "y", "z"], ["a", "b", "c", "d", "e"], lower_is_better=("c",)).splitlines()
    cells = {line.split(" | ")[0].strip("| "): [c.strip(" |") for c in line.split(" | ")[1:]] for line in lines[2:]}
    assert cells["x"] == ["**5.00 [4.00, 6.00]**", "4.00 [3.50, 4.50]", "2.00 [1.60, 3.00]", "0.70", "0.100"]
    assert cells["y"] == ["2.00 [1.00, 3.00]", "5.00 [3.00, 7.00]", "", "**0.80**", "0.300"]
    assert cells["z"] == ["3.00 [2.50, 3.50]", "1.00 [0.00, 2.00]", "**1.00 [0.500, 1.50]**", "", ""]
    # Touching intervals do not separate: x's low equal to another's high is no win.
    touching = frame.copy()
    touching.loc[1, "high"] = 4.0
    assert "**" not in tables.markdown(touching, ["x", "y", "z"], ["a"]).split("\n", 2)[2]


def test_sweep_directory_gives_the_same_statistics(inputs, report, tmp_path):
    out = make_report([inputs["sweep"]], tmp_path / "sweep_report", reps=200, seed=0, min_seeds=4)
    pd.testing.assert_frame_equal(pd.read_csv(out / "aggregates.csv"), pd.read_csv(report / "aggregates.csv"))
    assert json.loads((out / "report.json").read_text())["sources"][0]["name"] == "synthetic"


def test_bootstrap_is_reproducible_and_seeded():
    scores = {"a": np.random.default_rng(0).normal(size=(6, 2)), "b": np.random.default_rng(1).normal(size=(6, 2))}
    first = intervals.aggregates(scores, reps=150, seed=3)
    pd.testing.assert_frame_equal(first, intervals.aggregates(scores, reps=150, seed=3))
    assert not first.equals(intervals.aggregates(scores, reps=150, seed=4))


def test_fast_aggregates_equal_rliable():
    from rliable import library as rly
    from rliable import metrics

    rng = np.random.default_rng(0)
    for n in (3, 4, 5, 8, 10):
        x, y = rng.normal(size=(n, 3)).round(1), rng.normal(size=(n + 2, 3)).round(1)
        assert intervals.probability_of_improvement(x, y) == pytest.approx(
            metrics.probability_of_improvement(x, y), abs=1e-12
        )
        assert intervals.trimmed_mean(x.reshape(-1)) == pytest.approx(metrics.aggregate_iqm(x), abs=1e-12)
        taus = np.linspace(-1, 1, 7)
        np.testing.assert_allclose(intervals.score_distribution(x, taus), rly.score_distributions(x, taus))


# ----------------------------------------------------------------------------- bad input


def test_missing_and_corrupt_files_name_the_file(inputs, tmp_path):
    import shutil

    broken = tmp_path / "broken"
    shutil.copytree(inputs["runs"][0], broken)
    (broken / "metrics.csv").unlink()
    with pytest.raises(ReportError, match=r"broken/metrics\.csv: file missing"):
        make_report([broken], tmp_path / "r1")
    (broken / "metrics.csv").write_text("garbage\n\x00\x01")
    with pytest.raises(ReportError, match=r"broken/metrics\.csv"):
        make_report([broken], tmp_path / "r2")
    (broken / "config.json").write_text("{not json")
    with pytest.raises(ReportError, match=r"broken/config\.json: not valid JSON"):
        make_report([broken], tmp_path / "r3")
    sweep = tmp_path / "sweep"
    shutil.copytree(inputs["sweep"], sweep)
    (sweep / "metrics.parquet").write_bytes(b"PAR1 not really")
    with pytest.raises(ReportError, match=r"sweep/metrics\.parquet: cannot be read"):
        make_report([sweep], tmp_path / "r4")
    # What a reader of the table alone cannot see: a finished run's metrics cut short, a truncated params file.
    cut = tmp_path / "cut"
    shutil.copytree(inputs["runs"][0], cut)
    lines = (cut / "metrics.csv").read_text().splitlines(keepends=True)
    (cut / "metrics.csv").write_text("".join(lines[:-5]))  # 4 seeds x 20 updates: 75 rows left, not 80
    with pytest.raises(ReportError, match=r"cut/metrics\.csv is corrupt or truncated .*75 rows, not 80"):
        make_report([cut], tmp_path / "r5")
    (cut / "metrics.csv").write_text("".join(lines))
    (cut / "params.msgpack").write_bytes(b"\x82\xa6params")  # a msgpack map cut after its first key
    with pytest.raises(ReportError, match=r"cut/params\.msgpack is corrupt or truncated"):
        make_report([cut], tmp_path / "r6")
    assert (cut / "params.msgpack").read_bytes() == b"\x82\xa6params"  # named, not moved or deleted
    assert not any(p.name.startswith("r") for p in tmp_path.iterdir())  # nothing written on error


def test_out_is_never_overwritten_without_force(inputs, report):
    before = (report / "index.md").read_text()
    with pytest.raises(ReportError, match="--force"):
        make_report(inputs["runs"], report)
    assert (report / "index.md").read_text() == before
    with pytest.raises(ReportError, match="is not a report directory"):
        make_report(inputs["runs"], inputs["runs"][0], force=True)  # a run directory is not a report


def test_cli_report_errors_exit_2(inputs, tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "ppo_jax.cli", "report", str(tmp_path / "nope"), "--out", str(tmp_path / "o")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and proc.stderr.startswith("error:") and "nope: no such directory" in proc.stderr
    assert "Traceback" not in proc.stderr


# ----------------------------------------------------------------------------- RLHF: the frontier


def write_lm_sweep(path: Path, grid: dict, task: str = "rlhf", legacy_clip_eps: bool = False) -> dict:
    """A sweep directory of task rlhf (or lm) with 20 updates per run; returns {(setting_id, seed): finals} of
    (kl, first score, second score): rlhf's score and true_score, lm's reward and accuracy. With
    ``legacy_clip_eps`` the records name the clip_eps_low axis clip_eps, as sweeps written before 0.3.0 did."""
    spec = load_spec({"task": task, "name": f"{task}_synthetic", "seeds": 2, "grid": grid, "pretrain": {"seed": 0}})
    record = spec_record(spec)
    if legacy_clip_eps:
        record = json.loads(json.dumps(record).replace('"clip_eps_low"', '"clip_eps"'))
    path.mkdir(parents=True)
    (path / "spec.json").write_text(json.dumps(record))
    (path / "plan.json").write_text("{}")
    (path / "metadata.json").write_text(json.dumps({"task": task, "sweep": {"name": f"{task}_synthetic"}}))
    scores = ("score", "true_score") if task == "rlhf" else ("reward", "accuracy")
    frames, finals = [], {}
    for setting in spec.settings:
        for seed in (0, 1):
            base = 0.1 * setting.setting_id + 0.01 * seed
            kl, score, true = 1.0 + base, 4.0 + base, 0.9 - base
            ramp = np.linspace(0.0, 1.0, UPDATES)
            values = {
                ("clip_eps" if legacy_clip_eps and k == "clip_eps_low" else k): v for k, v in setting.values.items()
            }
            frames.append(
                pd.DataFrame(
                    {
                        "env": setting.env,
                        "setting_id": setting.setting_id,
                        "seed": seed,
                        "update": np.arange(UPDATES),
                        "env_steps": (np.arange(UPDATES) + 1) * 64,
                        **values,
                        # the last 10% of 20 updates = the last 2: their mean is the final value
                        "kl_ref": np.r_[kl * ramp[:-2], kl - 0.1, kl + 0.1],
                        scores[0]: np.r_[score * ramp[:-2], score, score],
                        scores[1]: np.r_[true * ramp[:-2], true - 0.02, true + 0.02],
                        "entropy": np.linspace(2.0, 0.2, UPDATES),
                        "response_length": np.linspace(4.0, 6.0, UPDATES),
                    }
                )
            )
            finals[(setting.setting_id, seed)] = (kl, score, true)
    pd.concat(frames).to_parquet(path / "metrics.parquet")
    return finals


@pytest.mark.parametrize("legacy", [False, True], ids=["clip_eps_low", "clip_eps-before-0.3"])
def test_rlhf_sweep_report_draws_the_frontier_from_final_values(tmp_path, legacy):
    finals = write_lm_sweep(tmp_path / "rlhf", {"clip_eps_low": [0.1, 0.2], "beta": [0.0, 0.1]}, legacy_clip_eps=legacy)
    out = make_report([tmp_path / "rlhf"], tmp_path / "report", reps=200)
    record = json.loads((out / "report.json").read_text())
    assert record["task"] == "rlhf" and record["parameters"]["last_percent"] == 10.0  # the task's default
    assert record["score"]["metric"] == "true_score" and record["normalizers"]["copy"]["best"] == 1.0
    frontier = pd.read_csv(out / "frontier.csv")
    assert len(frontier) == 4 and {"frontier.png", "frontier.pdf"} <= {p.name for p in out.iterdir()}
    clip = frontier["clip_eps_low"]  # an old directory's clip_eps axis reads as clip_eps_low (LEGACY_FIELDS)
    for row, eps in zip(frontier.itertuples(), clip, strict=True):
        setting_id = [0.1, 0.2].index(eps) * 2 + [0.0, 0.1].index(row.beta)
        by_seed = np.array([finals[(setting_id, seed)] for seed in (0, 1)])
        np.testing.assert_allclose([row.kl_ref, row.score, row.true_score], by_seed.mean(0), rtol=1e-6)
    per_run = pd.read_csv(out / "final_returns.csv")  # the score of an RLHF run is its final true_score
    assert np.allclose(sorted(per_run["final_return"]), sorted(f[2] for f in finals.values()))
    assert "Reward vs KL" in (out / "index.md").read_text()
    assert {"curves_response_length.png", "curves_kl_ref.png"} <= {p.name for p in out.iterdir()}


def test_rlhf_frontier_without_a_clip_eps_axis(tmp_path):
    """The old frontier summary crashed with KeyError: 'clip_eps' when the grid had no clip_eps axis."""
    write_lm_sweep(tmp_path / "rlhf", {"beta": [0.0, 0.03, 0.1]})
    out = make_report([tmp_path / "rlhf"], tmp_path / "report", reps=200)
    assert len(pd.read_csv(out / "frontier.csv")) == 3 and (out / "frontier.png").exists()


def test_lm_sweep_over_presets_reports_accuracy_and_reward_against_kl(tmp_path):
    finals = write_lm_sweep(tmp_path / "lm", {"preset": ["grpo", "dapo"], "lr": [1e-4, 3e-4]}, task="lm")
    out = make_report([tmp_path / "lm"], tmp_path / "report", reps=200)
    record = json.loads((out / "report.json").read_text())
    assert record["task"] == "lm" and record["score"]["metric"] == "accuracy"
    frontier = pd.read_csv(out / "frontier.csv")
    assert list(frontier["preset"]) == ["grpo", "grpo", "dapo", "dapo"]
    for setting_id, row in enumerate(frontier.itertuples()):
        by_seed = np.array([finals[(setting_id, seed)] for seed in (0, 1)])
        np.testing.assert_allclose([row.kl_ref, row.reward, row.accuracy], by_seed.mean(0), rtol=1e-6)
    assert "sampled pass@1" in (out / "frontier.md").read_text()


def test_a_report_refuses_to_mix_tasks(inputs, tmp_path):
    write_lm_sweep(tmp_path / "rlhf", {"beta": [0.0, 0.1]})
    with pytest.raises(ReportError, match="one task"):
        make_report([inputs["runs"][0], tmp_path / "rlhf"], tmp_path / "report")
    assert not (tmp_path / "report").exists()


def test_a_zipped_twin_field_does_not_stop_the_heat_map():
    from ppo_jax.report.build import _grid_fields

    grid = {f"lo={e}, hi={e}, ent={c}": {"lo": e, "hi": e, "ent": c} for e in (0.1, 0.2, 0.3) for c in (0.0, 0.01)}
    assert _grid_fields(grid, ["lo", "hi", "ent"]) == ("lo", "ent")  # hi equals lo in every setting
    skewed = {**grid, "lo=0.1, hi=0.2, ent=0": {"lo": 0.1, "hi": 0.2, "ent": 0.0}}
    assert _grid_fields(skewed, ["lo", "hi", "ent"]) is None  # three fields that differ: no two-field grid
