"""``ppo-jax rlhf`` and the frontier spec: bad input fails with a clear message before anything compiles."""

from pathlib import Path

import numpy as np
import pytest
import tyro

from ppo_jax.rlhf import frontier
from ppo_jax.rlhf.cli import Rlhf, run_rlhf
from ppo_jax.rlhf.config import RlhfConfig
from ppo_jax.validation import ConfigError

ROOT = Path(__file__).resolve().parents[1]


def test_flags_parse_into_the_config():
    args = tyro.cli(Rlhf, args=["--beta", "0.1", "--reward-model", "programmatic", "--seeds", "3", "--advantage", "broadcast"])
    assert args.seeds == 3
    assert args.config.reward_model == "programmatic" and args.config.advantage == "broadcast"
    assert args.config.beta.dtype == np.float32 and float(args.config.beta) == pytest.approx(0.1)


def test_bad_config_is_a_config_error():
    with pytest.raises(ConfigError, match="max_response_len=3"):
        run_rlhf(Rlhf(config=RlhfConfig(max_response_len=3)), ["ppo-jax", "rlhf"])
    with pytest.raises(ConfigError, match="--seeds must be a positive integer"):
        run_rlhf(Rlhf(seeds=0), ["ppo-jax", "rlhf"])


def test_bad_flag_values_fail_before_compiling():
    args = tyro.cli(Rlhf, args=["--clip-eps", "0"])
    with pytest.raises(ConfigError, match="clip_eps must be > 0"):
        run_rlhf(args, ["ppo-jax", "rlhf", "--clip-eps", "0"])


def test_existing_directory_is_not_replaced_without_force(tmp_path):
    (tmp_path / "keep.txt").write_text("mine")
    with pytest.raises(ConfigError, match="pass --force"):
        run_rlhf(Rlhf(out=tmp_path), ["ppo-jax", "rlhf"])
    with pytest.raises(ConfigError, match="not a ppo-jax run directory"):
        run_rlhf(Rlhf(out=tmp_path, force=True), ["ppo-jax", "rlhf"])
    assert (tmp_path / "keep.txt").read_text() == "mine"


def test_the_experiment_specs_load():
    quick = frontier.load_spec(ROOT / "experiments" / "rlhf_frontier_quick.yaml")
    assert quick["grid"]["clip_eps"] == [0.1, 0.15, 0.2, 0.3]
    assert len(frontier.settings(quick)) * len(quick["seeds"]) == 60
    paper = frontier.load_spec(ROOT / "experiments" / "rlhf_frontier.yaml")
    assert paper["grid"]["clip_eps"] == [0.1, 0.15, 0.2, 0.3]


@pytest.mark.parametrize(
    "text, message",
    [
        ("grid: {hidden_dim: [16, 32]}", "not a traced RlhfConfig field"),
        ("grid: {beta: [-1.0]}", "beta must be >= 0"),
        ("base: {betta: 0.1}", "Did you mean: beta"),
        ("gird: {beta: [0.1]}", "unknown keys"),
    ],
)
def test_spec_errors(tmp_path, text, message):
    path = tmp_path / "spec.yaml"
    path.write_text(text + "\n")
    with pytest.raises(ConfigError, match=message):
        frontier.load_spec(path)


def test_ppo_jax_rlhf_subcommand_refuses_bad_input_with_exit_2():
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "ppo_jax.cli", "rlhf", "--beta", "-1"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stderr.startswith("error:") and "beta" in proc.stderr
    assert "Traceback" not in proc.stderr
