"""RL for language models as two ``Task`` records sharing one engine (``ppo_jax.lm.train``).

``lm`` (``ppo-jax lm``, LmConfig): verifiable tasks and the GRPO family, judged
by sampled accuracy. ``rlhf`` (``ppo-jax rlhf``, RlhfConfig): token-level
PPO-RLHF on the copy task, judged by the programmatic score, with the metric
names it had before 0.3.0 so its old run and sweep directories still load and
report.
"""

from __future__ import annotations

from ppo_jax.final_values import NON_FINITE
from ppo_jax.lm.config import PRETRAIN_FIELDS, LmConfig, RlhfConfig
from ppo_jax.lm.memory_switches import WHAT_TO_TRY
from ppo_jax.lm.metrics import LM_EVAL_NAMES, LM_METRIC_NAMES, RLHF_METRIC_NAMES
from ppo_jax.task_contract import Task


def _engine():
    """``ppo_jax.lm.train``, imported on first use (see ``ppo_jax.task_contract``)."""
    from ppo_jax.lm import train

    return train


RLHF = Task(
    name="rlhf",
    config_class=RlhfConfig,
    metric_names=RLHF_METRIC_NAMES,
    score="true_score",
    final_fraction=0.1,
    engine=_engine,
    score_label="programmatic score",
    summed_metrics=(NON_FINITE,),
    reported=("score", "true_score", "kl_ref", "response_length", "entropy"),
    env_id="copy",
    score_bounds=(0.0, 1.0),
    score_bounds_source=(
        "the programmatic score's bounds: 0 = no position of the intended response right, "
        "1 = every position (RLHF copy task; not a random policy)"
    ),
    shared_fields=PRETRAIN_FIELDS,
    steps_per_update_fields=("num_prompts", "group_size"),
    command="rlhf",
    presets="ppo_jax.lm.presets",
    memory_hint=WHAT_TO_TRY,
)
"""The score a report ranks by is the programmatic one (true_score): the reward model's ``score`` is a proxy that
PPO can over-optimise (Gao et al. 2022). Final values: mean over the last 10% of updates."""

LM = Task(
    name="lm",
    config_class=LmConfig,
    metric_names=LM_METRIC_NAMES,
    score="accuracy",
    final_fraction=0.1,
    engine=_engine,
    score_label="sampled pass@1",
    eval_names=LM_EVAL_NAMES,
    summed_metrics=(NON_FINITE,),
    reported=("accuracy", "sample_entropy", "response_length", "kl_ref", "kl_ref_estimate"),
    env_field="problem",
    score_bounds=(0.0, 1.0),
    score_bounds_source="sampled pass@1's bounds: 0 = no answer right, 1 = every answer (lm task; not a random policy)",
    shared_fields=PRETRAIN_FIELDS,
    steps_per_update_fields=("num_prompts", "group_size"),
    command="lm",
    unit="sequences",
    presets="ppo_jax.lm.presets",
    memory_hint=WHAT_TO_TRY,
)
"""Judged by sampled pass@1 over the last 10% of updates; the final evaluation adds pass@1 and pass@group_size on
``eval_prompts`` fresh prompts."""


def task_of(cfg) -> Task:
    """The task a config belongs to: rlhf for an RlhfConfig, lm otherwise."""
    return RLHF if isinstance(cfg, RlhfConfig) else LM
