"""``ppo_jax.runs.run``: the library call behind ``ppo-jax train`` writes the same run directory, no CLI involved."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from ppo_jax.rl.config import PPOConfig
from ppo_jax.runs import RunOptions, run
from ppo_jax.task_registry import get_task

UPDATES = 4  # 512 // (2 * 64)


def test_run_writes_a_run_directory_and_returns_its_final_values(tmp_path):
    cfg = PPOConfig(env="CartPole-v1", total_timesteps=512, num_envs=2, num_steps=64, num_minibatches=2)
    lines, reported = [], []
    result = run(
        get_task("ppo"),
        cfg,
        RunOptions(seeds=[3, 5]),
        out=tmp_path / "run",
        say=lambda *parts: lines.append(" ".join(map(str, parts))),
        report=reported.append,
    )
    assert result.run_dir == tmp_path / "run" and result.stopped_by is None and result.diverged == {}
    assert len(reported) == 1 and reported[0].final is result.final and reported[0].run_dir is None  # before completion
    assert any(line.startswith("CartPole-v1: 2 seeds x 4 updates") for line in lines)
    assert json.loads((tmp_path / "run" / "config.json").read_text())["env"] == "CartPole-v1"
    metrics = pd.read_csv(tmp_path / "run" / "metrics.csv")
    assert len(metrics) == 2 * UPDATES and sorted(set(metrics["seed"])) == [3, 5]
    last = metrics[metrics["update"] == UPDATES - 1].set_index("seed")["episode_return"]  # 5% of 4 updates: the last
    np.testing.assert_allclose(result.final["episode_return"]["per_seed"], [last[3], last[5]])


def test_a_run_stopped_before_its_first_update_says_interrupted_and_resumes_from_the_start(tmp_path, monkeypatch):
    """A signal while compiling (or pretraining): stopped_by, status interrupted; resume gives the uninterrupted run."""
    import signal

    import ppo_jax.segments
    from ppo_jax.run_loop import Interrupted

    cfg = PPOConfig(env="CartPole-v1", total_timesteps=512, num_envs=2, num_steps=64, num_minibatches=2)
    task, options = get_task("ppo"), RunOptions(seeds=[3, 5])
    reference = run(task, cfg, options, out=tmp_path / "reference").run_dir

    def stopped(*args, **kwargs):
        raise Interrupted(signal.SIGTERM)  # what interrupts() raises on SIGTERM while the segments compile

    with monkeypatch.context() as patch:
        patch.setattr(ppo_jax.segments, "compile_segments", stopped)
        lines = []
        result = run(task, cfg, options, out=tmp_path / "run", say=lambda *parts: lines.append(" ".join(parts)))
    out = tmp_path / "run"
    assert result.stopped_by == signal.SIGTERM and result.run_dir == out and result.final == {}
    assert f"stopped by SIGTERM while compiling, before the first update; {out} says interrupted" in lines
    assert f"continue with: ppo-jax train --out {out} --resume" in lines
    assert json.loads((out / "metadata.json").read_text())["status"] == "interrupted"
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "metadata.json"]

    lines.clear()
    resumed = run(task, cfg, options, out=out, resume=True, say=lambda *parts: lines.append(" ".join(parts)))
    assert resumed.stopped_by is None and f"resuming {out} from the start: it stopped before its first update" in lines
    metadata = json.loads((out / "metadata.json").read_text())
    assert metadata["status"] == "complete" and [r["update"] for r in metadata["resumed"]] == [0]
    for name in ("metrics.csv", "params.msgpack"):
        assert (out / name).read_bytes() == (reference / name).read_bytes(), name
