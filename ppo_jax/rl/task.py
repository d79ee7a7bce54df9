"""PPO on an environment as a ``Task``: its metric names (``metrics``), its score, its engine (``ppo_jax.rl.train``)."""

from __future__ import annotations

from ppo_jax.final_values import NON_FINITE
from ppo_jax.rl.config import PPOConfig
from ppo_jax.rl.metrics import EVAL_NAMES, METRIC_NAMES
from ppo_jax.task_contract import Task


def _engine():
    """``ppo_jax.rl.train``, imported on first use (see ``ppo_jax.task_contract``)."""
    from ppo_jax.rl import train

    return train


PPO = Task(
    name="ppo",
    config_class=PPOConfig,
    metric_names=METRIC_NAMES,
    score="episode_return",
    final_fraction=0.05,
    engine=_engine,
    score_label="episodic return",
    eval_names=EVAL_NAMES,
    summed_metrics=("episodes", NON_FINITE),
    reported=("episode_return",),
    env_field="env",
    steps_per_update_fields=("num_envs", "num_steps"),
    command="train",
    presets="ppo_jax.rl.presets",
)
