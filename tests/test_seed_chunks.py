"""A run's seeds advanced a chunk at a time (``ppo_jax.seed_chunks``, ``Segments.chunk_size``)."""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest

from ppo_jax import seed_chunks
from ppo_jax.cli import main
from ppo_jax.errors import ConfigError
from ppo_jax.rl.config import PPOConfig
from ppo_jax.rl.task import PPO
from ppo_jax.segments import compile_segments
from ppo_jax.sweep import calibrate


def test_candidates_and_the_flag_by_hand():
    assert seed_chunks.chunk_candidates(64) == [64, 32, 16]  # halves while they divide, at most 3
    assert seed_chunks.chunk_candidates(12) == [12, 6, 3]
    assert seed_chunks.chunk_candidates(10) == [10, 5]
    assert seed_chunks.chunk_candidates(4) == [4, 2]
    assert seed_chunks.chunk_candidates(7) == [7] and seed_chunks.chunk_candidates(2) == [2]  # never 1 run alone
    assert seed_chunks.parse_chunk_size("auto", 6) == "auto" and seed_chunks.parse_chunk_size("3", 6) == 3
    for bad in ("4", "0", "x"):
        with pytest.raises(ConfigError, match=r"divides --seeds 6 \(1, 2, 3, 6\)"):
            seed_chunks.parse_chunk_size(bad, 6)


def numbers(tree) -> list[np.ndarray]:
    """Every leaf as a numpy array (PRNG keys as their key data)."""
    as_data = lambda x: jax.random.key_data(x) if jnp.issubdtype(x.dtype, jax.dtypes.prng_key) else x  # noqa: E731
    return [np.asarray(as_data(leaf)) for leaf in jax.tree.leaves(tree)]


def run_segments_of(cfg, seeds: list[int], chunk: int, segments=None):
    """The final carry (as numbers) and every segment's metrics of ``seeds`` run in 3-update segments (with
    ``segments``, compiled for as many seeds, or compiled here)."""
    keys = jnp.stack([jax.random.key(s) for s in seeds])
    segments = segments or compile_segments(PPO, cfg, keys, None, 3, chunk_size=chunk)
    carry, metrics = segments.init(cfg, keys, None), []
    for first in segments.starts():
        carry, window = segments.advance(cfg, carry, first, None)
        metrics.append(window)
    return numbers(carry), {name: np.concatenate([m[name] for m in metrics], axis=1) for name in metrics[0]}


def assert_same(a: list[np.ndarray], b: list[np.ndarray]) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x, y)


def test_each_chunk_of_seeds_is_those_seeds_run_on_their_own_bit_for_bit():
    # 4 seeds, 2 at a time, in 2 segments of 3 updates (the second masked past update 5). The reference for
    # each chunk: its 2 seeds as a run of their own (the same program shape, nothing chunked). All 4 in one
    # call agree with them to float32 rounding only.
    cfg = PPOConfig(total_timesteps=6 * 32, num_envs=4, num_steps=8, num_minibatches=2, update_epochs=2)
    chunked, chunked_metrics = run_segments_of(cfg, [0, 1, 2, 3], 2)
    assert all(leaf.shape[0] == 4 for leaf in chunked)
    pair = compile_segments(PPO, cfg, jnp.stack([jax.random.key(s) for s in (0, 1)]), None, 3)  # 2 runs, unchunked
    for rows, seeds in ((slice(0, 2), [0, 1]), (slice(2, 4), [2, 3])):
        alone, alone_metrics = run_segments_of(cfg, seeds, 0, pair)
        assert_same([leaf[rows] for leaf in chunked], alone)
        for name, values in alone_metrics.items():
            np.testing.assert_array_equal(chunked_metrics[name][rows], values, err_msg=name)
    together, _ = run_segments_of(cfg, [0, 1, 2, 3], 0)
    for x, y in zip(together, chunked, strict=True):
        np.testing.assert_allclose(x, y, rtol=1e-4, atol=1e-6)
    with pytest.raises(ValueError, match="does not divide"):
        compile_segments(PPO, cfg, jnp.stack([jax.random.key(s) for s in range(4)]), None, 3, chunk_size=3)


def test_auto_probes_and_chooses_by_the_sweeps_rule(monkeypatch):
    # Probes stubbed (their timing is the machine's): 2 seeds per call "measured" 30% faster than all 4.
    cfg = PPOConfig(total_timesteps=6 * 32, num_envs=4, num_steps=8, num_minibatches=2, update_epochs=2)
    keys = jnp.stack([jax.random.key(s) for s in range(4)])
    probed = []

    def fake_probe(task, cfg, keys, shared, size):
        probed.append(size)
        return calibrate.Probe({4: 100.0, 2: 130.0}[size], 0.01, 0.005)

    monkeypatch.setattr(seed_chunks, "probe", fake_probe)
    small = seed_chunks.choose_chunk_size(PPO, cfg, keys, None, lambda m: None)  # 4 x 6 x 32 = 768 samples
    assert probed == [] and small.chosen == 4 and small.note == "not probed: 768 samples, under 1,000,000"
    monkeypatch.setattr(calibrate, "MIN_PROBE_SAMPLES", 0)
    monkeypatch.setattr(calibrate, "MIN_SWEEP_SECONDS", 0.0)
    monkeypatch.setattr(calibrate, "SHARE", 1e9)
    probe_run = seed_chunks.choose_chunk_size(PPO, cfg, keys, None, lambda m: None)
    assert probed == [4, 2] and probe_run.chosen == 2 and probe_run.rates == [100.0, 130.0]
    # a real probe: one update of the first 2 runs, at least once, timed
    real = seed_chunks.probe(PPO, cfg, keys, None, 2)
    assert real.rate > 0 and real.seconds >= real.compile_seconds > 0


def test_train_chunk_size_flag_runs_each_chunk_as_its_seeds_alone_and_is_recorded(tmp_path, capsys):
    tiny = ["--total-timesteps", "1024", "--num-envs", "2", "--num-steps", "64", "--num-minibatches", "2"]
    tiny += ["--update-epochs", "1", "--no-progress"]
    assert main(["train", *tiny, "--seeds", "4", "--chunk-size", "2", "--out", str(tmp_path / "two")]) == 0
    assert "seeds 2 at a time" in capsys.readouterr().out
    assert main(["train", *tiny, "--seeds", "2", "--seed", "2", "--out", str(tmp_path / "alone")]) == 0
    chunked = pd.read_csv(tmp_path / "two" / "metrics.csv")
    alone = pd.read_csv(tmp_path / "alone" / "metrics.csv")  # seeds 2 and 3, the second chunk's, on their own
    pd.testing.assert_frame_equal(chunked[chunked["seed"] >= 2].reset_index(drop=True), alone, check_exact=True)
    assert json.loads((tmp_path / "two" / "metadata.json").read_text())["run"]["chunk_size"] == 2
    meta = json.loads((tmp_path / "alone" / "metadata.json").read_text())
    assert meta["run"]["chunk_size"] == 2 and "seed_chunks" not in meta  # the default: all seeds in one call
    # auto on a tiny run (4 x 8 updates x 128 = 4,096 samples): not probed, all seeds in one call, recorded
    assert main(["train", *tiny, "--seeds", "4", "--chunk-size", "auto", "--out", str(tmp_path / "auto")]) == 0
    meta = json.loads((tmp_path / "auto" / "metadata.json").read_text())
    assert (
        meta["run"]["chunk_size"] == 4 and meta["seed_chunks"]["note"] == "not probed: 4,096 samples, under 1,000,000"
    )
    capsys.readouterr()
    assert main(["train", *tiny, "--seeds", "4", "--chunk-size", "3", "--out", str(tmp_path / "bad")]) == 2
    assert "divides --seeds 4 (1, 2, 4)" in capsys.readouterr().err and not (tmp_path / "bad").exists()
