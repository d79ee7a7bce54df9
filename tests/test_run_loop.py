"""The segment loop of a run (``ppo_jax.run_loop``): metrics stream to disk, so host memory does not grow with the run."""

from __future__ import annotations

import tracemalloc

import jax
import jax.numpy as jnp
import pandas as pd

from ppo_jax.rl.config import PPOConfig
from ppo_jax.rl.task import PPO
from ppo_jax.run_loop import run_segments
from ppo_jax.segments import compile_segments
from ppo_jax.storage.checkpoints import Checkpoints
from ppo_jax.storage.live_run import LiveRun
from ppo_jax.storage.run_dir import config_record

SEEDS = list(range(8))


def peak_bytes_of_a_run(tmp_path, num_updates: int) -> tuple[int, pd.DataFrame]:
    """Peak Python/numpy memory (tracemalloc) of a run's segment loop, after compiling: 10-update segments, 10 checkpoints.

    (Orbax keeps ~13 KiB per checkpoint written in a process, so the number of checkpoints is the same for every length.)
    """
    cfg = PPOConfig(total_timesteps=num_updates * 16, num_envs=2, num_steps=8, num_minibatches=1, update_epochs=1)
    keys = jnp.stack([jax.random.key(s) for s in SEEDS])
    segments = compile_segments(PPO, cfg, keys, None, 10)
    run = LiveRun.start(tmp_path / f"run{num_updates}", config=config_record(PPO, cfg, SEEDS), metadata={})
    carry = segments.init(cfg, keys, None)
    checkpoints = Checkpoints(run.checkpoint_dir)
    tracemalloc.start()
    try:
        result = run_segments(
            segments, PPO, cfg, SEEDS, carry, None, run=run, checkpoints=checkpoints, checkpoint_every=num_updates // 10
        )
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        # Orbax's writer threads must be idle before tracing stops: on Python 3.11, stopping tracemalloc while
        # another thread allocates crashes the interpreter (CPython gh-128679, fixed in 3.12.9 / 3.13.2).
        checkpoints.close()
        tracemalloc.stop()
    assert result.metrics is None  # they went to metrics.csv
    return peak, pd.read_csv(run.metrics_path)


def test_host_memory_is_flat_in_the_number_of_updates(tmp_path):
    short_peak, short = peak_bytes_of_a_run(tmp_path, 100)
    long_peak, long = peak_bytes_of_a_run(tmp_path, 1000)
    assert len(short) == len(SEEDS) * 100 and len(long) == len(SEEDS) * 1000
    assert (long.groupby("seed").update.apply(sorted) == pd.Series([list(range(1000))] * len(SEEDS))).all()
    kept = len(SEEDS) * 1000 * len(PPO.metric_names) * 4  # the long run's metrics, had they stayed in memory: 544 kB
    assert long_peak < short_peak + kept / 3, (short_peak, long_peak, kept)


def test_a_stop_ends_the_run_after_the_segment_in_flight_without_dispatching_another(monkeypatch):
    """XLA:CPU runs a segment with host callbacks as it is dispatched: a signal during segment 1 stops after it."""
    import contextlib
    import signal

    import numpy as np
    import pytest

    from ppo_jax import run_loop

    requested = [0]
    monkeypatch.setattr(run_loop, "stop_requests", lambda: contextlib.nullcontext(requested))

    class Segments:  # 3 segments of 10 updates; a signal arrives while the first one runs
        length, num_updates, dispatched = 10, 30, []

        def starts(self, first=0):
            return range(first, self.num_updates, self.length)

        def dispatch(self, cfg, carry, first, shared):
            self.dispatched.append(first)
            requested[0] = signal.SIGINT
            return carry + 1, {"loss": np.zeros((1, self.length))}

        def fetch(self, metrics, first):
            return metrics

    class Checkpoints:
        saved = []

        def save(self, update, carry, meta):
            self.saved.append((update, carry))

        def wait(self):
            pass

    segments, checkpoints = Segments(), Checkpoints()
    with pytest.raises(run_loop.Stopped) as stopped:
        run_loop.run_segments(segments, PPO, None, [0], 0, None, checkpoints=checkpoints)
    assert stopped.value.update == 10 and stopped.value.signum == signal.SIGINT
    assert segments.dispatched == [0] and checkpoints.saved == [(10, 1)]  # the state after segment 1, nothing more
