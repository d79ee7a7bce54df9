"""Diverged runs in a sweep: the table carries ``non_finite``, and summary.csv and the terminal summary count the
diverged seeds per setting, name them with their update, and take means over the others, saying so."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ppo_jax import sweep
from ppo_jax.rl.probe_envs import DIVERGE_STEP
from ppo_jax.rl.task import PPO
from ppo_jax.sweep.spec import load_spec
from ppo_jax.sweep.table import format_summary, summarize

BASE = {"total_timesteps": 1024, "num_envs": 2, "num_steps": 64}  # 8 updates


def run_rows(setting, seed, non_finite=None, loss=None) -> pd.DataFrame:
    """8 logged updates of one run; episode_return = update + 10 * seed (final value: the last update's, 7 + 10 s)."""
    columns = {
        "env": setting.env,
        "setting_id": setting.setting_id,
        "seed": seed,
        "update": np.arange(8),
        "env_steps": (np.arange(8) + 1) * 128,
        "clip_eps": setting.values["clip_eps"],
        "episode_return": np.arange(8.0) + 10 * seed,
        "loss": np.ones(8) if loss is None else loss,
    }
    if non_finite is not False:
        columns["non_finite"] = np.zeros(8) if non_finite is None else non_finite
    return pd.DataFrame(columns)


def test_summary_counts_and_names_diverged_seeds_and_averages_the_others_by_hand():
    spec = load_spec({"envs": ["CartPole-v1"], "seeds": 3, "base": BASE, "grid": {"clip_eps": [0.1, 0.2, 0.3]}})
    late = np.r_[np.zeros(5), np.ones(3)]  # non-finite from update 5 on
    nan_loss = np.r_[np.ones(4), np.full(4, np.nan)]
    rows = []
    for s in spec.settings:
        for seed in (0, 1, 2):
            if s.setting_id == 1 and seed == 2:
                rows.append(run_rows(s, seed, non_finite=late))  # diverged: its finite return must not count
            elif s.setting_id == 2:  # a table written before non_finite: a non-finite loss (seed 0, from update 4)
                rows.append(run_rows(s, seed, non_finite=False, loss=nan_loss if seed == 0 else None))
            else:
                rows.append(run_rows(s, seed))
    summary = summarize(spec, pd.concat(rows, ignore_index=True))
    assert summary.diverged.tolist() == [0, 1, 1]
    assert summary.diverged_at.tolist() == ["", "seed 2 at update 5", "seed 0 at update 4"]
    # finals 7, 17, 27: setting 0 over all three; setting 1 without seed 2 (7, 17); setting 2 without seed 0 (17, 27)
    np.testing.assert_allclose(summary.final_episode_return, [17.0, 12.0, 22.0])
    assert summary.final_episode_return_seeds.tolist() == [3, 2, 2] and (summary.seeds == 3).all()
    assert summary.final_episode_return_ci95_low[1] == 7.0 and summary.final_episode_return_ci95_high[1] == 17.0

    text = format_summary(summary, PPO)
    lines = text.splitlines()
    assert lines[1].split() == ["setting_id", "clip_eps", "seeds", "diverged", "final_episode_return"]
    assert lines[3].split()[:4] == ["1", "0.2", "3", "1"] and lines[3].endswith("12 [7, 17] (2 of 3 seeds)")
    assert "  setting 1 diverged: seed 2 at update 5" in lines and "  setting 2 diverged: seed 0 at update 4" in lines
    assert "of 3 seeds" not in lines[2]  # setting 0: every seed in the mean, as before


def test_a_summary_written_before_divergence_was_counted_prints_as_before():
    old = pd.DataFrame(
        {
            "env": ["CartPole-v1"],
            "setting_id": [0],
            "clip_eps": [0.1],
            "seeds": [2],
            "final_episode_return": [62.0],
            "final_episode_return_ci95_low": [49.5],
            "final_episode_return_ci95_high": [74.5],
        }
    )
    assert format_summary(old, PPO).splitlines()[1:] == [
        " setting_id  clip_eps  seeds final_episode_return",
        "          0       0.1      2      62 [49.5, 74.5]",
    ]


@pytest.fixture(scope="module")
def diverged_sweep():
    """Probe-Diverge (reward NaN from step 100): 16 steps per update -> the loss is NaN first at update 6."""
    base = {"total_timesteps": 112, "num_envs": 1, "num_steps": 16, "num_minibatches": 1, "update_epochs": 1}
    spec = load_spec({"envs": ["Probe-Diverge"], "seeds": [0, 3], "base": base})
    return spec, sweep.run(spec, progress=False, cache_dir=None)


def test_a_sweep_run_that_diverges_is_flagged_at_its_update_in_the_table_and_summary(diverged_sweep):
    spec, table = diverged_sweep
    first = DIVERGE_STEP // 16  # 6: steps 96 .. 111 of each env, by hand
    for seed in (0, 3):
        run = table[table.seed == seed]
        assert run.non_finite.tolist() == [0.0] * first + [1.0]  # 7 updates
    summary = summarize(spec, table)
    assert summary.diverged.tolist() == [2] and summary.diverged_at.tolist() == [
        "seed 0 at update 6; seed 3 at update 6"
    ]
    assert np.isnan(summary.final_episode_return[0]) and summary.final_episode_return_seeds[0] == 0
    assert "  setting 0 diverged: seed 0 at update 6; seed 3 at update 6" in format_summary(summary, PPO)
