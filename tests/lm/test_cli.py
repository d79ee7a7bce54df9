"""``ppo-jax rlhf``: flags parse into the config; bad input fails with a clear message before anything compiles.

The RLHF frontier is a sweep now (``task: rlhf``); its spec tests are in tests/sweep/test_spec.py.
"""

import subprocess
import sys

import numpy as np
import pytest
import tyro

from ppo_jax.cli import parse
from ppo_jax.cli.train import Rlhf, run_rlhf
from ppo_jax.errors import ConfigError
from ppo_jax.lm.config import RlhfConfig


def test_flags_parse_into_the_config():
    args = tyro.cli(
        Rlhf, args=["--beta", "0.1", "--reward-model", "programmatic", "--seeds", "3", "--advantage", "broadcast"]
    )
    assert args.seeds == 3
    assert args.config.reward_model == "programmatic" and args.config.advantage == "broadcast"
    assert args.config.beta.dtype == np.float32 and float(args.config.beta) == pytest.approx(0.1)


def test_progress_and_lr_schedule_flags():
    args = parse(["rlhf"])
    assert isinstance(args, Rlhf) and args.progress is True and args.config == RlhfConfig()
    args = parse(["rlhf", "--no-progress", "--lr-schedule", "linear", "--pretrain-seed", "4"])
    assert args.progress is False and args.pretrain_seed == 4
    assert args.config == RlhfConfig(lr_schedule="linear")  # progress is a flag of the run, not a config field


def test_bad_config_is_a_config_error():
    with pytest.raises(ConfigError, match="max_response_len=3"):
        run_rlhf(Rlhf(config=RlhfConfig(max_response_len=3)), ["ppo-jax", "rlhf"])
    with pytest.raises(ConfigError, match="--seeds must be a positive integer"):
        run_rlhf(Rlhf(seeds=0), ["ppo-jax", "rlhf"])
    with pytest.raises(ConfigError, match="--pretrain-seed -1"):
        run_rlhf(Rlhf(pretrain_seed=-1), ["ppo-jax", "rlhf"])


def test_bad_flag_values_fail_before_compiling():
    args = tyro.cli(Rlhf, args=["--clip-eps", "0"])
    with pytest.raises(ConfigError, match="clip_eps_low must be > 0"):
        run_rlhf(args, ["ppo-jax", "rlhf", "--clip-eps", "0"])


def test_existing_directory_is_not_replaced_without_force(tmp_path):
    (tmp_path / "keep.txt").write_text("mine")
    with pytest.raises(ConfigError, match="not a ppo-jax run directory.*Choose another --out"):
        run_rlhf(Rlhf(out=tmp_path), ["ppo-jax", "rlhf"])  # --force would not replace it: not advised
    with pytest.raises(ConfigError, match="not a ppo-jax run directory"):
        run_rlhf(Rlhf(out=tmp_path, force=True), ["ppo-jax", "rlhf"])
    assert (tmp_path / "keep.txt").read_text() == "mine"


def test_ppo_jax_rlhf_subcommand_refuses_bad_input_with_exit_2():
    proc = subprocess.run(
        [sys.executable, "-m", "ppo_jax.cli", "rlhf", "--beta", "-1"], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 2 and proc.stderr.startswith("error:") and "beta" in proc.stderr
    assert "Traceback" not in proc.stderr
