"""``ppo-jax train`` (and ``ppo-jax envs``): the command line end to end, its flags and its refusals.

CLI tests run ``python -m ppo_jax.cli`` in a subprocess with a tiny budget. Only
two of them compile a training program (~10-20 s each on 2 CPU cores): the
end-to-end run with progress on (shared by a module fixture) and the --force rerun.
Everything else fails before compiling or parses flags in-process. The run
directory's writer and reader are tested in-process in tests/storage/test_run_dir.py.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ppo_jax.config_fields import field_names
from ppo_jax.final_values import bootstrap_ci
from ppo_jax.rl.config import PPOConfig
from ppo_jax.rl.task import METRIC_NAMES, PPO
from ppo_jax.storage.run_dir import load_config, load_params
from tests.helpers import snapshot

TINY = [
    "--total-timesteps",
    "1024",
    "--num-envs",
    "2",
    "--num-steps",
    "64",
    "--num-minibatches",
    "2",
    "--update-epochs",
    "1",
]
TINY_UPDATES, TINY_BATCH = 8, 128  # 1024 // (2 * 64), 2 * 64
METADATA_KEYS = {
    "start_time",
    "end_time",
    "command",
    "command_line",
    "versions",
    "backend",
    "devices",
    "platform",
    "processor",
    "cpu_count",
    "git_commit",
    "git_dirty",
    "compile_seconds",
    "run_seconds",
    "env_steps_per_second",
    "task",
    "final",
}


def cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}  # no line wrapping in --help
    return subprocess.run(
        [sys.executable, "-m", "ppo_jax.cli", *args], capture_output=True, text=True, timeout=timeout, env=env
    )


# ----------------------------------------------------------------------------- end to end


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    out = tmp_path_factory.mktemp("cli") / "run"
    proc = cli("train", *TINY, "--seeds", "2", "--out", str(out))  # progress bar on: the CLI default
    assert proc.returncode == 0, proc.stderr
    return out, proc


def test_train_writes_a_valid_run_dir(run_dir):
    out, proc = run_dir
    assert sorted(p.name for p in out.iterdir()) == [
        "config.json",
        "evaluation.csv",
        "metadata.json",
        "metrics.csv",
        "params.msgpack",
    ]
    assert not [p for p in out.parent.iterdir() if p.name.startswith(".")], "temporary directories left behind"
    assert "compile:" in proc.stdout and "env steps/s" in proc.stdout
    assert "final values (mean over the last 5% of updates): episode_return" in proc.stdout
    assert "  seed 0: " in proc.stdout and "  seed 1: " in proc.stdout
    assert "  episode_return: mean over 2 seeds " in proc.stdout and "95% bootstrap CI" in proc.stdout
    # Progress, fed from inside the vmapped program, goes to stderr: not a tty, so one plain line per 10%
    # of the 8 updates (every update: round(0.8) = 1) once both seeds reported it.
    progress = [line for line in proc.stderr.splitlines() if line.startswith("update ")]
    assert [line.split(":")[0] for line in progress] == [f"update {u}/8 ({100 * u / 8:.0f}%)" for u in range(1, 9)]
    assert "update 8/8 (100%): 1,024 env steps/run  episode_return " in proc.stderr
    assert "update " not in proc.stdout

    # config.json: the task first, then the config (round-trips through PPOConfig.from_dict), then the seeds
    values = json.loads((out / "config.json").read_text())
    assert list(values)[0] == "task" and values.pop("task") == "ppo"
    assert values.pop("seeds") == [0, 1]
    assert "progress" not in values and values["lr_schedule"] == "linear"  # progress is a flag, not a field
    cfg = PPOConfig.from_dict(values)
    assert (cfg.num_envs, cfg.num_steps, cfg.num_updates, cfg.batch_size) == (2, 64, TINY_UPDATES, TINY_BATCH)
    assert cfg.lr == np.float32(2.5e-4) and values["lr"] == 2.5e-4
    assert cfg.to_dict() == PPOConfig.from_dict(cfg.to_dict()).to_dict()
    assert load_config(out) == (PPO, cfg, [0, 1])

    metadata = json.loads((out / "metadata.json").read_text())
    assert METADATA_KEYS <= set(metadata)
    assert {"python", "jax", "jaxlib", "flax", "optax", "gymnax", "ppo_jax"} <= set(metadata["versions"])
    assert metadata["backend"] in ("cpu", "gpu", "tpu", "cuda", "rocm") and metadata["devices"]
    assert metadata["command"][:2] == ["ppo-jax", "train"] and "--seeds" in metadata["command"]
    assert metadata["run"]["preset"] is None and "preset" not in proc.stdout  # CartPole: no preset
    assert metadata["compile_seconds"] > 0 and metadata["run_seconds"] > 0
    assert metadata["task"] == "ppo" and metadata["env_steps"] == 2 * 1024
    final = metadata["final"]
    assert set(final) == {"definition", "episode_return"} and final["definition"] == "mean over the last 5% of updates"
    assert set(final["episode_return"]) == {"per_seed", "mean", "ci95_low", "ci95_high", "dropped"}
    assert final["episode_return"]["dropped"] == 0 and metadata["diverged"] == []
    assert len(final["episode_return"]["per_seed"]) == 2

    metrics = pd.read_csv(out / "metrics.csv")
    assert list(metrics.columns) == ["seed", "update", "env_steps", *METRIC_NAMES]
    assert len(metrics) == 2 * TINY_UPDATES
    assert metrics["seed"].tolist() == [0] * TINY_UPDATES + [1] * TINY_UPDATES
    assert metrics["update"].tolist() == list(range(TINY_UPDATES)) * 2
    assert (metrics["env_steps"] == (metrics["update"] + 1) * TINY_BATCH).all()
    assert metrics["loss"].notna().all() and metrics["learning_rate"].iloc[0] == pytest.approx(2.5e-4)
    per_seed = metrics.pivot(index="seed", columns="update", values="episode_return").to_numpy()
    # 8 updates, 5% -> 0.4 -> rounded up to 1: the final value is the last update's return; mean and CI over the 2 seeds
    np.testing.assert_allclose(final["episode_return"]["per_seed"], per_seed[:, -1])
    mean, low, high = bootstrap_ci(final["episode_return"]["per_seed"])
    assert final["episode_return"]["mean"] == pytest.approx(np.mean(per_seed[:, -1])) == pytest.approx(mean)
    assert (final["episode_return"]["ci95_low"], final["episode_return"]["ci95_high"]) == pytest.approx((low, high))
    printed = f"mean over 2 seeds {mean:.3f}  (95% bootstrap CI [{low:.3f}, {high:.3f}])"
    assert printed in proc.stdout

    params = load_params(out / "params.msgpack")
    assert load_params(out).keys() == params.keys() == {"params", "obs_stats", "seeds"}
    leaves = [params["obs_stats"][k] for k in ("mean", "var", "count")]
    stack = [params["params"]]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            stack.extend(node.values())
        else:
            leaves.append(node)
    assert len(leaves) > 3
    for leaf in leaves:
        assert isinstance(leaf, np.ndarray) and leaf.shape[0] == 2
    assert params["obs_stats"]["mean"].shape == (2, 4)  # CartPole observations
    assert params["seeds"].tolist() == [0, 1]

    evaluation = pd.read_csv(out / "evaluation.csv")  # 16 fresh episodes per seed and policy (the default)
    assert (
        list(evaluation.columns) == ["seed", "policy", "episode", "return", "length"] and len(evaluation) == 2 * 2 * 16
    )
    assert (evaluation["return"] == evaluation["length"]).all()  # CartPole: +1 per step
    assert set(evaluation.policy) == {"stochastic", "deterministic"} and "evaluation (16 fresh episodes" in proc.stdout


def test_final_values_over_several_updates_by_hand():
    """The CLI's final values (printed, metadata.json) on windows longer than the end-to-end run's single update."""
    from ppo_jax.lm.task import RLHF
    from ppo_jax.runs import final_values

    # PPO, 60 updates: 5% of 60 = 3 (not ceil(3.0000000000000004) = 4): updates 57, 58, 59, NaN skipped.
    ret = np.stack([np.arange(60.0), 100.0 + np.arange(60.0)])
    ret[1, 58] = np.nan
    hand = [(57 + 58 + 59) / 3, (157 + 159) / 2]  # 58, 158
    final = final_values(PPO, {"episode_return": ret}, 60)
    assert set(final) == {"episode_return"}
    np.testing.assert_allclose(final["episode_return"]["per_seed"], hand)
    assert final["episode_return"]["mean"] == pytest.approx(108.0)
    # From metrics.csv the CLI reads only the window (storage.run_dir.read_final_window): the same values.
    windowed = final_values(PPO, {"episode_return": ret[:, -3:]}, 60)
    np.testing.assert_allclose(windowed["episode_return"]["per_seed"], hand)

    # RLHF, 25 updates: 10% of 25 = 2.5 -> 3 updates: 22, 23, 24; metric i of seed s is (i + 1) * u + 10 * s.
    metrics = {
        name: np.stack([(i + 1) * np.arange(25.0) + 10 * s for s in range(2)]) for i, name in enumerate(RLHF.reported)
    }
    final = final_values(RLHF, metrics, 25)
    assert list(final) == list(RLHF.reported)
    for i, name in enumerate(RLHF.reported):
        np.testing.assert_allclose(final[name]["per_seed"], [(i + 1) * 23.0, (i + 1) * 23.0 + 10], err_msg=name)


def test_existing_run_dir_needs_force(run_dir, tmp_path):
    out = tmp_path / "run"
    shutil.copytree(run_dir[0], out)
    before = snapshot(out)

    proc = cli("train", *TINY, "--no-progress", "--out", str(out))
    assert proc.returncode != 0
    assert "--force" in proc.stderr and "not empty" in proc.stderr and "Traceback" not in proc.stderr
    assert snapshot(out) == before

    proc = cli("train", *TINY, "--no-progress", "--seed", "7", "--out", str(out), "--force")
    assert proc.returncode == 0, proc.stderr
    assert "update " not in proc.stderr  # --no-progress: nothing reported (the same program, reporter disabled)
    assert "  seed 7: " in proc.stdout and "episode_return: mean over" not in proc.stdout  # 1 seed: no mean
    assert json.loads((out / "config.json").read_text())["seeds"] == [7]
    assert len(pd.read_csv(out / "metrics.csv")) == TINY_UPDATES
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]  # old run and temporary dir removed


# ----------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "args, expected",
    [
        (["--env", "CartPole-v2"], ["unknown environment", "CartPole-v1"]),
        (["--bogus-flag", "3"], ["Unrecognized options", "--bogus-flag"]),
    ],
)
def test_bad_flags_exit_with_a_clear_message(args, expected, tmp_path):  # a real process: its exit status, no traceback
    out = tmp_path / "run"
    proc = cli("train", *TINY, *args, "--out", str(out), timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    for text in expected:
        assert text in proc.stderr
    if not args[0].startswith("--bogus"):
        assert proc.stderr.startswith("error: ")
    assert not out.exists()


@pytest.mark.parametrize(
    "args, expected",
    [
        (["--env", "brax/halfcheeta"], ["unknown environment", "brax/halfcheetah"]),
        (["--preset", "mujoco"], ["preset mujoco", "CartPole-v1 has discrete actions"]),
        (["--preset", "brax", "--env", "Pendulum-v1"], ["preset brax", "brax/halfcheetah", "none for Pendulum-v1"]),
        (["--preset", "atari", "--env", "Pendulum-v1"], ["unknown preset 'atari'", "mujoco, ppo1, brax"]),
        (["--action-dist", "tanh_gaussian"], ["action_dist tanh_gaussian", "CartPole-v1 has discrete ones"]),
        (["--shared-torso", "--critic-hidden-sizes", "8"], ["critic_hidden_sizes", "excludes shared_torso"]),
        (["--head-hidden-sizes", "0"], ["head_hidden_sizes must be positive integers", "got (0)"]),
        (["--num-minibatches", "3"], ["num_minibatches=3", "Choose num_minibatches"]),
        (["--clip-eps", "0"], ["clip_eps must be > 0"]),
        (["--gamma", "1.5"], ["gamma must be <= 1"]),
        (["--seeds", "0"], ["--seeds must be a positive integer"]),
    ],
)
def test_bad_envs_presets_and_distributions_are_refused_before_compiling(args, expected, tmp_path, capsys):
    from ppo_jax.cli import main  # in process: the same path as the subprocess cases above, without the start-up

    out = tmp_path / "run"
    assert main(["train", *TINY, *args, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and all(text in err for text in expected), err
    assert not out.exists()


def test_a_preset_sets_the_defaults_and_flags_override_it(tmp_path):
    # Two updates of the PPO paper's MuJoCo preset on Pendulum (2048 steps), its horizon overridden.
    out = tmp_path / "run"
    proc = cli(
        "train",
        "--env",
        "Pendulum-v1",
        "--preset",
        "mujoco",
        "--num-steps",
        "256",
        "--num-minibatches",
        "4",
        "--total-timesteps",
        "512",
        "--eval-episodes",
        "0",
        "--out",
        str(out),
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("preset: mujoco\nPendulum-v1: 1 seed x 2 updates x 256 env steps")
    # Table 3's values where no flag overrides them (1 env, 10 epochs, Adam 3e-4 constant, no entropy bonus)
    cfg = load_config(out)[1]
    assert (cfg.num_envs, cfg.num_steps, cfg.num_minibatches, cfg.update_epochs, cfg.lr_schedule) == (
        1,
        256,
        4,
        10,
        "constant",
    )
    assert (cfg.lr, cfg.ent_coef, cfg.normalize_obs) == (np.float32(3e-4), 0, True)
    assert "preset" not in json.loads((out / "config.json").read_text())  # config.json: the task, the config, the seeds
    assert json.loads((out / "metadata.json").read_text())["run"]["preset"] == "mujoco"
    help_text = cli("train", "--env", "Pendulum-v1", "--preset", "mujoco", "--help", timeout=120).stdout
    assert "--update-epochs INT" in help_text and "(default: 10)" in help_text and "(default: 2048)" in help_text


def test_help_lists_every_config_field_with_its_docstring():
    proc = cli("train", "--help", timeout=120)
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    for flag in (
        "--clip-eps",
        "--gae-lambda",
        "--lr-schedule",
        "--vf-clip-eps",
        "--force",
        "--seeds",
        "--seed",
        "--out",
    ):
        assert flag in text
    assert "--anneal-lr" not in text
    for name in field_names(PPOConfig):
        assert f"--{name.replace('_', '-')}" in text
    assert "--config." not in text
    assert "GAE lambda, in [0, 1]" in text  # field docstrings become the help text
    assert "--progress, --no-progress" in text
    assert "(default: 0.00025)" in text  # float32 defaults shown as short decimals


def test_envs_lists_environment_ids():
    proc = cli("envs", timeout=120)
    assert proc.returncode == 0, proc.stderr
    names = proc.stdout.split()
    assert "CartPole-v1" in names and "Pendulum-v1" in names


def test_progress_is_a_cli_flag_on_by_default_not_a_config_field():
    from ppo_jax.cli import Train, parse

    assert "progress" not in field_names(PPOConfig)
    args = parse(["train"])
    assert isinstance(args, Train) and args.progress is True and args.seeds == 1 and args.out is None
    assert args.config == PPOConfig()
    args = parse(["train", "--no-progress"])
    assert args.progress is False and args.config == PPOConfig()  # the config is unchanged
    args = parse(
        [
            "train",
            "--no-progress",
            "--lr",
            "1e-3",
            "--hidden-sizes",
            "32",
            "16",
            "--seeds",
            "3",
            "--lr-schedule",
            "constant",
        ]
    )
    assert args.progress is False and args.config.hidden_sizes == (32, 16) and args.seeds == 3
    assert args.config == PPOConfig(lr=1e-3, hidden_sizes=(32, 16), lr_schedule="constant")
    assert isinstance(args.config.lr, np.float32) and args.config.lr == np.float32(1e-3)
    assert args.config.gamma == np.float32(0.99)


def test_a_brax_task_without_the_extra_says_how_to_install_it(monkeypatch, capsys):
    from ppo_jax.cli import main
    from ppo_jax.rl import brax_envs

    monkeypatch.setattr(brax_envs, "available", lambda: False)
    assert main(["train", "--env", "brax/hopper", "--total-timesteps", "1024"]) == 2
    assert 'pip install "ppo-jax[brax]"' in capsys.readouterr().err
