"""Presets: named base configs from the literature (``ppo-jax train --preset mujoco``).

A preset only sets a PPOConfig's fields; flags given with it override them,
and the run's config.json holds every resulting value (metadata.json's ``run``
records the preset's name).

* ``mujoco``: the PPO paper's MuJoCo settings, Schulman et al. (2017), Table 3
  (horizon 2048, Adam 3e-4, 10 epochs, minibatch 64, gamma 0.99, lambda 0.95,
  clip 0.2; sec. 6.1: one environment, no entropy bonus, separate 64x64 tanh
  policy and value networks, a state-independent log-std Gaussian, 1M steps).
  Where the paper is silent, ppo2-era details (OpenAI baselines ppo2's MuJoCo
  defaults): observation and reward normalization, gradient clip 0.5, value
  clipping; and a constant learning rate (our choice: ppo2's MuJoCo defaults
  anneal it, ``lr = 3e-4 * f``). The paper's released code is ppo1: see ``ppo1``.
* ``ppo1``: the code the paper's MuJoCo results came from, OpenAI baselines
  ppo1 (``run_mujoco.py`` calling ``pposgd_simple.learn``): the Table 3 values
  above, with the learning rate *and* the clip range annealed linearly to 0
  (``schedule='linear'``), no value clipping, no gradient clipping, no reward
  normalization, observations normalized and clipped to +-5 (``MlpPolicy``'s
  ``ob_rms``), Adam epsilon 1e-5, and the value loss ``(V - R)^2`` added with
  weight 1 (``vf_coef`` 2 on our ``0.5 (V - R)^2``). What still differs: ppo1
  standardizes advantages over the whole batch (ours: per minibatch) and
  initializes with ``normc`` (ours: orthogonal).
* ``brax``: Brax PPO's published settings for its tasks (the Brax training
  notebook, one entry per task): massively parallel envs for an accelerator,
  tanh-squashed Gaussian with a state-dependent std (softplus + 0.001), 4x32
  policy and 5x256 value networks with swish, lecun-uniform init, clip 0.3, no gradient clipping, observations normalized without a clip. Brax
  collects ``batch_size * num_minibatches`` unrolls of ``unroll_length`` steps
  per update from ``num_envs`` envs; here that is ``num_steps = batch_size *
  num_minibatches * unroll_length / num_envs`` steps per env, the same samples
  per update and per minibatch (GAE runs over the whole ``num_steps``, not per
  unroll). Brax's Hopper and Walker2d settings are for SAC, and Reacher's use
  an action repeat: the preset refuses those tasks.
* ``xminigrid``: XLand-MiniGrid's own single-task PPO (Nikulin et al. 2024;
  github.com/corl-team/xland-minigrid, ``training/train_single_task.py``'s
  ``TrainConfig``): 8192 envs x 16 steps, 16 minibatches, one epoch, Adam 1e-3
  (eps 1e-8) annealed linearly, clip 0.2, entropy 0.01, value 0.5, gradient clip
  0.5, gamma 0.99, lambda 0.95, 1M steps, a GRU of 1024 with a 256-wide head.
  What differs: their network embeds the grid's tiles and the previous action
  and reward before the GRU (ours: an MLP torso over the flattened view). Sized
  for an accelerator; tests/rl/test_xminigrid.py's CPU budget learns DoorKey-5x5 in 150k
  steps. For ``xminigrid/<task>`` envs only.
* ``none``: no preset, PPOConfig's own defaults (CleanRL's ppo.py: 4 envs x 128
  steps, lr 2.5e-4 annealed, entropy 0.01, ...).

Without ``--preset``, ``ppo-jax train`` starts from ``default_preset(env)``:
``mujoco`` for a Brax task, ``none`` for every other env. The plain defaults are
discrete-control settings (CartPole's); ``mujoco`` is the PPO paper's setting for
the MuJoCo tasks Brax reimplements, and learns within a CPU's budget
(docs/results/brax.md). ``brax`` is not the default,
even for the tasks it has: it is sized for an accelerator (2048-4096 envs,
2M-100M steps; one update of inverted_double_pendulum takes 163,840 steps, so a
300k-step run would make one update). gymnax's continuous-control envs
(Pendulum-v1, MountainCarContinuous-v0, ...) keep the plain defaults, and their
runs stay what they were: nothing here shows ``mujoco`` (one env, 1M steps)
fits them better, and the experiments on them use CleanRL's continuous-control
settings, written in their specs. The run prints the preset it started from and
records it in metadata.json's ``run``. Sweeps apply no preset by themselves (a
spec's ``base:`` says everything).
"""

from __future__ import annotations

import dataclasses

from ppo_jax.errors import ConfigError
from ppo_jax.rl.config import PPOConfig

PRESETS = ("mujoco", "ppo1", "brax", "xminigrid")
NONE = "none"
"""The choice of no preset: PPOConfig's defaults (``--preset none``)."""
CHOICES = (*PRESETS, NONE)

MUJOCO = dict(
    total_timesteps=1_000_000,
    num_envs=1,
    num_steps=2048,
    num_minibatches=32,  # 2048 / 32 = minibatch 64
    update_epochs=10,
    lr=3e-4,
    lr_schedule="constant",
    gamma=0.99,
    gae_lambda=0.95,
    clip_eps=0.2,
    ent_coef=0.0,
    hidden_sizes=(64, 64),
    activation="tanh",
    action_dist="gaussian",
    normalize_obs=True,
    normalize_reward=True,
    max_grad_norm=0.5,
    clip_vloss=True,
)

PPO1 = dict(
    MUJOCO,
    lr_schedule="linear",
    clip_schedule="linear",
    clip_vloss=False,
    max_grad_norm=float("inf"),
    normalize_reward=False,
    obs_clip=5.0,
    adam_eps=1e-5,
    vf_coef=2.0,
)

BRAX_COMMON = dict(
    hidden_sizes=(32, 32, 32, 32),
    critic_hidden_sizes=(256, 256, 256, 256, 256),
    activation="silu",
    action_dist="tanh_gaussian",
    policy_std="state",
    kernel_init="lecun_uniform",
    lr=3e-4,
    lr_schedule="constant",
    gae_lambda=0.95,
    clip_eps=0.3,
    vf_coef=0.5,
    clip_vloss=False,
    max_grad_norm=float("inf"),
    adam_eps=1e-8,
    normalize_obs=True,
    obs_clip=float("inf"),
    normalize_reward=False,
)

# task: (num_timesteps, reward_scaling, unroll_length, num_minibatches, num_updates_per_batch, discounting,
#        learning_rate, entropy_cost, num_envs, batch_size) -- Brax's training notebook, PPO entries.
BRAX_TASKS = {
    "brax/inverted_pendulum": (2_000_000, 10, 5, 32, 4, 0.97, 3e-4, 1e-2, 2048, 1024),
    "brax/inverted_double_pendulum": (20_000_000, 10, 5, 32, 4, 0.97, 3e-4, 1e-2, 2048, 1024),
    "brax/ant": (50_000_000, 10, 5, 32, 4, 0.97, 3e-4, 1e-2, 4096, 2048),
    "brax/humanoid": (50_000_000, 0.1, 10, 32, 8, 0.97, 3e-4, 1e-3, 2048, 1024),
    "brax/humanoidstandup": (100_000_000, 0.1, 15, 32, 8, 0.97, 6e-4, 1e-2, 2048, 1024),
    "brax/halfcheetah": (50_000_000, 1, 20, 32, 8, 0.95, 3e-4, 1e-3, 2048, 512),
    "brax/pusher": (50_000_000, 5, 30, 16, 8, 0.95, 3e-4, 1e-2, 2048, 512),
}


XMINIGRID = dict(
    total_timesteps=1_000_000,
    num_envs=8192,
    num_steps=16,
    num_minibatches=16,
    update_epochs=1,
    lr=1e-3,
    lr_schedule="linear",
    adam_eps=1e-8,
    clip_eps=0.2,
    ent_coef=0.01,
    vf_coef=0.5,
    max_grad_norm=0.5,
    gamma=0.99,
    gae_lambda=0.95,
    network="gru",
    rnn_hidden_size=1024,
    head_hidden_sizes=(256,),
)
XMINIGRID_SUITE = "xminigrid"
"""The environment suite (``ppo_jax.rl.envs.SUITES``) whose envs the ``xminigrid`` preset is for."""


def brax_values(env: str) -> dict:
    """The ``brax`` preset's fields for Brax task ``env`` (an env id, ``brax/ant``)."""
    steps, scale, unroll, minibatches, epochs, gamma, lr, ent, envs, batch = BRAX_TASKS[env]
    return dict(
        BRAX_COMMON,
        total_timesteps=steps,
        reward_scale=float(scale),
        num_envs=envs,
        num_steps=batch * minibatches * unroll // envs,
        num_minibatches=minibatches,
        update_epochs=epochs,
        gamma=gamma,
        lr=lr,
        ent_coef=ent,
    )


def default_preset(env: str) -> str:
    """The preset ``ppo-jax train --env env`` starts from without ``--preset``: its suite's (mujoco for a Brax task),
    none for an unknown env."""
    from ppo_jax.rl.envs import suite_of  # gymnax: imported on first use (see ppo_jax.task_contract)

    suite = suite_of(env)
    return NONE if suite is None else suite.default_preset


def preset_values(name: str, env: str) -> dict:
    """The fields preset ``name`` sets for environment ``env`` (none: no fields); ConfigError if it does not fit the env."""
    if name not in CHOICES:
        raise ConfigError(f"unknown preset {name!r}: choose one of {', '.join(CHOICES)} (the plain defaults).")
    from ppo_jax.rl.envs import SUITES, check_env, has_discrete_actions  # gymnax: imported on first use

    check_env(env)
    if name == NONE:
        return {}
    if name in ("mujoco", "ppo1"):
        if has_discrete_actions(env):
            raise ConfigError(
                f"preset {name} is the PPO paper's continuous-control setting; {env} has discrete actions. "
                "Use it with a continuous task (brax/halfcheetah, Pendulum-v1, ...)."
            )
        return dict(MUJOCO if name == "mujoco" else PPO1)
    if name == "xminigrid":
        suite = SUITES[XMINIGRID_SUITE]
        if not suite.owns(env):
            raise ConfigError(
                f"preset xminigrid holds XLand-MiniGrid's PPO settings for its grid worlds ({suite.prefix}<task>); "
                f"{env} is not one. Give the hyperparameters as flags."
            )
        return dict(XMINIGRID)
    if env not in BRAX_TASKS:
        raise ConfigError(
            f"preset brax holds Brax's published PPO settings for {', '.join(BRAX_TASKS)}; "
            f"there are none for {env}. Use --preset mujoco, or give the hyperparameters as flags."
        )
    return brax_values(env)


def apply_preset(name: str, cfg: PPOConfig) -> PPOConfig:
    """``cfg`` with preset ``name``'s values for ``cfg.env`` in place."""
    return dataclasses.replace(cfg, **preset_values(name, cfg.env))
