"""The ``ppo-jax`` command line, its run directory and the summary statistics.

CLI tests run ``python -m ppo_jax.cli`` in a subprocess with a tiny budget. Only
two of them compile a training program (~10-20 s each on 2 CPU cores): the
end-to-end run (shared by a module fixture), the --force rerun and the progress-bar run.
Everything else fails before compiling or runs in-process without JAX programs.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from ppo_jax.config import PPOConfig, field_names
from ppo_jax.normalization import RunningMeanStd
from ppo_jax.run_dir import load_config, load_params, prepare_out_dir, write_run_dir
from ppo_jax.final_values import bootstrap_ci, final_return
from ppo_jax.train import METRIC_NAMES
from ppo_jax.validation import ConfigError

TINY = ["--total-timesteps", "1024", "--num-envs", "2", "--num-steps", "64", "--num-minibatches", "2", "--update-epochs", "1"]
TINY_UPDATES, TINY_BATCH = 8, 128  # 1024 // (2 * 64), 2 * 64
METADATA_KEYS = {
    "start_time", "end_time", "command", "command_line", "versions", "backend", "devices", "platform",
    "processor", "cpu_count", "git_commit", "git_dirty", "compile_seconds", "run_seconds",
    "env_steps_per_second", "final_return",
}  # fmt: skip


def cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}  # no line wrapping in --help
    return subprocess.run(
        [sys.executable, "-m", "ppo_jax.cli", *args], capture_output=True, text=True, timeout=timeout, env=env
    )


def snapshot(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


# ----------------------------------------------------------------------------- end to end


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    out = tmp_path_factory.mktemp("cli") / "run"
    proc = cli("train", *TINY, "--seeds", "2", "--out", str(out))  # progress bar on: the CLI default
    assert proc.returncode == 0, proc.stderr
    return out, proc


def test_train_writes_a_valid_run_dir(run_dir):
    out, proc = run_dir
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "evaluation.csv", "metadata.json", "metrics.csv", "params.msgpack"]
    assert not [p for p in out.parent.iterdir() if p.name.startswith(".")], "temporary directories left behind"
    assert "compile:" in proc.stdout and "env steps/s" in proc.stdout
    assert "seed 0:" in proc.stdout and "seed 1:" in proc.stdout and "95% bootstrap CI" in proc.stdout
    assert "8/8" in proc.stderr  # the tqdm bar, fed from inside the vmapped program, reached the last update

    # config.json round-trips through PPOConfig.from_dict
    values = json.loads((out / "config.json").read_text())
    assert values.pop("seeds") == [0, 1]
    cfg = PPOConfig.from_dict(values)
    assert (cfg.num_envs, cfg.num_steps, cfg.num_updates, cfg.batch_size) == (2, 64, TINY_UPDATES, TINY_BATCH)
    assert cfg.progress is True and cfg.lr == np.float32(2.5e-4) and values["lr"] == 2.5e-4
    assert cfg.to_dict() == PPOConfig.from_dict(cfg.to_dict()).to_dict()
    assert load_config(out) == (cfg, [0, 1])

    metadata = json.loads((out / "metadata.json").read_text())
    assert METADATA_KEYS <= set(metadata)
    assert {"python", "jax", "jaxlib", "flax", "optax", "gymnax", "ppo_jax"} <= set(metadata["versions"])
    assert metadata["backend"] in ("cpu", "gpu", "tpu", "cuda", "rocm") and metadata["devices"]
    assert metadata["command"][:2] == ["ppo-jax", "train"] and "--seeds" in metadata["command"]
    assert metadata["compile_seconds"] > 0 and metadata["run_seconds"] > 0
    assert len(metadata["final_return"]["per_seed"]) == 2

    metrics = pd.read_csv(out / "metrics.csv")
    assert list(metrics.columns) == ["seed", "update", "env_steps", *METRIC_NAMES]
    assert len(metrics) == 2 * TINY_UPDATES
    assert metrics["seed"].tolist() == [0] * TINY_UPDATES + [1] * TINY_UPDATES
    assert metrics["update"].tolist() == list(range(TINY_UPDATES)) * 2
    assert (metrics["env_steps"] == (metrics["update"] + 1) * TINY_BATCH).all()
    assert metrics["loss"].notna().all() and metrics["learning_rate"].iloc[0] == pytest.approx(2.5e-4)
    per_seed = metrics.pivot(index="seed", columns="update", values="episode_return").to_numpy()
    np.testing.assert_allclose(final_return(per_seed), metadata["final_return"]["per_seed"])

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
    assert list(evaluation.columns) == ["seed", "policy", "episode", "return", "length"] and len(evaluation) == 2 * 2 * 16
    assert (evaluation["return"] == evaluation["length"]).all()  # CartPole: +1 per step
    assert set(evaluation.policy) == {"stochastic", "deterministic"} and "evaluation (16 fresh episodes" in proc.stdout


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
    assert json.loads((out / "config.json").read_text())["seeds"] == [7]
    assert len(pd.read_csv(out / "metrics.csv")) == TINY_UPDATES
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]  # old run and temporary dir removed


# ----------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "args, expected",
    [
        (["--env", "CartPole-v2"], ["unknown environment", "CartPole-v1"]),
        (["--num-minibatches", "3"], ["num_minibatches=3", "Choose num_minibatches"]),
        (["--clip-eps", "0"], ["clip_eps must be > 0"]),
        (["--gamma", "1.5"], ["gamma must be <= 1"]),
        (["--seeds", "0"], ["--seeds must be a positive integer"]),
        (["--bogus-flag", "3"], ["Unrecognized options", "--bogus-flag"]),
    ],
)
def test_bad_flags_exit_with_a_clear_message(args, expected, tmp_path):
    out = tmp_path / "run"
    proc = cli("train", *TINY, *args, "--out", str(out), timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    for text in expected:
        assert text in proc.stderr
    if not args[0].startswith("--bogus"):
        assert proc.stderr.startswith("error: ")
    assert not out.exists()


def test_help_lists_every_config_field_with_its_docstring():
    proc = cli("train", "--help", timeout=120)
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    for flag in ("--clip-eps", "--gae-lambda", "--anneal-lr, --no-anneal-lr", "--vf-clip-eps", "--force", "--seeds", "--seed", "--out"):
        assert flag in text
    for name in field_names():
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


def test_progress_defaults_on_in_the_cli():
    from ppo_jax.cli import Train, parse

    args = parse(["train"])
    assert isinstance(args, Train) and args.config.progress is True and args.seeds == 1 and args.out is None
    args = parse(["train", "--no-progress", "--lr", "1e-3", "--hidden-sizes", "32", "16", "--seeds", "3"])
    assert args.config.progress is False and args.config.hidden_sizes == (32, 16) and args.seeds == 3
    assert isinstance(args.config.lr, np.float32) and args.config.lr == np.float32(1e-3)
    assert args.config.gamma == np.float32(0.99)


# ----------------------------------------------------------------------------- run directory, in-process


def fake_output(num_seeds: int, cfg: PPOConfig) -> SimpleNamespace:
    """What jax.vmap(train) returns, in numpy, without compiling anything."""
    n, u = num_seeds, cfg.num_updates
    params = {"params": {"actor": {"kernel": np.ones((n, 4, 2), np.float32), "bias": np.zeros((n, 2), np.float32)}}}
    metrics = {name: np.arange(n * u, dtype=np.float32).reshape(n, u) for name in METRIC_NAMES}
    metrics["episode_return"][:, 0] = np.nan
    stats = RunningMeanStd(np.zeros((n, 4), np.float32), np.ones((n, 4), np.float32), np.full((n,), 5.0, np.float32))
    return SimpleNamespace(train_state=SimpleNamespace(params=params), obs_stats=stats, metrics=metrics)


def test_write_run_dir_replaces_only_with_force(tmp_path):
    cfg = PPOConfig(total_timesteps=1024, num_envs=2, num_steps=64, num_minibatches=2)
    out = tmp_path / "nested" / "run"
    prepare_out_dir(out, force=False)  # missing parents are fine
    write_run_dir(out, cfg=cfg, seeds=[3, 4], output=fake_output(2, cfg), metadata={"x": float("nan")}, force=False)
    assert json.loads((out / "metadata.json").read_text()) == {"x": None}  # NaN -> null
    metrics = pd.read_csv(out / "metrics.csv")
    assert metrics["seed"].unique().tolist() == [3, 4] and metrics["episode_return"].isna().sum() == 2
    params = load_params(out)
    np.testing.assert_array_equal(params["params"]["params"]["actor"]["kernel"], np.ones((2, 4, 2)))
    assert params["obs_stats"]["count"].tolist() == [5.0, 5.0]

    before = snapshot(out)
    with pytest.raises(ConfigError, match="--force"):
        prepare_out_dir(out, force=False)
    with pytest.raises(ConfigError, match="--force"):
        write_run_dir(out, cfg=cfg, seeds=[0], output=fake_output(1, cfg), metadata={}, force=False)
    # A write that fails half way leaves the old run and no temporary directory.
    broken = fake_output(1, cfg)
    broken.metrics["loss"] = broken.metrics["loss"][:, :3]
    with pytest.raises(ValueError, match="loss"):
        write_run_dir(out, cfg=cfg, seeds=[0], output=broken, metadata={}, force=True)
    assert snapshot(out) == before and os.listdir(out.parent) == ["run"]

    write_run_dir(out, cfg=cfg, seeds=[9], output=fake_output(1, cfg), metadata={}, force=True)
    assert load_config(out)[1] == [9] and os.listdir(out.parent) == ["run"]


def test_prepare_out_dir_refusals(tmp_path):
    prepare_out_dir(tmp_path, force=False)  # exists but empty: fine
    (tmp_path / "file.txt").write_text("x")
    with pytest.raises(ConfigError, match="not a directory"):
        prepare_out_dir(tmp_path / "file.txt", force=True)
    with pytest.raises(ConfigError, match="pass --force"):
        prepare_out_dir(tmp_path, force=False)
    with pytest.raises(ConfigError, match="not a ppo-jax run directory"):
        prepare_out_dir(tmp_path, force=True)  # never deletes a directory that is not a run


# ----------------------------------------------------------------------------- statistics


def test_bootstrap_ci_hand_worked_cases():
    assert bootstrap_ci([3.0, 3.0, 3.0, 3.0]) == (3.0, 3.0, 3.0)  # identical values: zero width

    mean, low, high = bootstrap_ci([1.0, 2.0, 3.0, 4.0])
    assert mean == 2.5 and 1.0 <= low <= 2.5 <= high <= 4.0
    # By hand: a resample's sum S of 4 draws from {1,2,3,4} has P(S <= 5) = 5/256 = 2.0% and
    # P(S <= 6) = 15/256 = 5.9%, so the 2.5% quantile of the resampled mean is 6/4 = 1.5;
    # by symmetry the 97.5% quantile is 3.5.
    assert (low, high) == (1.5, 3.5)
    assert bootstrap_ci([1.0, 2.0, 3.0, 4.0]) == (mean, low, high)  # fixed resampling seed

    m, lo, hi = bootstrap_ci([5.0, np.nan])  # one finite value: a mean, no interval
    assert m == 5.0 and np.isnan(lo) and np.isnan(hi)
    m, lo, hi = bootstrap_ci([])
    assert np.isnan(m) and np.isnan(lo) and np.isnan(hi)


def test_final_return_is_the_mean_over_the_last_5_percent_of_updates():
    returns = np.arange(200, dtype=np.float64).reshape(2, 100)  # 100 updates -> last 5
    np.testing.assert_allclose(final_return(returns), [97.0, 197.0])
    assert final_return(np.array([1.0, 2.0, 3.0])) == 3.0  # at least one update
    assert final_return(np.arange(60.0)) == 58.0  # ceil(0.05 * 60) = 3 updates: 57, 58, 59
    assert final_return(np.array([0.0] * 19 + [4.0])) == 4.0  # 20 updates -> the last one
    assert final_return(np.array([1.0, 2.0, np.nan, 6.0]), fraction=0.5) == 6.0  # NaN skipped
    assert np.isnan(final_return(np.array([1.0, np.nan])))
    assert final_return(np.arange(10.0), fraction=1.0) == 4.5
    with pytest.raises(ValueError):
        final_return(np.arange(10.0), fraction=0.0)
