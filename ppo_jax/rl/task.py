"""PPO on an environment as a ``Task``: its metric names, its score, its engine (``ppo_jax.rl.train``)."""

from __future__ import annotations

from ppo_jax.final_values import NON_FINITE
from ppo_jax.rl.config import PPOConfig
from ppo_jax.task_contract import Task

METRIC_NAMES = (
    "episode_return",
    "episode_length",
    "episodes",
    "policy_loss",
    "value_loss",
    "entropy",
    "approx_kl",
    "clip_fraction",
    "explained_variance",
    "grad_norm",
    "loss",
    "kl",
    "update_fraction",
    "learning_rate",
    "clip_eps",
    "ent_coef",
    "kl_beta",
    NON_FINITE,
)
"""Per-update metrics of ``ppo_jax.rl.train.train`` (each ``[num_updates]``): episodic return and length (mean over
envs of each env's last finished episode; NaN until one has ended), episodes finished during the rollout, the loss
terms averaged over the update's minibatch steps, the exact KL(pi_old || pi_new) after the update, the share of
minibatch steps taken, the coefficients in effect (learning rate, clip_eps, ent_coef, kl_beta), and non_finite
(1.0 when the loss or the training state is NaN or infinite after the update: ``ppo_jax.scan_updates``)."""

EVAL_NAMES = ("eval_return_stochastic", "eval_return_deterministic")
"""Per run: mean return of the final parameters over fresh episodes (``ppo_jax.rl.evaluate``), each policy."""

PPO = Task(
    name="ppo",
    config_class=PPOConfig,
    metric_names=METRIC_NAMES,
    score="episode_return",
    final_fraction=0.05,
    engine="ppo_jax.rl.train",
    score_label="episodic return",
    eval_names=EVAL_NAMES,
    summed_metrics=("episodes", NON_FINITE),
    reported=("episode_return",),
    env_field="env",
    steps_per_update_fields=("num_envs", "num_steps"),
    command="train",
    presets="ppo_jax.rl.presets",
)
