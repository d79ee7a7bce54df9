"""Running sweeps: equal to separate runs, sharded equal to unsharded, kill and resume, parts, the directory.

Cost on 2 CPU cores (~2.5 min): three distinct programs are compiled (~20 s each):
the tiny spec at 2 pairs per chunk, the same on 4 forced CPU devices (a
subprocess, since XLA_FLAGS must be set before JAX starts) and a longer spec at
1 pair per chunk for the kill test; plus one ``jax.jit(train)`` for the
reference runs. Everything else loads those programs from a compilation cache
shared by the module (PPO_JAX_CACHE_DIR, inherited by subprocesses).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import jax
import numpy as np
import pandas as pd
import pytest

from ppo_jax import sweep
from ppo_jax.cli import main
from ppo_jax.final_values import bootstrap_ci
from ppo_jax.rl.task import EVAL_NAMES, PPO
from ppo_jax.sweep.program import window_metrics
from ppo_jax.sweep.table import metric_columns
from tests.helpers import ROOT, faked_slurm_step

METRIC_COLUMNS = metric_columns(PPO)
TINY_SPEC = ROOT / "experiments" / "clip_eps_tiny.yaml"  # 3 clip_eps x seeds [0, 7], 8 updates of 128 steps
TINY_BASE = dict(total_timesteps=1024, num_envs=2, num_steps=64, num_minibatches=2, update_epochs=2, lr=0.01)
KEY_COLUMNS = ["env", "setting_id", "seed", "update", "env_steps", "clip_eps"]


pytestmark = pytest.mark.usefixtures("compilation_cache")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory, compilation_cache) -> tuple[Path, pd.DataFrame]:
    """The tiny spec run in-process, unsharded, in 3 chunks of 2 pairs."""
    out = tmp_path_factory.mktemp("sweeps") / "tiny"
    return out, sweep.run(TINY_SPEC, out, chunk_size=2, progress=False)


def cli(*args, env=None, **kwargs) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "ppo_jax.cli", "sweep", *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
        **kwargs,
    )


def assert_tables_close(a: pd.DataFrame, b: pd.DataFrame, rtol=2e-4):
    pd.testing.assert_frame_equal(a[KEY_COLUMNS], b[KEY_COLUMNS])
    for column in METRIC_COLUMNS.values():
        np.testing.assert_allclose(a[column], b[column], rtol=rtol, atol=1e-5, err_msg=column)


def test_directory_and_table_layout(tiny):
    out, table = tiny
    assert sorted(p.name for p in out.iterdir()) == [
        "chunks",
        "metadata.json",
        "metrics.parquet",
        "plan.json",
        "spec.json",
        "spec.yaml",
        "summary.csv",
        "sweep.log",
    ]
    assert sorted(p.name for p in (out / "chunks").iterdir()) == [f"g000-c0000{i}.parquet" for i in range(3)]
    assert not [p for p in out.parent.iterdir() if p.name.startswith(".")], "temporary files left behind"
    assert (out / "spec.yaml").read_text() == TINY_SPEC.read_text()

    assert list(table.columns) == KEY_COLUMNS + list(METRIC_COLUMNS.values()) + list(EVAL_NAMES)
    last = table["update"] == 7  # evaluation: on each run's last row only
    assert (
        table.loc[last, list(EVAL_NAMES)].notna().all().all() and table.loc[~last, list(EVAL_NAMES)].isna().all().all()
    )
    assert "clip_eps_now" in table and (table.clip_eps_now == table.clip_eps.astype(np.float32)).all()
    assert len(table) == 3 * 2 * 8  # settings x seeds x updates
    expected = [(0.1, 0), (0.1, 7), (0.2, 0), (0.2, 7), (0.3, 0), (0.3, 7)]
    assert list(zip(table.clip_eps[::8], table.seed[::8], strict=True)) == expected
    assert table.setting_id.tolist() == [i for i in range(3) for _ in range(16)]
    assert table["update"].tolist() == list(range(8)) * 6 and (table.env_steps == (table["update"] + 1) * 128).all()
    assert (table.env == "CartPole-v1").all()
    pd.testing.assert_frame_equal(pd.read_parquet(out / "metrics.parquet"), table, check_exact=True)
    in_progress = pd.read_parquet(out / "chunks")  # the chunk files read as one table too
    assert len(in_progress) == len(table)

    summary = pd.read_csv(out / "summary.csv")
    assert list(summary.columns) == [
        "env",
        "setting_id",
        "clip_eps",
        "seeds",
        "diverged",
        "diverged_at",
        "final_episode_return",
        "final_episode_return_ci95_low",
        "final_episode_return_ci95_high",
        "final_episode_return_seeds",
    ]
    assert summary.clip_eps.tolist() == [0.1, 0.2, 0.3] and (summary.seeds == 2).all()
    assert (summary.diverged == 0).all() and summary.diverged_at.isna().all() and (table.non_finite == 0).all()
    assert (summary.final_episode_return_seeds == 2).all()
    for row in summary.itertuples():  # final value of a run: mean over its last 5% of updates (8 -> 0.4 -> 1: the last)
        runs = table[table.setting_id == row.setting_id]
        finals = [runs[runs.seed == s].episode_return.to_numpy()[-1] for s in (0, 7)]
        mean, low, high = bootstrap_ci(finals)
        assert row.final_episode_return == pytest.approx(np.mean(finals)) == pytest.approx(mean)
        assert (row.final_episode_return_ci95_low, row.final_episode_return_ci95_high) == pytest.approx((low, high))
    metadata_task = json.loads((out / "metadata.json").read_text())["task"]
    assert metadata_task == "ppo"
    metadata = json.loads((out / "metadata.json").read_text())
    assert metadata["status"] == "complete" and metadata["git_commit"] is not None
    assert {
        k: metadata["sweep"][k] for k in ("num_settings", "num_seeds", "num_pairs", "num_programs", "num_chunks")
    } == {
        "num_settings": 3,
        "num_seeds": 2,
        "num_pairs": 6,
        "num_programs": 1,
        "num_chunks": 3,
    }
    assert metadata["sweep"]["num_devices"] == 1 and metadata["sweep"]["num_hosts"] == 1
    assert len(metadata["chunks"]) == 3 and metadata["env_steps"] == 6 * 1024 and metadata["run_seconds"] > 0
    assert len((out / "sweep.log").read_text().splitlines()) == 3


def test_sharded_over_4_devices_equals_unsharded(tiny, tmp_path):
    out = tmp_path / "sharded"
    proc = cli(TINY_SPEC, "--out", out, env={"XLA_FLAGS": "--xla_force_host_platform_device_count=4"})
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 0, stderr
    assert "6 pairs on 4 device(s)" in stdout and "setting_id" in stdout  # one chunk of 8 (2 padded); the summary
    metadata = json.loads((out / "metadata.json").read_text())
    assert metadata["sweep"]["num_devices"] == 4 and len(metadata["devices"]) == 4
    assert metadata["chunks"][0]["padded_pairs"] == 2
    assert_tables_close(pd.read_parquet(out / "metrics.parquet"), tiny[1])


KILL_SPEC = "name: kill\nseeds: [0, 7]\ngrid: {clip_eps: [0.1, 0.3]}\nbase: {total_timesteps: 32768, num_envs: 2, num_steps: 64, num_minibatches: 2, update_epochs: 1}\n"


def test_killed_sweep_resumes_to_the_same_table(tmp_path, capsys):
    spec = tmp_path / "kill.yaml"
    spec.write_text(KILL_SPEC)  # 4 pairs of 256 updates, one pair per chunk (~0.5 s each)
    out, chunks = tmp_path / "killed", tmp_path / "killed" / "chunks"
    proc = cli(spec, "--out", out, "--chunk-size", "1")
    deadline = time.monotonic() + 240
    while not (
        chunks.is_dir() and any(p.suffix == ".parquet" and not p.name.startswith(".") for p in chunks.iterdir())
    ):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    first = {p.name: p.stat().st_ino for p in chunks.iterdir() if not p.name.startswith(".")}
    assert 1 <= len(first) < 4 and not (out / "metrics.parquet").exists()

    assert main(["sweep", str(spec), "--out", str(out), "--chunk-size", "1"]) == 2  # without --resume: refused
    stderr = capsys.readouterr().err
    assert "pass --resume" in stderr and f"({len(first)} of 4 chunks done)" in stderr

    resumed = cli(spec, "--out", out, "--resume")
    stdout, stderr = resumed.communicate(timeout=240)
    assert resumed.returncode == 0, stderr
    assert f"{len(first)} of 4 chunks already done" in stdout
    assert stdout.count("chunk g000-") == 4 - len(first)  # only the missing chunks ran
    assert {p.name: p.stat().st_ino for p in chunks.iterdir() if p.name in first} == first  # and none was rewritten

    reference = sweep.run(spec, tmp_path / "uninterrupted", chunk_size=1, progress=False)
    pd.testing.assert_frame_equal(pd.read_parquet(out / "metrics.parquet"), reference, check_exact=True)


def test_resume_refuses_a_changed_spec_with_a_diff(tiny, tmp_path, capsys):
    changed = tmp_path / "changed.yaml"
    changed.write_text(TINY_SPEC.read_text().replace("[0.1, 0.2, 0.3]", "[0.1, 0.2, 0.4]"))
    before = sorted(p.name for p in tiny[0].iterdir())
    assert main(["sweep", str(changed), "--out", str(tiny[0]), "--resume"]) == 2
    err = capsys.readouterr().err
    assert "different spec" in err and "--- spec in the directory" in err
    assert "-    clip_eps: [0.1, 0.2, 0.3]" in err and "+    clip_eps: [0.1, 0.2, 0.4]" in err
    assert sorted(p.name for p in tiny[0].iterdir()) == before


def test_parts_fill_one_directory_and_merge_as_one_sweep(tiny, tmp_path):
    out = tmp_path / "parts"
    first = sweep.run(TINY_SPEC, out, chunk_size=2, part="0/2", progress=False)  # chunk 0 of 3
    assert len(first) == 16 and not (out / "metrics.parquet").exists()
    second = sweep.run(TINY_SPEC, out, chunk_size=2, part=(1, 2), progress=False)  # chunks 1 and 2, then the merge
    pd.testing.assert_frame_equal(second, tiny[1], check_exact=True)
    pd.testing.assert_frame_equal(pd.read_parquet(out / "metrics.parquet"), tiny[1], check_exact=True)


def test_force_replaces_a_sweep_only_when_the_new_one_is_complete(tiny, tmp_path):
    out = tmp_path / "forced"
    shutil.copytree(tiny[0], out)
    (out / "marker").write_text("old")
    table = sweep.run(TINY_SPEC, out, chunk_size=2, force=True, progress=False)
    pd.testing.assert_frame_equal(table, tiny[1], check_exact=True)
    assert not (out / "marker").exists() and sorted(p.name for p in tmp_path.iterdir()) == ["forced"]


def test_in_memory_sweep_and_dry_run(tiny, capsys):
    table = sweep.run(TINY_SPEC, chunk_size=2, progress=False)  # no directory
    pd.testing.assert_frame_equal(table, tiny[1], check_exact=True)
    assert main(["sweep", str(TINY_SPEC), "--dry-run", "--chunk-size", "2", "--out", str(tiny[0])]) == 0
    text = capsys.readouterr().out
    assert "6 runs" in text and "1 program(s)" in text and "3 chunk(s)" in text
    assert "memory not estimated (nothing compiled) per device" in text  # the chunk sizes are known: no compile
    assert "3 of 3 chunks done" in text and "nothing was run" in text


def test_dry_run_says_runs_programs_and_steps_before_it_compiles(monkeypatch):
    from ppo_jax.sweep import runner

    lines = []
    real = runner.fit_program
    monkeypatch.setattr(runner, "fit_program", lambda *a: lines.append("COMPILING") or real(*a))
    text = sweep.dry_run(TINY_SPEC, cache_dir=None, log=lines.append)
    header = next(i for i, line in enumerate(lines) if "= 6 runs" in line)
    assert header < lines.index("COMPILING") and lines.count("COMPILING") == 1  # one program per distinct shape
    assert "1 program(s)" in lines[header] and "group 0: env=CartPole-v1: 6 pairs" in lines[header]
    assert "compiling 1 program(s), one per distinct shape" in "\n".join(lines[header:])
    assert "1 chunk(s):" in text and "group 0: 1 chunk(s) of 6, ~" in text  # the memory estimate, after compiling
    # with auto it says, before compiling, which shapes the run would probe: none of 6 pairs x 8 updates x
    # 128 env steps = 6,144; all with the floor at 0
    lines.clear()
    monkeypatch.setattr(runner, "fit_program", lambda *a: pytest.fail("compiled"))  # the line comes first
    with pytest.raises(pytest.fail.Exception):
        sweep.dry_run(TINY_SPEC, chunk_size="auto", cache_dir=None, log=lines.append)
    assert "--chunk-size auto: the memory fit, group 0 not probed: 6,144 samples, under 1,000,000" in lines[1]
    from ppo_jax.sweep import calibrate

    monkeypatch.setattr(calibrate, "MIN_PROBE_SAMPLES", 0)
    from ppo_jax.sweep.plan import group_pairs

    spec = sweep.load_spec(TINY_SPEC)
    assert "the run probes the chunk sizes of 1 of 1 shape(s) (group 0)" in runner._probe_plan(spec, group_pairs(spec))


def test_window_metrics_by_hand():
    values = np.array([1.0, np.nan, 3.0, 4.0, 5.0, 6.0, 7.0], np.float32)  # 7 updates, windows of 3
    out = jax.device_get(window_metrics({"episode_return": values, "episodes": values}, 3, PPO.summed_metrics))
    np.testing.assert_allclose(out["episode_return"], [2.0, 5.0, 7.0])  # NaN skipped, short last window
    np.testing.assert_allclose(out["episodes"], [4.0, 15.0, 7.0])  # summed
    assert window_metrics({"loss": values}, 1)["loss"] is values


def test_summary_final_values_over_several_updates_by_hand():
    # The tiny runs above have 8 updates: their 5% window is the last update alone. Here 60 updates per run:
    # 5% of 60 = 3 (not ceil(3.0000000000000004) = 4): updates 57, 58, 59, NaN skipped.
    spec = sweep.load_spec(TINY_SPEC)  # 3 settings (clip_eps 0.1, 0.2, 0.3) x seeds 0, 7
    assert spec.log_every == 1 and spec.axes == ("clip_eps",)
    rows = []
    for setting in spec.settings:
        for seed in (0, 7):
            ret = 10.0 * setting.setting_id + seed + np.arange(60.0)  # update u: 10 * setting + seed + u
            if (setting.setting_id, seed) == (1, 7):
                ret[59] = np.nan  # no episode ended: the window's mean skips it
            rows.append(
                pd.DataFrame(
                    {
                        "env": setting.env,
                        "setting_id": setting.setting_id,
                        "seed": seed,
                        "update": np.arange(60),
                        "clip_eps": setting.values["clip_eps"],
                        "episode_return": ret,
                    }
                )
            )
    summary = sweep.table.summarize(spec, pd.concat(rows, ignore_index=True))
    # Per run: 10 * setting + seed + mean(57, 58, 59) = ... + 58, and ... + mean(57, 58) = ... + 57.5 for (1, 7).
    # Per setting: the mean over seeds 0 and 7 of those.
    expected = [(0 + 58 + 7 + 58) / 2, (10 + 58 + 17 + 57.5) / 2, (20 + 58 + 27 + 58) / 2]
    np.testing.assert_allclose(summary.final_episode_return, expected)
    assert (summary.seeds == 2).all() and summary.clip_eps.tolist() == [0.1, 0.2, 0.3]
    # Two seeds 7 apart: the percentile-bootstrap interval of their mean lies within [min, max] = mean -+ 3.5.
    assert (summary.final_episode_return_ci95_low >= np.array(expected) - 3.5 - 1e-9).all()
    assert (summary.final_episode_return_ci95_high <= np.array(expected) + 3.5 + 1e-9).all()


@pytest.mark.skipif(not os.environ.get("PPO_JAX_TEST_MULTIHOST"), reason="~90 s; set PPO_JAX_TEST_MULTIHOST=1 to run")
def test_two_hosts_with_distributed_equal_one(tiny, tmp_path):
    """--distributed across 2 processes x 2 CPU devices (a faked SLURM step, gloo collectives) = the unsharded sweep."""
    out, procs = tmp_path / "two_hosts", []
    for rank in range(2):
        env = faked_slurm_step(rank, 1000 + os.getpid() % 1000)
        procs.append(cli(TINY_SPEC, "--out", out, "--distributed", "--chunk-size", "4", env=env))
    for proc in procs:
        stdout, stderr = proc.communicate(timeout=400)
        assert proc.returncode == 0, stderr
    metadata = json.loads((out / "metadata.json").read_text())
    assert metadata["sweep"]["num_hosts"] == 2 and metadata["sweep"]["num_devices"] == 4
    assert_tables_close(pd.read_parquet(out / "metrics.parquet"), tiny[1], rtol=1e-3)


def test_a_chunk_stopped_mid_way_resumes_from_its_checkpoint(tiny, tmp_path, monkeypatch):
    """--checkpoint-every: stopped after the first segment's checkpoint, the chunk resumes from it, to the same bits."""
    from ppo_jax.storage import checkpoints as checkpoints_module

    args = dict(chunk_size=6, progress=False, checkpoint_every="3")  # one chunk of all 6 pairs, 8 updates: 3 + 3 + 2
    straight = sweep.run(TINY_SPEC, tmp_path / "straight", **args)
    assert not (tmp_path / "straight" / "checkpoints").exists()
    assert_tables_close(straight, tiny[1])  # segmented: the one-program sweep to float32 rounding

    out, save, saved = tmp_path / "stopped", checkpoints_module.Checkpoints.save, []

    def stop_after_first(self, update, carry, meta):
        if saved:
            raise KeyboardInterrupt  # a kill after the first checkpoint
        saved.append(update)
        return save(self, update, carry, meta)

    monkeypatch.setattr(checkpoints_module.Checkpoints, "save", stop_after_first)
    with pytest.raises(KeyboardInterrupt):
        sweep.run(TINY_SPEC, out, **args)
    assert saved == [3] and [p.name for p in (out / "checkpoints").iterdir()] == ["g000-c00000"]
    monkeypatch.setattr(checkpoints_module.Checkpoints, "save", save)
    restored = []
    restore = checkpoints_module.Checkpoints.restore
    monkeypatch.setattr(
        checkpoints_module.Checkpoints, "restore", lambda self, like: restored.append(1) or restore(self, like)
    )
    resumed = sweep.run(TINY_SPEC, out, resume=True, **args)
    assert restored == [1] and not (out / "checkpoints" / "g000-c00000").exists()
    pd.testing.assert_frame_equal(resumed, straight, check_exact=True)


def test_the_plan_compiles_one_program_per_distinct_shape(monkeypatch):
    # 2 envs x {clip 0.1, clip 0.2 | unclipped | kl_fixed | clip with 4 envs}: groups per env: clip (4 pairs),
    # unclipped (2), kl_fixed (2), num_envs 4 (2). objective only picks a branch (PPOConfig.BRANCH_FIELDS):
    # unclipped and kl_fixed share a shape; num_envs changes it. Fit is stubbed: it records the groups it sizes.
    from ppo_jax.sweep import runner
    from ppo_jax.sweep.program import Program

    spec = {
        "name": "shapes",
        "envs": ["CartPole-v1", "Acrobot-v1"],
        "seeds": 2,
        "base": TINY_BASE,
        "zip": {
            "objective": ["clip", "clip", "unclipped", "kl_fixed", "clip"],
            "clip_eps": [0.1, 0.2, 0.2, 0.2, 0.2],
            "num_envs": [2, 2, 2, 2, 4],
        },
    }
    fitted = []

    def fake_fit(task, cfg, num_pairs, budget, mesh, log_every, how):
        fitted.append((cfg.env, cfg.objective, cfg.num_envs, num_pairs))
        return Program(None, num_pairs if cfg.objective == "clip" else 1, 0.5, 1000)

    monkeypatch.setattr(runner, "fit_program", fake_fit)
    lines = []
    plan = runner.plan_sweep(spec, log=lines.append)
    assert len(plan.groups) == 8
    assert fitted == [  # group by group: the kl_fixed groups take their env's unclipped size
        ("CartPole-v1", "clip", 2, 4),
        ("CartPole-v1", "unclipped", 2, 2),
        ("CartPole-v1", "clip", 4, 2),
        ("Acrobot-v1", "clip", 2, 4),
        ("Acrobot-v1", "unclipped", 2, 2),
        ("Acrobot-v1", "clip", 4, 2),
    ]
    by_group = {
        (g.cfg.env, g.cfg.objective, g.cfg.num_envs): size
        for g, size in zip(plan.groups, plan.chunk_sizes, strict=True)
    }
    assert by_group[("CartPole-v1", "kl_fixed", 2)] == by_group[("CartPole-v1", "unclipped", 2)] == 1
    assert by_group[("CartPole-v1", "clip", 4)] == 2
    assert any("the shape of group 1, chunks of 1" in line for line in lines)
    assert any("about 1 s more for 2 more program(s) of other shapes" in line for line in lines)


def test_auto_chunk_size_candidates_and_choice_by_hand():
    from ppo_jax.sweep import calibrate

    assert calibrate.candidates(64, 64, 1) == [64, 32, 16]  # the memory fit, then balanced halves
    assert calibrate.candidates(100, 100, 1) == [100, 50, 25]
    assert calibrate.candidates(64, 64, 4) == [64, 32, 16]
    assert calibrate.candidates(3, 3, 1) == [3]  # 1 pair runs unbatched (another program): never a candidate
    assert calibrate.candidates(6, 6, 2) == [6]  # halves below 2 pairs per device


def test_auto_chunk_size_probe_order_by_hand():
    from ppo_jax.sweep import calibrate

    assert calibrate.probe_order(1) == [0]
    assert calibrate.probe_order(2) == [0, 1]
    assert calibrate.probe_order(3) == [0, 2, 1]  # the memory fit, the smallest, then the one between
    assert calibrate.probe_order(4) == [0, 3, 1, 2]


def test_auto_chunk_size_probes_only_within_its_share_of_the_estimated_run_time():
    # Worked by hand: 64 pairs, candidates 64, 32, 16 probed in the order 64, 16, 32; probes costing 8 s of compile
    # plus one update (size / rate seconds).
    from types import SimpleNamespace

    from ppo_jax.sweep import calibrate
    from ppo_jax.sweep.plan import Group

    rates = {64: 4.0, 32: 5.0, 16: 6.0}
    group = Group(0, None, {}, tuple((0, seed) for seed in range(64)))
    cpu = SimpleNamespace(size=1, devices=np.array([SimpleNamespace(platform="cpu")]))

    def probe_at(compile_seconds):
        return lambda spec, group, size, mesh, how: calibrate.Probe(
            rates[size], compile_seconds + size / rates[size], compile_seconds
        )

    def run(num_updates, steps_per_update=1000, mesh=cpu):
        task = SimpleNamespace(num_updates=lambda cfg: num_updates, steps_per_update=lambda cfg: steps_per_update)
        spec = SimpleNamespace(task=task, settings=[SimpleNamespace(cfg=None)])
        return calibrate.calibrate(spec, [group], 64, mesh, None, lambda m: None)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(calibrate, "probe", probe_at(8.0))
        # nothing probed under 10^6 samples (64 pairs x 10 updates x 1,562 steps = 999,680), nor on an accelerator
        small = run(10, steps_per_update=1562)
        assert small.rates == [None, None, None] and small.chosen == 64 and small.seconds == 0.0
        assert small.note == "not probed: 999,680 samples, under 1,000,000"
        assert run(10, steps_per_update=1563).rates[0] == 4.0  # 1,000,320: probed
        gpu = SimpleNamespace(size=1, devices=np.array([SimpleNamespace(platform="gpu")]))
        on_gpu = run(80, mesh=gpu)
        assert (
            on_gpu.rates == [None, None, None] and on_gpu.chosen == 64 and on_gpu.note.startswith("not probed on gpu")
        )
        # 40 updates: estimate 64 * 40 / 4 = 640 s, share 32 s; spent 24 + predicted 8 + 16 / 4 = 36 > 32: stop
        short = run(40)
        assert short.rates == [4.0, None, None] and short.chosen == 64 and short.seconds == 24.0
        assert "5% of the estimated 640 s" in short.note
        # 80 updates: share 64 s, 24 + 12 fits; 16 pairs at 6 > 1.05 x 4: the ends are not level, so 32 is not
        # probed, and 16 is chosen after 24 + 8 + 16 / 6 s
        long = run(80)
        assert long.rates == [4.0, None, 6.0] and long.chosen == 16
        assert long.seconds == pytest.approx(24 + 8 + 16 / 6)
        assert "smallest candidate is faster than the largest" in long.note
        # the smallest slower by more than the margin (an accelerator's shape): the memory fit is kept, 32 not probed
        rates.update({64: 6.0, 16: 4.0})
        slow = run(80)
        assert slow.rates == [6.0, None, 4.0] and slow.chosen == 64 and "is slower" in slow.note
        # level ends (4.1 within 5% of 4): the one between is probed. 80 updates: estimate 1280 s, share 64, spent
        # 24 + predicted 12 fits; spent 24 + 8 + 16 / 4.1 = 35.9, estimate 5120 / 4.1 = 1248.8 s, share 62.4,
        # predicted 8 + 32 / 4.1 = 15.8: 51.7 fits; 32 at 5 > 1.05 x 4 is chosen
        rates.update({64: 4.0, 32: 5.0, 16: 4.1})
        level = run(80)
        assert level.rates == [4.0, 5.0, 4.1] and level.chosen == 32 and level.note == "every candidate probed"
        # under MIN_SWEEP_SECONDS (here 10 updates: 160 s) only the memory fit is probed
        tiny = run(10, steps_per_update=2000)  # 1,280,000 samples: probed
        assert tiny.rates == [4.0, None, None] and tiny.chosen == 64 and "under 600 s" in tiny.note
        # cheap probes (1 s compiles), 50 updates, 32 at 6: estimates 800, 780, then 533 s, under 600 s only after
        # the last candidate, so nothing was stopped (the note said "stopped" before: seen in docs/benchmarks/chunking.md)
        patch.setattr(calibrate, "probe", probe_at(1.0))
        rates[32] = 6.0
        last = run(50)
        assert last.rates == [4.0, 6.0, 4.1] and last.chosen == 32 and last.note == "every candidate probed"


def test_auto_chunk_size_gives_the_runs_of_the_fixed_size_it_chose_and_records_it(tiny, tmp_path, monkeypatch):
    # The probes are stubbed (their timing is the machine's): 3 pairs per chunk "measured" 30% faster than the
    # memory fit of 6, so auto must choose 3; its runs must be those of --chunk-size 3, bit for bit (another size
    # can change them at float32 rounding, though not on this spec: see the 2-pair chunks below).
    from ppo_jax.sweep import calibrate
    from ppo_jax.sweep.plan import group_pairs
    from ppo_jax.sweep.program import Shared, device_mesh

    spec = sweep.load_spec(TINY_SPEC)  # a real probe first: 2 pairs, timed for at least one of the 8 updates
    real = calibrate.probe(spec, group_pairs(spec)[0], 2, device_mesh(), Shared("none"))
    assert real.rate > 0 and real.seconds >= real.compile_seconds > 0
    probed = []

    def fake_probe(spec, group, size, mesh, how):
        probed.append(size)
        return calibrate.Probe({6: 100.0, 3: 130.0}[size], 0.01, 0.005)

    monkeypatch.setattr(calibrate, "probe", fake_probe)
    monkeypatch.setattr(calibrate, "MIN_SWEEP_SECONDS", 0.0)
    monkeypatch.setattr(calibrate, "SHARE", 1e9)  # probes free
    monkeypatch.setattr(calibrate, "MIN_PROBE_SAMPLES", 0)  # the tiny sweep is probed
    auto = sweep.run(TINY_SPEC, tmp_path / "auto", chunk_size="auto", progress=False)
    assert probed == [6, 3]
    fixed = sweep.run(TINY_SPEC, tmp_path / "fixed", chunk_size=3, progress=False)
    pd.testing.assert_frame_equal(auto, fixed, check_exact=True)
    pd.testing.assert_frame_equal(auto, tiny[1])  # and the 2-pair chunks' (they agree on this spec, not always)
    plan = json.loads((tmp_path / "auto" / "plan.json").read_text())
    assert plan["chunk_sizes"] == [3] and plan["calibration"]["0"]["candidates"] == [6, 3]
    assert plan["calibration"]["0"]["rates"] == [100.0, 130.0] and plan["calibration"]["0"]["chosen"] == 3
    meta = json.loads((tmp_path / "auto" / "metadata.json").read_text())
    assert meta["sweep"]["calibration"] == plan["calibration"]
    # a resumed sweep keeps the choice: nothing is probed again
    monkeypatch.setattr(calibrate, "probe", lambda *a: pytest.fail("a resumed sweep probed"))
    again = sweep.run(TINY_SPEC, tmp_path / "auto", chunk_size="auto", resume=True, progress=False)
    pd.testing.assert_frame_equal(again, auto, check_exact=True)
    # level rates (within calibrate.MARGIN): the memory fit is kept
    monkeypatch.setattr(
        calibrate, "probe", lambda spec, group, size, mesh, how: calibrate.Probe(100.0 + size / 6, 0.01, 0.005)
    )
    plan = sweep.plan_sweep(TINY_SPEC, chunk_size="auto", log=lambda m: None)
    assert plan.chunk_sizes == [6] and plan.calibration[0].rates == [101.0, 100.5]
    with pytest.raises(sweep.runner.SpecError, match="--chunk-size must be a positive integer or auto"):
        sweep.parse_chunk_size("fast")
