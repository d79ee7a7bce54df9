"""The contract every ``Task`` keeps, checked for each task in ``ppo_jax.task_registry.TASKS`` on a tiny config,
and for PPO with a recurrent policy (``ppo_gru``: a GRU on Pendulum without its velocity).

* ``jit(vmap(train))`` over (setting, seed) pairs -- two settings of a traced
  field, two seeds -- gives the metrics of the separate runs;
* two values of every traced field share one trace (no recompilation);
* the same config and key give identical metrics;
* ``on_update`` is called once per update of every run, with that update's metrics;
* the run in segments of 3 updates (one compiled program, the last segment
  masked), its state checkpointed and restored between two segments, gives the
  separate run, and going on from the restored state gives the same bits;
* a sweep of the task, interrupted after its first chunk, resumes to the table
  of the separate runs (their metrics and their evaluation), and its summary
  holds the final values of the task's reported metrics.
"""

from __future__ import annotations

import collections

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest

from ppo_jax import sweep
from ppo_jax.segments import compile_segments
from ppo_jax.storage.checkpoints import Checkpoints
from ppo_jax.sweep import sweep_dir
from ppo_jax.sweep.program import Shared, prepare_shared_once
from ppo_jax.task_registry import TASKS
from tests.helpers import interrupt_after_first_chunk

TINY = {  # PPO on a continuous task with observation normalization and reward scaling: every state under vmap
    "ppo": {
        "env": "Pendulum-v1",
        "total_timesteps": 512,
        "num_envs": 2,
        "num_steps": 32,
        "num_minibatches": 2,
        "update_epochs": 1,
        "normalize_obs": True,
        "normalize_reward": True,
    },
    "rlhf": {
        "num_updates": 4,
        "num_prompts": 8,
        "num_minibatches": 2,
        "update_epochs": 1,
        "hidden_dim": 8,
        "embed_dim": 8,
        "sft_steps": 5,
        "rm_steps": 5,
        "pretrain_batch": 8,
    },
    "lm": {
        "digits": 1,
        "num_updates": 4,
        "num_prompts": 4,
        "group_size": 2,
        "num_minibatches": 2,
        "model_dim": 8,
        "num_heads": 2,
        "num_layers": 1,
        "sft_steps": 5,
        "sft_eval_every": 5,
        "pretrain_batch": 8,
        "eval_prompts": 4,
        "dynamic_sampling": True,
    },
}
TINY["ppo_gru"] = {**TINY["ppo"], "network": "gru", "rnn_hidden_size": 8, "mask_velocity": True}
CASES = {**{name: name for name in TASKS}, "ppo_gru": "ppo"}  # case -> task
AXIS = {"ppo": ("clip_eps", [0.1, 0.3]), "rlhf": ("beta", [0.0, 0.3]), "lm": ("clip_eps_high", [0.2, 0.3])}
SEEDS = (3, 4)


def other_value(task, cfg, name):
    """A value of traced field ``name`` that ``cfg`` accepts and that differs from its own."""
    value = float(getattr(cfg, name))
    for candidate in (value * 0.5, value * 1.5, value + 0.1, 0.5, value + 1.0):  # + 1: a whole number (top_k)
        if candidate != value:
            try:
                task.validate(cfg.replace(**{name: np.float32(candidate)}))
                return np.float32(candidate)
            except ValueError:
                continue
    raise AssertionError(f"no second valid value for {name}")


@pytest.fixture(scope="module", params=sorted(CASES))
def case(request):
    """(task, base config, shared, {(setting, seed): (metrics, evaluation, params) of a separate run}, run, traces)."""
    task = TASKS[CASES[request.param]]
    base = task.validate(task.config_class(**TINY[request.param]))
    shared = prepare_shared_once(task, base, Shared("once", 0))  # the sweep's own (cached) pretraining
    traces = []

    def single(cfg, key, shared):
        traces.append(1)  # runs once per trace
        output = task.train(cfg, key, shared)
        return output.metrics, task.evaluate(cfg, output, key), task.params_tree(output, shared)

    run = jax.jit(single)
    name, values = AXIS[task.name]
    separate = {}
    for i, value in enumerate(values):
        cfg = base.replace(**{name: np.float32(value)})
        for seed in SEEDS:
            separate[(i, seed)] = jax.device_get(run(cfg, jax.random.key(seed), shared))
    assert set(separate[(0, SEEDS[0])][1]) == set(task.eval_names)
    return task, base, shared, separate, run, traces


def test_vmap_over_settings_and_seeds_equals_separate_runs_and_calls_on_update_per_update(case):
    task, base, shared, separate, _, _ = case
    name, values = AXIS[task.name]
    pairs = [(i, seed) for i in range(len(values)) for seed in SEEDS]
    cfgs = [base.replace(**{name: np.float32(values[i])}) for i, _ in pairs]
    stacked = jax.tree.map(lambda *x: jnp.stack(x), *cfgs)
    keys = jnp.stack([jax.random.key(seed) for _, seed in pairs])
    calls = collections.defaultdict(list)

    def on_update(update_idx, metrics):
        calls[int(update_idx)].append(float(metrics[task.score]))

    def run(c, k):
        output = task.train(c, k, shared, on_update=on_update)
        return output.metrics, task.params_tree(output, shared)

    out, params = jax.device_get(jax.block_until_ready(jax.jit(jax.vmap(run))(stacked, keys)))
    for p, pair in enumerate(pairs):
        for metric in task.metric_names:
            np.testing.assert_allclose(
                out[metric][p], separate[pair][0][metric], rtol=2e-4, atol=2e-5, err_msg=f"{pair} {metric}"
            )
        chex.assert_trees_all_close(jax.tree.map(lambda x, p=p: x[p], params), separate[pair][2], rtol=2e-4, atol=2e-5)
    num_updates = task.num_updates(base)
    assert sorted(calls) == list(range(num_updates))
    for u, scores in calls.items():  # once per run, with that update's score
        expected = sorted(float(out[task.score][p][u]) for p in range(len(pairs)))
        np.testing.assert_allclose(sorted(scores), expected, rtol=1e-6, equal_nan=True)


def test_two_values_of_every_traced_field_share_one_trace(case):
    task, base, shared, _, run, traces = case
    before = len(traces)
    assert before == 1  # the fixture's four runs (two settings x two seeds) traced once
    for name in task.traced_fields:
        run(base.replace(**{name: other_value(task, base, name)}), jax.random.key(0), shared)
    assert len(traces) == before, "a traced field changed the program"


def test_same_config_and_key_give_identical_metrics(case):
    task, base, shared, separate, run, _ = case
    name, values = AXIS[task.name]
    again = jax.device_get(run(base.replace(**{name: np.float32(values[0])}), jax.random.key(SEEDS[0]), shared))
    for metric in task.metric_names:
        np.testing.assert_array_equal(again[0][metric], separate[(0, SEEDS[0])][0][metric])


@pytest.mark.parametrize("case", ["lm", "ppo", "ppo_gru"], indirect=True)  # rlhf: lm's engine and carry
def test_segments_with_a_checkpoint_between_them_give_the_run(case, tmp_path):
    task, base, shared, separate, _, _ = case
    name, values = AXIS[task.name]
    cfg = base.replace(**{name: np.float32(values[0])})
    keys = jnp.stack([jax.random.key(seed) for seed in SEEDS])
    num_updates = task.num_updates(cfg)
    assert num_updates % 3 and num_updates > 3  # a last, shorter segment: the masked scan
    segments = compile_segments(task, cfg, keys, shared, 3)
    carry, head = segments.advance(cfg, segments.init(cfg, keys, shared), 0, shared)
    checkpoints = Checkpoints(tmp_path / "checkpoints")
    checkpoints.save(3, carry, {"note": "after the first segment"})
    restored, meta = checkpoints.restore(like=carry)
    assert meta == {"note": "after the first segment", "update": 3}

    def go_on(carry):
        parts = []
        for first in segments.starts(3):
            carry, metrics = segments.advance(cfg, carry, first, shared)
            parts.append(metrics)
        return carry, {k: np.concatenate([head[k], *(p[k] for p in parts)], axis=1) for k in head}

    (carry, metrics), (carry_restored, metrics_restored) = go_on(carry), go_on(restored)
    chex.assert_trees_all_equal(jax.device_get(carry), jax.device_get(carry_restored))  # bit for bit
    chex.assert_trees_all_equal(metrics, metrics_restored)
    params = jax.device_get(jax.vmap(lambda c: task.params_tree(task.finish(cfg, c, {}), shared))(carry))
    for j, seed in enumerate(SEEDS):
        for metric in task.metric_names:
            assert metrics[metric].shape == (len(SEEDS), num_updates)
            np.testing.assert_allclose(
                metrics[metric][j], separate[(0, seed)][0][metric], rtol=2e-4, atol=2e-5, err_msg=metric
            )
        chex.assert_trees_all_close(
            jax.tree.map(lambda x, j=j: x[j], params), separate[(0, seed)][2], rtol=2e-4, atol=2e-5
        )


@pytest.mark.parametrize("case", ["lm", "ppo", "ppo_gru"], indirect=True)  # rlhf: lm's engine and carry
def test_an_interrupted_sweep_resumes_to_the_separate_runs(case, tmp_path, monkeypatch):
    task, base, _, separate, _, _ = case
    name, values = AXIS[task.name]
    variant = "ppo_gru" if getattr(base, "network", None) == "gru" else task.name
    spec = {"base": TINY[variant], "seeds": list(SEEDS), "grid": {name: values}}
    if task.name != "ppo":
        spec["task"] = task.name
    if task.shared_fields:
        spec["pretrain"] = {"seed": 0}
    out, cache = tmp_path / "sweep", tmp_path / "xla"
    write_chunk = sweep_dir.write_chunk
    interrupt_after_first_chunk(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        sweep.run(spec, out, chunk_size=2, cache_dir=cache, progress=False)
    assert len(sweep_dir.done_chunks(out)) == 1 and not (out / sweep_dir.TABLE_FILE).exists()
    monkeypatch.setattr(sweep_dir, "write_chunk", write_chunk)
    table = sweep.run(spec, out, resume=True, chunk_size=2, cache_dir=cache, progress=False)
    assert len(sweep_dir.done_chunks(out)) == 2 and (out / sweep_dir.TABLE_FILE).exists()
    pd.testing.assert_frame_equal(table, pd.read_parquet(out / sweep_dir.TABLE_FILE))
    for (setting, seed), (metrics, evaluation, _) in separate.items():
        rows = table[(table.setting_id == setting) & (table.seed == seed)].sort_values("update")
        for metric, column in sweep.table.metric_columns(task).items():
            np.testing.assert_allclose(rows[column].to_numpy(), metrics[metric], rtol=2e-4, atol=2e-5, err_msg=metric)
        for metric, value in evaluation.items():  # on the run's last row only
            assert rows[metric].iloc[:-1].isna().all()
            assert rows[metric].iloc[-1] == pytest.approx(float(value), rel=1e-4, abs=1e-5, nan_ok=True), metric
    summary = pd.read_csv(out / sweep_dir.SUMMARY_FILE)
    assert len(summary) == len(values) and (summary.seeds == len(SEEDS)).all()
    # A run's final value: the mean over its last final_fraction of updates, rounded up (ppo_jax/final_values.py).
    # PPO: 512 / (2 * 32) = 8 updates, 5% -> 0.4 -> the last update; RLHF, LM: 4 updates, 10% -> 0.4 -> the last.
    expected = {"ppo": (8, 0.05), "rlhf": (4, 0.1), "lm": (4, 0.1)}[task.name]
    assert (task.num_updates(base), task.final_fraction) == expected
    window = 1
    for row in summary.itertuples():
        for metric in task.reported:
            finals = [np.nanmean(separate[(row.setting_id, seed)][0][metric][-window:]) for seed in SEEDS]
            assert getattr(row, f"final_{metric}") == pytest.approx(float(np.mean(finals)), rel=1e-4, abs=1e-5), metric
