"""``ppo-jax train`` without ``--preset``: the preset an env starts from, printed and recorded; ``--preset none``.

Also what ``train`` and ``rlhf`` share: the run flags (declared once, ``RunFlags``) and a task's own command
name (``Task.command``). Everything here runs in process and stops before anything compiles: a fake
``run_task`` receives what ``ppo-jax train`` would run. No Brax env is built (an env id is a string here), so
these tests need no [brax] extra; the run that records a preset end to end is in tests/cli/test_train.py.

The expected values are written out below from their sources, not read from ``ppo_jax.rl.presets``.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from ppo_jax.cli import main, parse
from ppo_jax.cli import train as train_cli
from ppo_jax.cli.train import Rlhf, Train

IDP = "brax/inverted_double_pendulum"

# The PPO paper's MuJoCo settings, Schulman et al. (2017), Table 3 and sec. 6.1 (horizon 2048, Adam 3e-4,
# 10 epochs, minibatch 64 = 2048 / 32, gamma 0.99, lambda 0.95, clip 0.2, one env, no entropy bonus,
# 64x64 tanh, Gaussian, 1M steps), with baselines ppo2's normalization, gradient clip 0.5, value clipping, constant lr.
MUJOCO = {
    "total_timesteps": 1_000_000,
    "num_envs": 1,
    "num_steps": 2048,
    "num_minibatches": 32,
    "update_epochs": 10,
    "lr": 3e-4,
    "lr_schedule": "constant",
    "gamma": 0.99,
    "gae_lambda": 0.95,
    "clip_eps": 0.2,
    "ent_coef": 0.0,
    "hidden_sizes": (64, 64),
    "activation": "tanh",
    "action_dist": "gaussian",
    "normalize_obs": True,
    "normalize_reward": True,
    "max_grad_norm": 0.5,
    "clip_vloss": True,
}

# OpenAI baselines ppo1, run_mujoco.py -> pposgd_simple.learn(timesteps_per_actorbatch=2048, clip_param=0.2,
# entcoeff=0.0, optim_epochs=10, optim_stepsize=3e-4, optim_batchsize=64, gamma=0.99, lam=0.95,
# schedule='linear', adam_epsilon=1e-5): the lr multiplier 1 - t/T also scales the clip range; MlpPolicy
# (hid_size=64, num_hid_layers=2, tanh) normalizes observations (ob_rms) clipped to [-5, 5]; the loss
# pol_surr + pol_entpen + mean((V - R)^2) has no value clipping and no gradient clipping; no reward scaling.
PPO1 = {
    "total_timesteps": 1_000_000,
    "num_envs": 1,
    "num_steps": 2048,
    "num_minibatches": 32,
    "update_epochs": 10,
    "lr": 3e-4,
    "lr_schedule": "linear",
    "clip_schedule": "linear",
    "gamma": 0.99,
    "gae_lambda": 0.95,
    "clip_eps": 0.2,
    "ent_coef": 0.0,
    "hidden_sizes": (64, 64),
    "activation": "tanh",
    "action_dist": "gaussian",
    "normalize_obs": True,
    "obs_clip": 5.0,
    "normalize_reward": False,
    "max_grad_norm": float("inf"),
    "clip_vloss": False,
    "adam_eps": 1e-5,
    "vf_coef": 2.0,  # (V - R)^2 with weight 1 = 2 x our 0.5 (V - R)^2
}

# PPOConfig's own defaults (CleanRL's ppo.py, CartPole): what --preset none keeps.
PLAIN = {
    "total_timesteps": 500_000,
    "num_envs": 4,
    "num_steps": 128,
    "num_minibatches": 4,
    "update_epochs": 4,
    "lr": 2.5e-4,
    "lr_schedule": "linear",
    "ent_coef": 0.01,
    "normalize_obs": False,
    "normalize_reward": False,
}

# Brax's training notebook, inverted_double_pendulum (PPO): num_timesteps 20M, reward_scaling 10, unroll_length 5,
# num_minibatches 32, num_updates_per_batch 4, discounting 0.97, learning_rate 3e-4, entropy_cost 1e-2,
# num_envs 2048, batch_size 1024 -> 1024 * 32 * 5 = 163,840 steps per update = 2048 envs x 80 steps.
BRAX_IDP = {
    "total_timesteps": 20_000_000,
    "reward_scale": 10.0,
    "num_envs": 2048,
    "num_steps": 80,
    "num_minibatches": 32,
    "update_epochs": 4,
    "gamma": 0.97,
    "lr": 3e-4,
    "ent_coef": 1e-2,
    "clip_eps": 0.3,
    "action_dist": "tanh_gaussian",
}

HEADER = f"preset: mujoco (default for {IDP}; --preset none for the plain defaults)"


def assert_values(cfg, expected: dict) -> None:
    for name, value in expected.items():
        got = getattr(cfg, name)
        if isinstance(value, float):
            assert got == np.float32(value), (name, got, value)
        else:
            assert got == value, (name, got, value)


# ----------------------------------------------------------------------------- which preset, and its values


@pytest.mark.parametrize("env", [IDP, "brax/halfcheetah", "brax/hopper"])
def test_a_brax_task_starts_from_the_mujoco_preset(env):
    # brax/halfcheetah has Brax's own settings, brax/hopper has none: both start from mujoco all the same
    args = parse(["train", "--env", env])
    assert isinstance(args, Train) and args.preset == "mujoco" and args.config.env == env
    assert_values(args.config, MUJOCO)


@pytest.mark.parametrize("env", ["CartPole-v1", "Pendulum-v1", "MountainCarContinuous-v0"])
def test_gymnax_envs_keep_the_plain_defaults(env):
    args = parse(["train", "--env", env])
    assert args.preset == "none"
    assert_values(args.config, {"env": env, **PLAIN})
    assert parse(["train"]).config.env == "CartPole-v1"


def test_flags_override_the_default_preset():
    args = parse(
        ["train", "--env", IDP, "--lr", "1e-3", "--num-envs", "2", "--num-minibatches", "8", "--no-normalize-reward"]
    )
    assert args.preset == "mujoco"
    assert_values(args.config, {**MUJOCO, "lr": 1e-3, "num_envs": 2, "num_minibatches": 8, "normalize_reward": False})


@pytest.mark.parametrize("form", [["--preset", "none"], ["--preset=none"]])
def test_preset_none_gives_the_plain_defaults_on_a_brax_task(form):
    args = parse(["train", "--env", IDP, *form])
    assert args.preset == "none"
    assert_values(args.config, {"env": IDP, **PLAIN})


def test_the_ppo1_preset_is_the_papers_released_code():
    args = parse(["train", "--env", IDP, "--preset", "ppo1"])
    assert args.preset == "ppo1"
    for name, value in PPO1.items():
        assert (
            np.float32(getattr(args.config, name)) == np.float32(value)
            if isinstance(value, float)
            else (getattr(args.config, name) == value)
        ), name


def test_an_explicit_preset_wins_over_the_default():
    args = parse(["train", f"--env={IDP}", "--preset", "brax", "--update-epochs", "2"])
    assert args.preset == "brax"
    assert_values(args.config, {**BRAX_IDP, "update_epochs": 2})


def test_help_shows_the_default_presets_values(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    with pytest.raises(SystemExit):
        parse(["train", "--env", IDP, "--help"])
    text = capsys.readouterr().out
    assert "--preset {mujoco,ppo1,brax,xminigrid,none}" in text and "(default: mujoco)" in text
    assert "(default: 2048)" in text and "(default: 1000000)" in text  # num_steps, total_timesteps


# ----------------------------------------------------------------------------- printed and recorded


@pytest.fixture
def runs(monkeypatch):
    """What ``ppo-jax train`` hands to ``run_task``: (config, RunOptions) per call, nothing compiled."""
    calls = []

    def fake_run_task(task, cfg, options, **kwargs):
        calls.append((task, cfg, options))
        return 0

    monkeypatch.setattr(train_cli, "run_task", fake_run_task)
    return calls


@pytest.mark.parametrize(
    "args, header, preset, expected",
    [
        ([], HEADER, "mujoco", MUJOCO),
        (["--preset", "mujoco"], "preset: mujoco", "mujoco", MUJOCO),
        (["--preset", "brax"], "preset: brax", "brax", BRAX_IDP),
        (["--preset", "none"], None, None, PLAIN),
    ],
)
def test_the_header_names_the_preset_and_the_run_records_it(runs, capsys, args, header, preset, expected):
    assert main(["train", "--env", IDP, *args, "--seeds", "2"]) == 0
    ((task, cfg, options),) = runs
    assert task.name == "ppo" and options.seeds == [0, 1]
    assert options.preset == preset  # metadata.json's "run" (RunOptions) holds it
    assert_values(cfg, expected)
    lines = capsys.readouterr().out.splitlines()
    if header is None:
        assert not [line for line in lines if line.startswith("preset")]
    else:
        assert lines[0] == header


def test_a_run_without_a_preset_prints_no_preset_line(runs, capsys):
    assert main(["train", "--env", "Pendulum-v1"]) == 0
    ((_, cfg, options),) = runs
    assert options.preset is None and cfg.num_envs == 4
    assert "preset" not in capsys.readouterr().out


def test_a_bad_preset_for_the_env_is_refused_before_anything_runs(runs, capsys):
    assert main(["train", "--env", "CartPole-v1", "--preset", "brax"]) == 2
    assert main(["train", "--env", "brax/walker2d", "--preset", "brax"]) == 2  # Brax's Walker2d settings are SAC's
    err = capsys.readouterr().err
    assert err.count("error: preset brax") == 2 and "Use --preset mujoco" in err and "Traceback" not in err
    assert runs == []


# ----------------------------------------------------------------------------- resuming a run from before presets


def unfinished_run(path, cfg: dict, run: dict, task: str = "ppo") -> None:
    """A run directory as an interrupted run leaves it (its checkpoints are not read here)."""
    path.mkdir()
    (path / "config.json").write_text(json.dumps({"task": task, **cfg, "seeds": [0]}))
    (path / "metadata.json").write_text(json.dumps({"status": "interrupted", "run": run}))


def test_resuming_a_brax_run_from_before_default_presets_keeps_its_config(tmp_path, runs, capsys):
    from ppo_jax.rl.config import PPOConfig

    out = tmp_path / "run"
    old = PPOConfig(env=IDP, total_timesteps=4096, num_envs=4, num_steps=64)  # plain defaults, as runs were started
    # metadata.json's "run" of an older version: no preset entry
    unfinished_run(
        out,
        old.to_dict(),
        {"seeds": [0], "pretrain_seed": 0, "eval_episodes": 16, "checkpoint_every": "4", "segment_length": 4},
    )
    assert main(["train", "--env", IDP, "--out", str(out), "--resume"]) == 0
    ((_, cfg, options),) = runs
    assert cfg == old and options.preset is None and options.checkpoint_every == "4"
    assert "preset" not in capsys.readouterr().out  # a resumed run goes on with its own config

    # --preset given again must match the run's (it started from none)
    assert main(["train", "--env", IDP, "--out", str(out), "--resume", "--preset", "mujoco"]) == 2
    err = capsys.readouterr().err
    assert "--preset: the run has preset none, this command gives mujoco" in err
    assert main(["train", "--env", IDP, "--out", str(out), "--resume", "--preset", "none"]) == 0


# ----------------------------------------------------------------------------- what train and rlhf share


def test_each_task_knows_its_command():
    from ppo_jax.cli import SUBCOMMANDS
    from ppo_jax.lm.task import RLHF
    from ppo_jax.rl.config import PPOConfig
    from ppo_jax.rl.task import PPO
    from ppo_jax.task_contract import Task

    assert (PPO.name, PPO.command) == ("ppo", "train") and (RLHF.name, RLHF.command) == ("rlhf", "rlhf")
    assert SUBCOMMANDS["train"] is Train and SUBCOMMANDS["rlhf"] is Rlhf
    other = Task(name="other", config_class=PPOConfig, metric_names=("x",), score="x", final_fraction=0.1, engine="e")
    assert other.command == "other"  # without one: the task's name


def test_resuming_with_the_other_tasks_command_names_the_right_one(tmp_path, runs, capsys):
    from ppo_jax.lm.config import RlhfConfig

    out = tmp_path / "my run"
    unfinished_run(out, RlhfConfig().to_dict(), {"seeds": [0]}, task="rlhf")
    assert main(["train", "--out", str(out), "--resume"]) == 2
    assert f"holds a rlhf run: resume it with ppo-jax rlhf --out '{out}' --resume." in capsys.readouterr().err
    assert runs == []


# Written out: every run flag both commands take, with its default.
RUN_FLAGS = {
    "seeds": 1,
    "seed": 0,
    "out": None,
    "force": False,
    "checkpoint_every": None,
    "keep_checkpoints": 2,
    "resume": False,
    "log": (),
    "progress": True,
}


def help_entries(text: str) -> dict[str, str]:
    """``{flag line: its help text}`` from tyro's ``--help`` box (an entry runs until the next line with a flag)."""
    entries, flag = {}, None
    for line in text.splitlines():
        line = line.strip().strip("│╭╰─").strip()
        if line.startswith("-"):
            flag, _, rest = line.partition("  ")
            entries[flag] = rest.strip()
        elif flag is not None and line:
            entries[flag] += " " + line
    return {flag: " ".join(text.split()) for flag, text in entries.items()}  # wrapped at another column: same words


def test_train_and_rlhf_take_the_same_run_flags_with_one_help_text(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    for command, cls in (("train", Train), ("rlhf", Rlhf)):
        args = parse([command])
        assert isinstance(args, cls) and {name: getattr(args, name) for name in RUN_FLAGS} == RUN_FLAGS
    helps = {}
    for command in ("train", "rlhf"):
        with pytest.raises(SystemExit):
            parse([command, "--help"])
        helps[command] = help_entries(capsys.readouterr().out)
    flags = (
        "--seeds INT",
        "--seed INT",
        "--out DIR",
        "--force",
        "--checkpoint-every {None}|STR",
        "--keep-checkpoints INT",
        "--resume",
        "--log [{tensorboard,wandb} [{tensorboard,wandb} ...]]",
        "--progress, --no-progress",
    )
    for flag in flags:
        assert flag in helps["train"] and helps["train"][flag] == helps["rlhf"][flag], flag
    assert "(deleted only once the new run is complete)" in helps["rlhf"]["--force"]  # the rlhf text had drifted
    args = parse(
        ["rlhf", "--seeds", "3", "--seed", "5", "--no-progress", "--keep-checkpoints", "4", "--checkpoint-every", "10%"]
    )
    assert (args.seeds, args.seed, args.progress, args.keep_checkpoints, args.checkpoint_every) == (
        3,
        5,
        False,
        4,
        "10%",
    )
