"""The run directory (``ppo_jax.storage.run_dir``) in-process: written complete or not at all, read back exactly.

Outputs are faked in NumPy (what ``jax.vmap(task.train)`` returns), so nothing compiles here.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from ppo_jax.errors import ConfigError
from ppo_jax.lm.config import RlhfConfig
from ppo_jax.lm.metrics import METRIC_NAMES as RLHF_METRIC_NAMES
from ppo_jax.lm.task import RLHF
from ppo_jax.rl.config import PPOConfig
from ppo_jax.rl.normalization import RunningMeanStd
from ppo_jax.rl.task import METRIC_NAMES, PPO
from ppo_jax.storage.atomic import write_json
from ppo_jax.storage.run_dir import (
    config_record,
    load_config,
    load_params,
    metrics_frame,
    prepare_out_dir,
    write_results,
)
from tests.helpers import snapshot


def fake_output(num_seeds: int, cfg: PPOConfig) -> SimpleNamespace:
    """What jax.vmap(train) returns, in numpy, without compiling anything."""
    n, u = num_seeds, cfg.num_updates
    params = {"params": {"actor": {"kernel": np.ones((n, 4, 2), np.float32), "bias": np.zeros((n, 2), np.float32)}}}
    metrics = {name: np.arange(n * u, dtype=np.float32).reshape(n, u) for name in METRIC_NAMES}
    metrics["episode_return"][:, 0] = np.nan
    stats = RunningMeanStd(np.zeros((n, 4), np.float32), np.ones((n, 4), np.float32), np.full((n,), 5.0, np.float32))
    return SimpleNamespace(train_state=SimpleNamespace(params=params), obs_stats=stats, metrics=metrics)


def write_run(out, task, cfg, seeds, output, shared=None, metadata=None):
    """What ``ppo_jax.storage.live_run`` writes over a run, in one go."""
    out.mkdir(parents=True)
    write_json(out / "config.json", config_record(task, cfg, seeds))
    write_json(out / "metadata.json", metadata or {})
    metrics_frame(task, cfg, seeds, output.metrics).to_csv(out / "metrics.csv", index=False)
    write_results(out, task=task, seeds=seeds, output=output, shared=shared)


def test_a_run_directory_holds_what_the_docstring_says_and_reads_back(tmp_path):
    cfg = PPOConfig(total_timesteps=1024, num_envs=2, num_steps=64, num_minibatches=2)  # 8 updates of 128 steps
    out = tmp_path / "nested" / "run"
    prepare_out_dir(out, force=False)  # missing parents are fine
    write_run(out, PPO, cfg, [3, 4], fake_output(2, cfg), metadata={"x": float("nan")})
    assert json.loads((out / "metadata.json").read_text()) == {"x": None}  # NaN -> null
    metrics = pd.read_csv(out / "metrics.csv")
    assert list(metrics.columns) == ["seed", "update", "env_steps", *METRIC_NAMES]
    assert metrics["seed"].unique().tolist() == [3, 4] and metrics["episode_return"].isna().sum() == 2
    assert (metrics["env_steps"] == (metrics["update"] + 1) * 128).all()
    params = load_params(out)
    assert params.keys() == {"params", "obs_stats", "seeds"} and params["seeds"].tolist() == [3, 4]
    np.testing.assert_array_equal(params["params"]["params"]["actor"]["kernel"], np.ones((2, 4, 2)))
    assert params["obs_stats"]["count"].tolist() == [5.0, 5.0]
    assert not (out / "evaluation.csv").exists()  # no evaluation given
    assert load_config(out)[2] == [3, 4]

    before = snapshot(out)
    with pytest.raises(ConfigError, match="--force"):
        prepare_out_dir(out, force=False)
    prepare_out_dir(out, force=True)  # a run directory may be replaced; nothing is deleted yet
    assert snapshot(out) == before
    with pytest.raises(ValueError, match="loss"):  # metrics of the wrong length are refused, naming the metric
        broken = fake_output(1, cfg)
        broken.metrics["loss"] = broken.metrics["loss"][:, :3]
        metrics_frame(PPO, cfg, [0], broken.metrics)


def test_config_json_names_the_task_first_and_loads_back(tmp_path):
    cfg = PPOConfig(env="Acrobot-v1", lr=3e-4, hidden_sizes=(32,), lr_schedule="constant")
    record = config_record(PPO, cfg, np.array([0, 5]))
    assert list(record)[0] == "task" and record["task"] == "ppo" and record["seeds"] == [0, 5]
    assert isinstance(record["seeds"][0], int) and record["lr"] == 3e-4 and record["hidden_sizes"] == [32]
    write_json(tmp_path / "config.json", record)
    assert load_config(tmp_path) == load_config(tmp_path / "config.json") == (PPO, cfg, [0, 5])


def test_a_config_json_written_before_the_redesign_still_loads(tmp_path):
    """No "task" key (a PPO run), and the old fields anneal_lr and progress."""
    old = {**PPOConfig().to_dict(), "seeds": [1]}
    del old["lr_schedule"]
    old.update(anneal_lr=False, progress=True)
    (tmp_path / "config.json").write_text(json.dumps(old))
    task, cfg, seeds = load_config(tmp_path)
    assert task is PPO and seeds == [1] and cfg == PPOConfig(lr_schedule="constant")


def test_an_rlhf_run_dir_holds_the_task_its_metrics_and_every_model(tmp_path):
    cfg = RlhfConfig(num_updates=3, num_prompts=16, num_minibatches=2)
    n, u = 2, cfg.num_updates
    model = {"params": {"gru": {"kernel": np.ones((n, 3, 3), np.float32)}}}
    metrics = {name: np.full((n, u), i, np.float32) for i, name in enumerate(RLHF_METRIC_NAMES)}
    output = SimpleNamespace(params={"actor": model, "critic": model}, metrics=metrics)
    shared = SimpleNamespace(
        sft={"params": {"w": np.zeros((2,), np.float32)}}, reward_model={"params": {"w": np.ones((2,), np.float32)}}
    )
    write_run(tmp_path / "run", RLHF, cfg, [0, 1], output, shared)

    assert load_config(tmp_path / "run") == (RLHF, cfg, [0, 1])
    table = pd.read_csv(tmp_path / "run" / "metrics.csv")
    assert list(table.columns) == ["seed", "update", "env_steps", *RLHF_METRIC_NAMES] and len(table) == n * u
    assert table["env_steps"].tolist() == [16, 32, 48] * 2  # sequences: num_prompts per update
    assert (table["learning_rate"] == RLHF_METRIC_NAMES.index("learning_rate")).all()
    params = load_params(tmp_path / "run")
    assert params.keys() == {"actor", "critic", "reference", "reward_model", "seeds"}
    np.testing.assert_array_equal(params["reward_model"]["params"]["w"], [1.0, 1.0])  # shared: no seed axis
    assert params["actor"]["params"]["gru"]["kernel"].shape == (2, 3, 3)


def test_metrics_frame_checks_every_shape():
    cfg = PPOConfig(total_timesteps=1024, num_envs=2, num_steps=64, num_minibatches=2)  # 8 updates
    metrics = fake_output(2, cfg).metrics
    frame = metrics_frame(PPO, cfg, [0, 1], metrics)
    assert frame["update"].tolist() == list(range(8)) * 2 and frame["loss"].tolist() == list(range(16))
    with pytest.raises(ValueError, match=r"expected \(num_seeds, updates\) = \(3, 8\)"):
        metrics_frame(PPO, cfg, [0, 1, 2], metrics)


def test_prepare_out_dir_refusals(tmp_path):
    prepare_out_dir(tmp_path, force=False)  # exists but empty: fine
    (tmp_path / "file.txt").write_text("x")
    with pytest.raises(ConfigError, match="not a directory"):
        prepare_out_dir(tmp_path / "file.txt", force=True)
    for force in (False, True):  # never deletes a directory that is not a run, so never advises --force for one
        with pytest.raises(ConfigError, match="not a ppo-jax run directory.*Choose another --out") as error:
            prepare_out_dir(tmp_path, force=force)
        assert "pass --force" not in str(error.value)
    assert (tmp_path / "file.txt").read_text() == "x"
