"""A diverged run is a result: ``ppo-jax train`` names the seed and the update, records it, and exits 3
(``--allow-divergence``: 0); the final values say which seeds their means leave out.

The run is Probe-Diverge (``ppo_jax.rl.probe_envs``): reward NaN from each env's step 100 on, so with 16 steps
per update the rollout of update 100 // 16 = 6 (steps 96 .. 111) holds the first NaN reward, which makes that
update's advantages and loss NaN: both seeds diverge at update 6 with a non-finite loss, worked out by hand.
One run compiles (~20 s on 2 CPU cores); the flag and the exit status are checked in-process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from ppo_jax.cli.run_task import EXIT_DIVERGED, exit_status, print_final_values
from ppo_jax.rl.probe_envs import DIVERGE_STEP
from ppo_jax.rl.task import PPO
from ppo_jax.runs import final_values

NUM_STEPS, UPDATES = 16, 8
DIVERGE = [
    "train",
    "--env",
    "Probe-Diverge",
    "--total-timesteps",
    str(2 * NUM_STEPS * UPDATES),
    "--num-envs",
    "2",
    "--num-steps",
    str(NUM_STEPS),
    "--num-minibatches",
    "2",
    "--update-epochs",
    "1",
    "--eval-episodes",
    "0",
    "--seeds",
    "2",
    "--no-progress",
]
FIRST = DIVERGE_STEP // NUM_STEPS  # 6


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ppo_jax.cli", *args], capture_output=True, text=True, timeout=300, env=dict(os.environ)
    )


def test_a_diverged_run_names_seed_and_update_records_them_and_exits_3(tmp_path):
    assert FIRST == 6 and EXIT_DIVERGED == 3
    out = tmp_path / "run"
    proc = cli(*DIVERGE, "--out", str(out))
    assert proc.returncode == 3, proc.stderr
    for seed in (0, 1):
        assert f"seed {seed} diverged at update {FIRST} (non-finite loss)" in proc.stderr
        assert f"  seed {seed}: diverged at update {FIRST} (non-finite loss)" in proc.stdout
    assert "error: 2 of 2 seeds diverged: exit status 3 (--allow-divergence exits 0)" in proc.stderr
    assert "episode_return: mean over 0 of 2 seeds (2 diverged) nan" in proc.stdout

    metrics = pd.read_csv(out / "metrics.csv")  # the run directory is complete, and says where
    for seed in (0, 1):
        run = metrics[metrics.seed == seed].sort_values("update")
        assert run.non_finite.tolist() == [0.0] * FIRST + [1.0] * (UPDATES - FIRST)
        assert run.loss.iloc[:FIRST].notna().all() and run.loss.iloc[FIRST:].isna().all()
        assert run.episode_return.isna().all()  # no episode ever ends: NaN by design, never a divergence
    metadata = json.loads((out / "metadata.json").read_text())
    assert metadata["status"] == "complete" and (out / "params.msgpack").exists()
    assert metadata["diverged"] == [{"seed": s, "update": FIRST, "reason": "non-finite loss"} for s in (0, 1)]
    final = metadata["final"]["episode_return"]
    assert final["per_seed"] == [None, None] and final["dropped"] == 2 and final["mean"] is None


@pytest.mark.parametrize("command", ["train", "rlhf"])
def test_allow_divergence_is_a_run_flag_of_both_commands_and_exits_0(command, monkeypatch, capsys):
    import ppo_jax.cli.train as train_cli
    from ppo_jax.cli import main

    given = []
    monkeypatch.setattr(train_cli, "run_task", lambda *args, **kwargs: given.append(kwargs["allow_divergence"]) or 0)
    assert main([command, "--allow-divergence"]) == 0 and main([command]) == 0 and given == [True, False]
    diverged = {1: {"update": FIRST, "reason": "non-finite loss"}}
    assert exit_status(diverged, 2, allow_divergence=True) == 0
    err = capsys.readouterr().err
    assert f"seed 1 diverged at update {FIRST} (non-finite loss)" in err and "error:" not in err
    assert exit_status(diverged, 2, allow_divergence=False) == EXIT_DIVERGED
    assert "error: 1 of 2 seeds diverged: exit status 3" in capsys.readouterr().err
    assert exit_status({}, 2, allow_divergence=False) == 0


def test_the_mean_over_seeds_says_which_seeds_it_leaves_out(capsys):
    # Seeds 3, 4, 5: seed 4 diverged (its window is finite: a diverged policy can still collect returns),
    # seed 5 never finished an episode (NaN). The mean is seed 3's alone and says so.
    returns = np.array([[1.0, 10.0], [2.0, 20.0], [np.nan, np.nan]])
    final = final_values(PPO, {"episode_return": returns}, 2, diverged=[False, True, False])
    assert final["episode_return"]["per_seed"][0] == 10.0 and np.isnan(final["episode_return"]["per_seed"][1])
    assert final["episode_return"]["mean"] == 10.0 and final["episode_return"]["dropped"] == 2
    print_final_values(PPO, [3, 4, 5], final, {4: {"update": 1, "reason": "non-finite parameters or state"}})
    printed = capsys.readouterr().out
    assert "  seed 4: diverged at update 1 (non-finite parameters or state)" in printed
    assert "  episode_return: mean over 1 of 3 seeds (1 diverged, 1 without a value) 10.000" in printed
