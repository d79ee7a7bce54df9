"""Writing with a full disk (ENOSPC): an error naming the file, and every file as it was before the write.

Files are written whole or not at all (``ppo_jax.storage.atomic``); the sweep's chunks and table are
covered end to end in tests/sweep/test_survival.py, checkpoints in test_checkpoints.py.
"""

from __future__ import annotations

import errno
import os

import pandas as pd
import pytest

from ppo_jax.rl.config import PPOConfig
from ppo_jax.rl.task import PPO
from ppo_jax.storage.atomic import write_directory, write_file
from ppo_jax.storage.live_run import LiveRun
from ppo_jax.storage.run_dir import metrics_frame
from tests.helpers import snapshot
from tests.storage.test_run_dir import fake_output

CFG = PPOConfig(total_timesteps=1024, num_envs=2, num_steps=64, num_minibatches=2)  # 8 updates


def full_disk(*args, **kwargs):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_a_file_is_replaced_whole_or_not_at_all(tmp_path):
    (tmp_path / "summary.csv").write_text("old")

    def half_then_full(tmp):
        tmp.write_text("ne")
        full_disk()

    with pytest.raises(OSError, match=f"could not write {tmp_path / 'summary.csv'}: No space left on device") as error:
        write_file(tmp_path / "summary.csv", half_then_full)
    assert error.value.errno == errno.ENOSPC
    assert snapshot(tmp_path) == {"summary.csv": b"old"}  # no temporary file left


def test_a_directory_is_replaced_whole_or_not_at_all(tmp_path):
    report = tmp_path / "report"
    report.mkdir()
    (report / "index.html").write_text("old report")

    def half_then_full(tmp):
        (tmp / "index.html").write_text("new")
        full_disk()

    with pytest.raises(OSError, match=f"could not write {report}: No space left on device"):
        write_directory(report, half_then_full)
    assert [p.name for p in tmp_path.iterdir()] == ["report"] and snapshot(report) == {"index.html": b"old report"}


def test_metrics_rows_go_in_whole_or_not_at_all(tmp_path, monkeypatch):
    run = LiveRun(tmp_path, tmp_path)
    frame = metrics_frame(PPO, CFG, [0, 1], fake_output(2, CFG).metrics)
    length = run.append_metrics(frame)
    before = run.metrics_path.read_bytes()
    assert len(before) == length and len(pd.read_csv(run.metrics_path)) == len(frame) == 16
    write, calls = os.write, []

    def filling_up(fd, data):
        if os.readlink(f"/proc/self/fd/{fd}") != str(run.metrics_path):
            return write(fd, data)
        calls.append(len(data))
        if len(calls) == 1:
            return write(fd, bytes(data[: len(data) // 2]))  # a short write, then the disk is full
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "write", filling_up)
    with pytest.raises(OSError, match=f"could not write {run.metrics_path}: No space left on device") as error:
        run.append_metrics(frame)
    assert error.value.errno == errno.ENOSPC and len(calls) == 2
    assert run.metrics_path.read_bytes() == before  # the half row is gone
