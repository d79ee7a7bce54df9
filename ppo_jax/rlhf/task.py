"""Token-level RLHF on the copy task as a ``Task``: metric names, score, the shared pretraining, its engine."""

from __future__ import annotations

from ppo_jax.final_values import NON_FINITE
from ppo_jax.rlhf.config import PRETRAIN_FIELDS, RlhfConfig
from ppo_jax.task_contract import Task

METRIC_NAMES = (
    "score",
    "true_score",
    "kl_ref",
    "kl_ref_sample",
    "response_length",
    "eos_fraction",
    "entropy",
    "total_reward",
    "policy_loss",
    "value_loss",
    "approx_kl",
    "clip_fraction",
    "explained_variance",
    "grad_norm",
    "loss",
    "learning_rate",
    NON_FINITE,
)
"""Per-update metrics of ``ppo_jax.rlhf.train.train``, each the mean over the update's sequences (rollout) or its
minibatch steps (loss terms): score (the reward model's, or the programmatic one), true_score (programmatic),
kl_ref (sum over response tokens of the exact KL(pi || pi_ref) per state), kl_ref_sample (sum of log pi -
log pi_ref at the sampled tokens: the quantity in the reward), response_length (tokens, EOS included),
eos_fraction, entropy (per response token), total_reward (score - beta * kl_ref_sample), the PPO loss terms per
response token, the learning rate in effect, and non_finite (1.0 when the loss or the training state is NaN or
infinite after the update: ``ppo_jax.scan_updates``)."""

RLHF = Task(
    name="rlhf",
    config_class=RlhfConfig,
    metric_names=METRIC_NAMES,
    score="true_score",
    final_fraction=0.1,
    engine="ppo_jax.rlhf.train",
    score_label="programmatic score",
    summed_metrics=(NON_FINITE,),
    reported=("score", "true_score", "kl_ref", "response_length", "entropy"),
    env_id="copy",
    shared_fields=PRETRAIN_FIELDS,
    steps_per_update_fields=("num_prompts",),
    command="rlhf",
)
"""The score a report ranks by is the programmatic one (true_score): the reward model's ``score`` is a proxy that
PPO can over-optimise (Gao et al. 2022). Final values: mean over the last 10% of updates."""
