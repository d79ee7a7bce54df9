"""A run directory read back: a corrupt or truncated file is named in one line, and kept.

Nothing compiles here (``ppo-jax train --resume`` stops at the corrupt file; outputs are faked in NumPy).
"""

from __future__ import annotations

import shutil

import pytest

from ppo_jax.cli import main
from ppo_jax.errors import CorruptFileError
from ppo_jax.rl.config import PPOConfig
from ppo_jax.rl.task import PPO
from ppo_jax.storage.atomic import write_json
from ppo_jax.storage.corrupt import set_aside
from ppo_jax.storage.live_run import LiveRun
from ppo_jax.storage.run_dir import check_run_dir, config_record, load_params, metrics_frame
from tests.storage.test_run_dir import fake_output, write_run

CFG = PPOConfig(total_timesteps=1024, num_envs=2, num_steps=64, num_minibatches=2)  # 8 updates


def truncate(path) -> bytes:
    data = path.read_bytes()[: path.stat().st_size // 2]
    path.write_bytes(data)
    return data


@pytest.mark.parametrize("name", ["config.json", "metadata.json"])
def test_resume_names_a_corrupt_file_it_cannot_recompute(name, tmp_path, capsys):
    out = tmp_path / "run"
    out.mkdir()
    write_json(out / "config.json", config_record(PPO, CFG, [0]))
    write_json(out / "metadata.json", {"status": "running", "run": {"seeds": [0]}})
    data = truncate(out / name)
    assert main(["train", "--out", str(out), "--resume"]) == 2
    stderr = capsys.readouterr().err
    assert stderr.count("\n") == 1 and stderr.startswith(
        f"error: {out / name} is corrupt or truncated (JSONDecodeError"
    )
    assert "restore it from a backup, or start over with --force" in stderr
    assert (out / name).read_bytes() == data  # left where it is: --force still knows the directory


def test_resume_refuses_metrics_that_do_not_match_their_checkpoint(tmp_path):
    run = LiveRun(tmp_path, tmp_path)
    length = run.append_metrics(metrics_frame(PPO, CFG, [0, 1], fake_output(2, CFG).metrics))
    with pytest.raises(CorruptFileError, match="metrics.csv is corrupt or truncated .*do not end a line"):
        run.cut_metrics(length - 3)  # a checkpoint covering part of a row: not what we wrote
    with pytest.raises(CorruptFileError, match=f"shorter than the {length + 1} bytes its checkpoint covers"):
        run.cut_metrics(length + 1)
    run.metrics_path.write_bytes(b"\x00" * length)  # a file system that lost the data
    with pytest.raises(CorruptFileError, match="no header"):
        run.cut_metrics(length)
    assert run.metrics_path.read_bytes() == b"\x00" * length


@pytest.mark.parametrize("name", ["config.json", "metadata.json", "metrics.csv", "params.msgpack"])
def test_check_run_dir_names_the_file_that_cannot_be_read_back(name, tmp_path):
    out = tmp_path / "run"
    write_run(out, PPO, CFG, [3, 4], fake_output(2, CFG))
    check_run_dir(out)  # what a report calls first
    truncate(out / name)
    with pytest.raises(CorruptFileError, match=f"{out / name} is corrupt or truncated") as error:
        check_run_dir(out)
    assert "train the run again" in str(error.value) or "start over with --force" in str(error.value)
    if name == "params.msgpack":
        with pytest.raises(CorruptFileError, match="Unpack failed"):
            load_params(out)


def test_a_file_set_aside_keeps_its_bytes_and_says_where_it_came_from(tmp_path):
    (tmp_path / "chunks").mkdir()
    for _ in range(2):
        (tmp_path / "chunks" / "g000-c00001.parquet").write_bytes(b"half")
        moved = set_aside(tmp_path / "chunks" / "g000-c00001.parquet", tmp_path)
        assert moved.parent == tmp_path / "corrupt" and moved.name.startswith("chunks-g000-c00001.parquet.")
        assert moved.read_bytes() == b"half"
    assert len(list((tmp_path / "corrupt").iterdir())) == 2  # the same second: a second name, nothing overwritten
    shutil.rmtree(tmp_path / "corrupt")
